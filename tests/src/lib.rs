//! The scenes package: scene directories under `scenes/`, the goldens they
//! name, and the entry points (`scene` binary, `cargo test -p scenes`).
//!
//! Adding a scene whose golden is already registered needs no Rust change:
//! drop a directory with `scene.toml` and its C sources under `scenes/`.

pub mod comparisons;
pub mod goldens;

use std::path::PathBuf;

use scene_cli::Layout;
use scene_harness::GoldenRegistry;

/// Where the scenes and the workspace root are.
pub fn layout() -> Layout {
    // Run time first: `cargo run` and nextest (also from an archive
    // extracted with `--workspace-remap`) set it to this package's current
    // checkout; the compile-time value names the checkout it was built in.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|d| d.join("scenes").is_dir())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir.clone());
    Layout {
        root,
        scenes_dir: manifest_dir.join("scenes"),
    }
}

/// Every golden and custom comparison the scenes use, by name, with the
/// goldens' code identity (a build-time digest of `src/goldens/` and
/// `crates/golden/src/`, see `build.rs`) so the golden cache can keep their
/// results.
pub fn registry() -> GoldenRegistry {
    comparisons::register(goldens::register(GoldenRegistry::new()))
        .with_code_identity(env!("SCENE_GOLDEN_CODE_DIGEST"))
}
