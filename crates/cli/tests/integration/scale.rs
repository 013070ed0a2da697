//! How `scene list` and a warm `scene compile` grow with the suite: a
//! generated suite of `vector_example` copies (each copy is a scene of 4
//! compile units: its own paths, so its own keys), measured through the
//! real binary. Prints figures for BENCHMARKS.md; asserts only counts.
//!
//! Ignored by default (the cold compile of the larger suite takes
//! minutes): `cargo test -p scenes --test scale -- --ignored --nocapture`;
//! `SCENE_SCALE_SCENES=25,250` sets the compiled sizes and
//! `SCENE_SCALE_LIST_SCENES=250,2500` the listed-only ones.
//!
//! `warm_compile_per_unit_is_flat` reaches 10k and 100k units without
//! compiling them cold (~25 min per 10k units here): it compiles one scene
//! for real and publishes every other scene's entries under the keys the
//! binary computes (see [`seed`]); `SCENE_SCALE_WARM_UNITS=1000,10000,100000`
//! sets its sizes (one test: `-- --ignored --nocapture warm_compile`).

use crate::common;

use std::time::Instant;

use common::{TestEnv, copy_scene, run_ok};
use scene_kernels::cache::{LocalDisk, Manifest, Part, Storage};
use scene_kernels::key::{EntryKind, KeyInputs};

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

/// The units of `vector_example` as a cache holds them after one real
/// compile: (kind, label, artifact, inputs).
type Template = Vec<(EntryKind, String, Vec<u8>, KeyInputs)>;

/// Compiles `gen_00000` for real and reads back the entries it published.
fn compile_template(env: &TestEnv) -> Template {
    run_ok(&mut env.scene(&["compile", "-q", "gen_00000"]));
    let disk = LocalDisk::new(&env.cache_dir);
    let mut template = Vec::new();
    for info in disk.list().expect("list the template's entries") {
        let raw = disk.get(&info.key).expect("read").expect("listed entry");
        let (Part::Bytes(artifact), Part::Bytes(manifest)) = (raw.artifact, raw.manifest) else {
            panic!("template entry {} is incomplete", info.key);
        };
        let m: Manifest = serde_json::from_slice(&manifest).expect("template manifest");
        template.push((m.kind, m.unit, artifact, KeyInputs(m.inputs)));
    }
    let units = template.iter().filter(|t| t.0.is_unit()).count();
    assert_eq!(units, UNITS_PER_SCENE, "template units: {template:?}");
    template
}

/// `inputs` with every occurrence of `from` replaced by `to`, in names and
/// values.
fn rewrite(inputs: &KeyInputs, from: &str, to: &str) -> KeyInputs {
    KeyInputs(
        inputs
            .0
            .iter()
            .map(|(k, v)| (k.replace(from, to), v.replace(from, to)))
            .collect(),
    )
}

/// Publishes, for scenes `gen_00001..n`, the entries a real compile of
/// each would publish, without compiling: each unit's key inputs are the
/// template's with the scene's paths (the copies are byte-identical, so
/// every file digest and include edge is the same), its key is
/// [`KeyInputs::key`] of those (the function the compile stage keys with),
/// its artifact the template's bytes under a manifest for them; each
/// callable entry is rebuilt from the new unit keys the same way.
fn seed(env: &TestEnv, template: &Template, n: usize) {
    let disk = LocalDisk::new(&env.cache_dir);
    for i in 1..n {
        let name = format!("gen_{i:05}");
        let mut renamed: Vec<(String, String)> = vec![("gen_00000".into(), name.clone())];
        for (kind, unit, artifact, inputs) in template.iter().filter(|t| t.0.is_unit()) {
            let inputs = rewrite(inputs, "gen_00000", &name);
            let key = inputs.key();
            renamed.push((template_key(template, unit).to_hex(), key.to_hex()));
            let m = Manifest::new(
                key,
                *kind,
                artifact,
                &inputs,
                &unit.replace("gen_00000", &name),
                0.5,
            );
            disk.put_unsynced(&key, artifact, &m.to_bytes())
                .expect("seed a unit entry");
        }
        for (_, unit, _, inputs) in template.iter().filter(|t| t.0 == EntryKind::Callable) {
            let inputs = renamed
                .iter()
                .fold(inputs.clone(), |acc, (from, to)| rewrite(&acc, from, to));
            let key = inputs.key();
            // A callable entry's artifact is its inputs listing, as the
            // builder writes it.
            let listing = serde_json::to_vec_pretty(&inputs.0).expect("listing");
            let label = unit.replace("gen_00000", &name);
            let m = Manifest::new(key, EntryKind::Callable, &listing, &inputs, &label, 0.0);
            disk.put_unsynced(&key, &listing, &m.to_bytes())
                .expect("seed a callable entry");
        }
    }
}

