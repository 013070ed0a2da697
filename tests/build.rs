//! The goldens' code identity for the golden cache: blake3 over the
//! registered goldens' sources (`src/goldens/`) and the library they call
//! (`crates/golden/src/`: tensors, reference math, fixtures), so an edit to
//! any of them recomputes every cached Rust golden.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.parent().unwrap_or(&manifest).to_path_buf();
    let dirs = [manifest.join("src/goldens"), root.join("crates/golden/src")];
    let mut all = Vec::new();
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
        files(d, &mut all);
    }
    all.sort();
    let mut h = blake3::Hasher::new();
    h.update(b"scenes golden code v1\0");
    for f in &all {
        let rel = f.strip_prefix(&root).unwrap_or(f);
        let bytes = std::fs::read(f).expect("a golden source is readable");
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&[0]);
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    println!(
        "cargo:rustc-env=SCENE_GOLDEN_CODE_DIGEST={}",
        h.finalize().to_hex()
    );
}
