//! `scene`: list, compile, run and check scene tests.

fn main() -> std::process::ExitCode {
    scene_cli::main(
        scene_cli::Layout::for_scenes_dir(scenes::scenes_dir()),
        scenes::registry(),
    )
}
