//! `cargo test -p scenes`: one trial per `scene::case` on `SCENE_PLATFORM`.

fn main() -> std::process::ExitCode {
    scene_cli::testing::main(scenes::layout(), scenes::registry())
}
