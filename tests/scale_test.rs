//! How `scene list` and a warm `scene compile` grow with the suite: a
//! generated suite of `vector_example` copies (each copy is a scene of 4
//! compile units: its own paths, so its own keys), measured through the
//! real binary. Prints figures for BENCHMARKS.md; asserts only counts.
//!
//! Ignored by default (the cold compile of the larger suite takes
//! minutes): `cargo test -p scenes --test scale -- --ignored --nocapture`;
//! `SCENE_SCALE_SCENES=25,250` sets the compiled sizes and
//! `SCENE_SCALE_LIST_SCENES=250,2500` the listed-only ones.

mod common;

use std::time::Instant;

use common::{TestEnv, copy_scene, run_ok};

const UNITS_PER_SCENE: usize = 4;

fn sizes(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// A private scenes dir of `n` copies of `vector_example`.
fn suite(n: usize) -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    for i in 0..n {
        copy_scene(&env, "vector_example", &format!("gen_{i:05}"));
    }
    env
}

fn timed(env: &TestEnv, args: &[&str]) -> (f64, String) {
    let started = Instant::now();
    let out = run_ok(&mut env.scene(args));
    (
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[ignore = "scale measurement: minutes of compiling"]
fn list_and_warm_compile_grow_linearly() {
    for n in sizes("SCENE_SCALE_LIST_SCENES", &[250, 2500]) {
        let env = suite(n);
        let (secs, out) = timed(&env, &["list"]);
        let cases = out.lines().count();
        assert!(cases >= n, "{cases} cases for {n} scenes");
        println!(
            "scale list: {n} scenes ({} units), {cases} cases: {secs:.3} s, {:.1} us/scene",
            n * UNITS_PER_SCENE,
            secs * 1e6 / n as f64
        );
    }
    for n in sizes("SCENE_SCALE_SCENES", &[25, 250]) {
        let env = suite(n);
        let units = n * UNITS_PER_SCENE;
        let (cold, _) = timed(&env, &["compile", "-q"]);
        let (warm, out) = timed(&env, &["compile", "-q"]);
        assert!(
            out.contains(&format!("compiled {n} callables: {n} cached, 0 compiled")),
            "{out}"
        );
        println!(
            "scale compile: {n} scenes, {units} units: cold {cold:.2} s, warm {warm:.3} s = {:.1} us/unit",
            warm * 1e6 / units as f64
        );
    }
}
