//! `cargo test -p scenes`: one trial per `scene::case` on `SCENE_PLATFORM`.

fn main() -> std::process::ExitCode {
    scene_cli::testing::main(
        scene_cli::Layout::for_scenes_dir(scenes::scenes_dir()),
        scenes::registry(),
    )
}
