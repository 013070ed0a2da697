//! Warm lookups in the persistent kernel cache.
//!
//! - `cache_lookup/warm_callable_38/cold_digests`: assembling a 38-unit
//!   callable (orchestration + 37 incores of decode_layer) purely from the
//!   cache with `Builder::build`, as a fresh process would (the builder's
//!   in-process artifacts forgotten first): every source and header is read
//!   and hashed for the keys, then every unit entry and the callable entry
//!   are read, verified (size + blake3) and touched.
//! - `cache_lookup/warm_callable_38/memoised_digests`: the same with file
//!   digests memoised by (path, mtime, size), as a second lookup in one
//!   process pays.
//!
//! The cold compile time of the same units is measured once during setup
//! (criterion would need ten cold builds) and printed for BENCHMARKS.md.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use scene_harness::compile::callable_spec;
use scene_harness::scene::discover;
use scene_kernels::{BuildOptions, Builder, CacheConfig, CallableSpec, Toolchain};

const UNITS: usize = 38;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ has a parent")
        .to_path_buf()
}

/// decode_layer's callable cut to `UNITS` units (lookups never run it).
fn spec() -> CallableSpec {
    let root = root();
    let scene = discover(&root.join("tests/scenes"))
        .expect("tests/scenes is readable")
        .into_iter()
        .map(|s| s.expect("every package scene is valid"))
        .find(|s| s.name == "decode_layer")
        .expect("decode_layer scene");
    let mut spec = callable_spec(
        &scene,
        &root,
        &scene_device::include_dir(),
        &scene_harness::Platform::builtin(scene_kernels::BuiltinPlatform::A2a3Sim),
    );
    assert!(spec.incores.len() >= UNITS - 1, "decode_layer shrank");
    spec.incores.truncate(UNITS - 1);
    spec
}

fn bench(c: &mut Criterion) {
    println!(
        "cache_lookup compares: assembling a {UNITS}-unit callable from the persistent \
         cache with file digests recomputed (cold_digests) vs memoised by path, mtime and \
         size (memoised_digests); setup also prints the cold compile time of the same units"
    );
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let mut config = CacheConfig::new(cache_dir.path());
    config.prune_after_publish = false;
    let tc = bench_toolchain("a2a3sim");
    let builder = Builder::new(
        root(),
        tc,
        BuildOptions {
            workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            work_dir: None,
            cache: Some(config),
            ..BuildOptions::default()
        },
    )
    .expect("builder");
    let spec = spec();

    let started = Instant::now();
    let out = builder.build_all(std::slice::from_ref(&spec));
    let cold = started.elapsed();
    out.callables[0].as_ref().expect("decode_layer builds");
    eprintln!(
        "cold compile of {} units on {} workers: {:.2} s",
        out.units.len(),
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
        cold.as_secs_f64()
    );
    assert_eq!(out.units.len(), UNITS);

    let mut group = c.benchmark_group("cache_lookup/warm_callable_38");
    group.bench_function("cold_digests", |b| {
        b.iter(|| {
            builder.forget_file_digests();
            builder.forget_artifacts();
            builder.build(&spec).expect("warm hit")
        })
    });
    group.bench_function("memoised_digests", |b| {
        b.iter(|| {
            builder.forget_artifacts();
            builder.build(&spec).expect("warm hit")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The platform's toolchain as `scene` would resolve it: `SCENE_CC` /
/// `SCENE_LD` applied, bare tool names found on `PATH`.
fn bench_toolchain(platform: &str) -> Toolchain {
    let mut tc = Toolchain::builtin(platform)
        .expect("toolchain")
        .with_search_path(std::env::var_os("PATH"));
    if let Some(cc) = std::env::var_os("SCENE_CC").filter(|v| !v.is_empty()) {
        tc.compiler = cc.into();
    }
    if let Some(ld) = std::env::var_os("SCENE_LD").filter(|v| !v.is_empty()) {
        tc.linker = ld.into();
    }
    tc
}
