//! The scenes package: scene directories under `scenes/`, the goldens they
//! name, and the `cargo test -p scenes` target. The `scene` binary
//! (package `scene-cli`) links this library for its golden registry.
//!
//! Adding a scene whose golden is already registered needs no Rust change:
//! drop a directory with `scene.toml` and its C sources under `scenes/`.

pub mod comparisons;
pub mod goldens;

use std::path::PathBuf;

use scene_harness::GoldenRegistry;

/// This package's directory (`tests/`, holding `scenes/`), read at run
/// time first: `cargo run` and nextest (also from an archive extracted with
/// `--workspace-remap`) set `CARGO_MANIFEST_DIR` to the current checkout of
/// the package being run; the compile-time value names the checkout it was
/// built in.
pub fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|d| d.join("scenes").is_dir())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// Where the scenes are: `tests/scenes/` of [`package_dir`].
pub fn scenes_dir() -> PathBuf {
    package_dir().join("scenes")
}

/// Every golden and custom comparison the scenes use, by name, with the
/// goldens' code identity (a build-time digest of `src/goldens/` and
/// `crates/golden/src/`, see `build.rs`) so the golden cache can keep their
/// results.
pub fn registry() -> GoldenRegistry {
    comparisons::register(goldens::register(GoldenRegistry::new()))
        .with_code_identity(env!("SCENE_GOLDEN_CODE_DIGEST"))
}
