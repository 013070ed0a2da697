//! The scenes package: scene directories under `scenes/`, the goldens they
//! name, and the entry points (`scene` binary, `cargo test -p scenes`).
//!
//! Adding a scene whose golden is already registered needs no Rust change:
//! drop a directory with `scene.toml` and its C sources under `scenes/`.

pub mod goldens;

use std::path::PathBuf;

use scene_cli::Layout;
use scene_harness::GoldenRegistry;

/// Where the scenes and the workspace root are.
pub fn layout() -> Layout {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir.clone());
    Layout {
        root,
        scenes_dir: manifest_dir.join("scenes"),
    }
}

/// Every golden the scenes use, by name, with their code identity (a
/// build-time digest of `src/goldens/` and `crates/golden/src/`, see
/// `build.rs`) so the golden cache can keep their results.
pub fn registry() -> GoldenRegistry {
    goldens::register(GoldenRegistry::new()).with_code_identity(env!("SCENE_GOLDEN_CODE_DIGEST"))
}
