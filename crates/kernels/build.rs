//! Computes the compile-logic token: a hash of the sources that decide how a
//! unit is compiled, linked and extracted. It is part of every unit key, so a
//! change to that logic can never reuse artifacts built by the old logic.

use std::path::Path;

/// Files whose contents affect compiled artifacts. Keep in sync when moving
/// compile/link/extract code around.
const LOGIC_FILES: &[&str] = &[
    "src/toolchain.rs",
    "src/compile.rs",
    "src/link.rs",
    "src/process.rs",
    "src/image.rs",
    "src/image/elf.rs",
    "src/image/macho.rs",
    "src/image/object.rs",
    "src/key.rs",
    "src/rules.rs",
    "src/unit.rs",
    "src/unique.rs",
    "src/c/builtins.c",
    "src/c/kernel.ld",
];

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut hasher = blake3::Hasher::new();
    for file in LOGIC_FILES {
        let path = Path::new(&manifest_dir).join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let contents = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("reading compile-logic file {}: {e}", path.display()));
        hasher.update(&(file.len() as u64).to_le_bytes());
        hasher.update(file.as_bytes());
        hasher.update(&(contents.len() as u64).to_le_bytes());
        hasher.update(&contents);
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!(
        "cargo:rustc-env=SCENE_COMPILE_LOGIC_TOKEN={}",
        hasher.finalize().to_hex()
    );
}
