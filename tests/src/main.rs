//! `scene`: list, compile, run and check scene tests.

fn main() -> std::process::ExitCode {
    scene_harness::cli::main(scenes::layout(), scenes::registry())
}
