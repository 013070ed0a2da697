//! Embeds the simulator runtime in `scene`, so an installed binary
//! (`cargo install --path crates/cli`) needs no file beside it.
//!
//! Cargo cannot hand a build the file of a `cdylib` dependency (artifact
//! dependencies are unstable), so this script builds `scene-sim-runtime`
//! with a nested cargo, always in release (the simulator runs every kernel
//! of every test), into `<target>/embedded-runtime/` (its own lock, so the
//! outer build is never waited on; shared by the debug and release builds
//! of a checkout, so it is built once). The library is copied into
//! `OUT_DIR` for `include_bytes!`, with its blake3 digest beside it
//! (`SCENE_EMBEDDED_RUNTIME`, `SCENE_EMBEDDED_RUNTIME_BLAKE3`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .expect("crates/cli lies two levels below the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    for watched in [
        "crates/sim-runtime",
        "crates/abi",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let target_dir = outer_target_dir(&out_dir).join("embedded-runtime");
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "-p", "scene-sim-runtime", "--lib"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&root);
    if !target.is_empty() && target != host {
        cmd.args(["--target", &target]);
    }
    // The outer build's own settings for this script must not leak into a
    // build of another package (a target dir, a build target).
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .output()
        .expect("cargo runs (the nested build of scene-sim-runtime)");
    if !out.status.success() {
        panic!(
            "building the simulator runtime to embed failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let name = match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") => "libscene_sim_runtime.dylib",
        _ => "libscene_sim_runtime.so",
    };
    let mut built = target_dir.clone();
    if !target.is_empty() && target != host {
        built.push(&target);
    }
    built.push("release");
    built.push(name);
    let bytes = std::fs::read(&built)
        .unwrap_or_else(|e| panic!("the built runtime {} is unreadable: {e}", built.display()));
    let embedded = out_dir.join(name);
    std::fs::write(&embedded, &bytes)
        .unwrap_or_else(|e| panic!("writing {}: {e}", embedded.display()));
    println!(
        "cargo:rustc-env=SCENE_EMBEDDED_RUNTIME={}",
        embedded.display()
    );
    println!(
        "cargo:rustc-env=SCENE_EMBEDDED_RUNTIME_BLAKE3={}",
        blake3::hash(&bytes).to_hex()
    );
}

/// The outer build's target directory: the nearest ancestor of `OUT_DIR`
/// that cargo marked with `CACHEDIR.TAG`, else `OUT_DIR` itself.
fn outer_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .unwrap_or(out_dir)
        .to_path_buf()
}
