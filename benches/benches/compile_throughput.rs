//! Compile-stage throughput.
//!
//! - `cold/builder/N`: a cold build (fresh builder, nothing reused) of the
//!   decode_layer callable (40 units: 39 incores + orchestration) on N
//!   workers, in units per second.
//! - `cold/make/N`: the very same compiler and linker command lines
//!   (rendered by `scene_kernels::render_commands`) run by `make -jN` from a
//!   generated Makefile: what a plain build system gets out of the same
//!   tools. The builder/make ratio is the scheduler's overhead.
//! - `warm_plan/all_scenes`: `build_all` over every scene when every unit
//!   is already built in the builder: key hashing (every source and header
//!   re-read), dedup and assembly, i.e. what a run pays before its first
//!   case when nothing changed.
//!
//! The ratio between N = 1 and N = 2 is what matters; absolute numbers
//! depend on the machine and on what else runs on it.

use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use scene_harness::compile::callable_spec;
use scene_harness::scene::discover;
use scene_kernels::{
    BuildOptions, Builder, CallableSpec, Toolchain, plan_outline, render_commands,
};

const PLATFORM: &str = "a2a3sim";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ has a parent")
        .to_path_buf()
}

/// Specs of every scene (or only `name`), exactly as `scene compile` builds
/// them.
fn specs(only: Option<&str>) -> Vec<CallableSpec> {
    let root = root();
    let abi = scene_device::include_dir();
    let platform = scene_harness::Platform::builtin(scene_kernels::BuiltinPlatform::A2a3Sim);
    discover(&root.join("tests/scenes"))
        .expect("tests/scenes is readable")
        .into_iter()
        .map(|s| s.expect("every package scene is valid"))
        .filter(|s| only.is_none_or(|n| s.name == n))
        .map(|s| callable_spec(&s, &root, &abi, &platform))
        .collect()
}

fn builder(workers: usize, scratch: &Path) -> Builder {
    let tc = bench_toolchain(PLATFORM);
    Builder::new(
        root(),
        tc,
        BuildOptions {
            workers: NonZeroUsize::new(workers).expect("workers > 0"),
            work_dir: Some(scratch.to_path_buf()),
            cache: None,
            ..BuildOptions::default()
        },
    )
    .expect("builder")
}

/// A Makefile with one target per unit (plus the two builtins objects)
/// whose recipes are the builder's own command lines.
fn write_makefile(specs: &[CallableSpec], dir: &Path) {
    let tc = bench_toolchain(PLATFORM);
    let rendered = render_commands(&tc, &root(), specs, dir);
    for (path, contents) in &rendered.files {
        std::fs::write(path, contents).expect("write support file");
    }
    let name = |p: &Path| {
        p.file_name()
            .expect("output has a file name")
            .to_string_lossy()
            .into_owned()
    };
    // Make expands `$`; the commands are otherwise already quoted for sh.
    let recipe = |cmd: &scene_kernels::outline::ToolCommand| cmd.to_shell().replace('$', "$$");
    let mut mk = String::from(".PHONY: all\nall:");
    for unit in &rendered.units {
        write!(mk, " {}", name(&unit.output)).expect("string write");
    }
    mk.push('\n');
    for b in &rendered.builtins {
        write!(mk, "{}:\n\t{}\n", name(&b.output), recipe(&b.command)).expect("string write");
    }
    for unit in &rendered.units {
        let deps = unit
            .needs_builtins
            .and_then(|core| rendered.builtins.iter().find(|b| b.core == core))
            .map(|b| name(&b.output))
            .unwrap_or_default();
        writeln!(mk, "{}: {deps}", name(&unit.output)).expect("string write");
        for cmd in &unit.commands {
            writeln!(mk, "\t{}", recipe(cmd)).expect("string write");
        }
    }
    std::fs::write(dir.join("Makefile"), mk).expect("write Makefile");
}

fn cold(c: &mut Criterion) {
    println!(
        "cold compares: a cold build of decode_layer by the scene builder (cold/builder/N) \
         vs the same compiler and linker commands run by `make -jN` (cold/make/N), for N \
         workers; builder/make is the scheduler's overhead, N=1 vs N=2 the scaling"
    );
    let decode = specs(Some("decode_layer"));
    assert_eq!(decode.len(), 1, "decode_layer scene present");
    let units = plan_outline(&decode).units.len();
    let scratch = tempfile::tempdir().expect("tempdir");

    let mut g = c.benchmark_group("cold");
    g.sample_size(10);
    g.throughput(Throughput::Elements(units as u64));
    for workers in [1, 2] {
        g.bench_with_input(BenchmarkId::new("builder", workers), &workers, |b, &w| {
            b.iter(|| {
                // A fresh builder has nothing to reuse: every unit compiles.
                let out = builder(w, scratch.path()).build_all(&decode);
                assert!(
                    out.callables.iter().all(Result::is_ok),
                    "decode_layer builds"
                );
                out
            })
        });
    }
    let make_dir = tempfile::tempdir().expect("tempdir");
    write_makefile(&decode, make_dir.path());
    for workers in [1, 2] {
        g.bench_with_input(BenchmarkId::new("make", workers), &workers, |b, &w| {
            b.iter(|| {
                // -B: rebuild every target, so each iteration is cold too.
                let status = Command::new("make")
                    .args(["-B", "-s", &format!("-j{w}"), "-C"])
                    .arg(make_dir.path())
                    .status()
                    .expect("run make");
                assert!(status.success(), "make failed");
            })
        });
    }
    g.finish();
}

fn warm(c: &mut Criterion) {
    println!(
        "warm_plan measures: build_all over every scene when every unit is already built \
         (key hashing, dedup, assembly), against no compile at all: what a run pays before \
         its first case when nothing changed"
    );
    let all = specs(None);
    let units = plan_outline(&all).units.len();
    let scratch = tempfile::tempdir().expect("tempdir");
    let warm = builder(2, scratch.path());
    let first = warm.build_all(&all);
    assert!(
        first.callables.iter().all(Result::is_ok),
        "all scenes build"
    );

    let mut g = c.benchmark_group("warm_plan");
    g.throughput(Throughput::Elements(units as u64));
    g.bench_function("all_scenes", |b| {
        b.iter(|| {
            // Re-read and re-hash every source and header, as a new run would.
            warm.forget_file_digests();
            let out = warm.build_all(&all);
            assert_eq!(out.count(scene_kernels::UnitOutcome::Compiled), 0);
            out
        })
    });
    g.finish();
}

criterion_group!(benches, cold, warm);
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