fn template_key(template: &Template, unit: &str) -> scene_kernels::UnitKey {
    template
        .iter()
        .find(|t| t.1 == unit)
        .map(|t| t.3.key())
        .expect("unit in template")
}

/// Wall seconds, CPU seconds (user + sys) and peak RSS (KiB) of one run of
/// the binary, measured by `/usr/bin/time` (`None` when it is missing).
fn timed_child(env: &TestEnv, args: &[&str]) -> (f64, Option<(f64, u64)>, String) {
    let time = std::path::Path::new("/usr/bin/time");
    let stats = env.dir.path().join("time.txt");
    let mut cmd = if time.exists() {
        let mut c = std::process::Command::new(time);
        c.arg("-f").arg("%U %S %M").arg("-o").arg(&stats);
        let inner = env.scene(args);
        c.arg(inner.get_program()).args(inner.get_args());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    } else {
        env.scene(args)
    };
    let started = Instant::now();
    let out = run_ok(&mut cmd);
    let wall = started.elapsed().as_secs_f64();
    let usage = std::fs::read_to_string(&stats).ok().and_then(|s| {
        let f: Vec<&str> = s.split_whitespace().collect();
        let cpu = f.first()?.parse::<f64>().ok()? + f.get(1)?.parse::<f64>().ok()?;
        Some((cpu, f.get(2)?.parse().ok()?))
    });
    (
        wall,
        usage,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Warm `scene compile` at 1k, 10k and 100k units (250, 2,500 and 25,000
/// scenes of 4 units) on a cache seeded as [`seed`] describes: one scene
/// compiled for real, the rest published under their real keys, so the
/// measured run does exactly a production warm compile (hash sources and
/// includes, look up, verify, record each callable).
/// `SCENE_SCALE_WARM_UNITS=1000` for one size.
#[test]
#[ignore = "scale measurement: minutes and 125,000 cache entries at 100k units"]
fn warm_compile_per_unit_is_flat() {
    for units in sizes("SCENE_SCALE_WARM_UNITS", &[1_000, 10_000, 100_000]) {
        let n = units.div_ceil(UNITS_PER_SCENE);
        let units = n * UNITS_PER_SCENE;
        let started = Instant::now();
        let env = suite(n);
        let generate = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let template = compile_template(&env);
        seed(&env, &template, n);
        let seeding = started.elapsed().as_secs_f64();
        if n > 1 {
            // The seeded keys are the ones the binary computes: one scene
            // is a hit, not a compile (else the full run would be cold).
            let out = run_ok(&mut env.scene(&["compile", "-q", "gen_00001"]));
            let out = String::from_utf8_lossy(&out.stdout);
            assert!(out.contains("1 cached, 0 compiled"), "{out}");
        }
        let (wall, usage, out) = timed_child(&env, &["compile", "-q"]);
        assert!(
            out.contains(&format!("compiled {n} callables: {n} cached, 0 compiled")),
            "{out}"
        );
        let (cpu, rss) = usage.map_or(("-".into(), "-".into()), |(cpu, kib)| {
            (
                format!("{:.1} us/unit CPU", cpu * 1e6 / units as f64),
                format!("{} MiB peak RSS", kib / 1024),
            )
        });
        println!(
            "scale warm compile: {n} scenes, {units} units: {wall:.2} s = {:.1} us/unit wall, {cpu}, {rss} (generate {generate:.1} s, seed {seeding:.1} s)",
            wall * 1e6 / units as f64
        );
    }
}
