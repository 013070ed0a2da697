//! `scene`: list, compile, run and check scene tests.

fn main() -> std::process::ExitCode {
    scene_cli::main(scenes::layout(), scenes::registry())
}
