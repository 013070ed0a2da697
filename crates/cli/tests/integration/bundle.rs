//! Two passes, end to end with the real `scene` binary: `scene precompile`
//! builds everything with no card into a bundle, `scene run --from` runs it
//! with no compiler, unusable slots fall back to a rebuild of that case
//! alone, and a crafted manifest cannot reach outside its bundle.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TestEnv, assert_success, copy_scene, read_report_or_null, report_case as case, show};
use serde_json::Value;

const MANIFEST: &str = "bundle.json";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `scene precompile [filter] --out <env>/bundle`; asserts success.
fn precompile(env: &TestEnv, filter: Option<&str>) -> PathBuf {
    let bundle = env.dir.path().join("bundle");
    let mut args = vec!["precompile", "--out", bundle.to_str().unwrap()];
    args.extend(filter);
    let out = env.scene(&args).output().unwrap();
    assert_success(&out);
    assert!(bundle.join(MANIFEST).is_file());
    bundle
}

/// `scene run --from <bundle> [filter] --report-json`, with the compiler
/// and linker replaced by `false` when `no_compiler`, and an empty kernel
/// cache so nothing can come from an earlier compile.
fn run_from(
    env: &TestEnv,
    bundle: &Path,
    filter: Option<&str>,
    no_compiler: bool,
) -> (Output, Value) {
    let mut args = vec!["run", "--from", bundle.to_str().unwrap()];
    args.extend(filter);
    env.run_with_report_using(&args, |cmd| {
        cmd.env("SCENE_CACHE_DIR", env.dir.path().join("pass2-cache"));
        if no_compiler {
            cmd.env("SCENE_CC", "false").env("SCENE_LD", "false");
        }
    })
}

fn read_manifest(bundle: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(bundle.join(MANIFEST)).unwrap()).unwrap()
}

fn write_manifest(bundle: &Path, manifest: &Value) {
    std::fs::write(
        bundle.join(MANIFEST),
        serde_json::to_vec_pretty(manifest).unwrap(),
    )
    .unwrap();
}

fn phase(case: &Value, key: &str) -> f64 {
    case["phases"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{}: no phases.{key}", case["name"]))
}

/// The slot directory of `id`, from the manifest.
fn slot_dir(bundle: &Path, id: &str) -> PathBuf {
    let m = read_manifest(bundle);
    bundle.join(m["slots"][id]["dir"].as_str().unwrap())
}

/// The whole suite through both passes: pass 2 runs with the compiler
/// disabled and reports no compile, fixture or golden time.
#[test]
fn precompile_then_run_from_needs_no_compiler() {
    let env = TestEnv::new();
    let bundle = env.dir.path().join("bundle");
    // Pass 1 must not touch a card or the runtime: a lock dir that does not
    // exist stays absent, and a runtime path that cannot load is never tried.
    let out = env
        .scene(&["precompile", "--out", bundle.to_str().unwrap()])
        .env(
            "SCENE_RUNTIME_LIB",
            env.dir.path().join("no-such-runtime.so"),
        )
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        !env.lock_dir.exists(),
        "precompile created the card lock dir {}",
        env.lock_dir.display()
    );
    let manifest = read_manifest(&bundle);
    assert_eq!(manifest["schema"], 1);
    assert_eq!(manifest["platform"], "a2a3sim");
    let slots = manifest["slots"].as_object().unwrap();
    assert!(
        slots.len() >= 18,
        "expected the whole suite, got {}",
        slots.len()
    );
    for (id, slot) in slots {
        let files = slot["files"].as_object().unwrap();
        assert!(files.contains_key("callable/orch.so"), "{id}: {slot}");
        for (name, digest) in files {
            assert_eq!(digest.as_str().unwrap().len(), 64, "{id}: {name}");
            assert!(
                bundle
                    .join(slot["dir"].as_str().unwrap())
                    .join(name)
                    .is_file()
            );
        }
        assert!(!slot["key"].as_str().unwrap().is_empty());
    }

    // Negative control: with the same disabled compiler and no bundle, the
    // run cannot pass, so the passing run below really compiled nothing.
    let control = env
        .scene(&["run", "vector_example::small"])
        .env("SCENE_CACHE_DIR", env.dir.path().join("control-cache"))
        .env("SCENE_CC", "false")
        .env("SCENE_LD", "false")
        .output()
        .unwrap();
    assert!(!control.status.success(), "{}", show(&control));

    let (out, report) = run_from(&env, &bundle, None, true);
    assert_success(&out);
    assert!(!text(&out.stderr).contains("warning:"), "{}", show(&out));
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), slots.len());
    for c in cases {
        assert_eq!(c["status"], "passed", "{c}");
        for key in ["compile_s", "golden_s", "fixtures_s"] {
            assert_eq!(phase(c, key), 0.0, "{}: {key}", c["name"]);
        }
        // The 5 ms card-time bound of pass 2 is checked in the
        // `lock_accounting` binary, which runs alone.
        assert!(phase(c, "device_s") > 0.0, "{}: no device time", c["name"]);
    }
}

/// Runs the two vector_example cases from a bundle altered by `alter`, with
/// a working compiler, and checks that exactly `vector_example::small` is
/// rebuilt with a warning containing `reason`, and that both pass.
fn fallback_rebuilds_only_the_bad_slot(alter: impl FnOnce(&Path), reason: &str) {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example"));
    alter(&bundle);
    let (out, report) = run_from(&env, &bundle, Some("vector_example"), false);
    assert_success(&out);
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", show(&out));
    let w = warnings[0];
    assert!(
        w.starts_with("warning: vector_example::small: bundle slot ")
            && w.ends_with("; rebuilding this case")
            && w.contains(reason),
        "warning `{w}` should name the case and `{reason}`"
    );

    let rebuilt = case(&report, "vector_example::small");
    let stored = case(&report, "vector_example::odd");
    for c in [rebuilt, stored] {
        assert_eq!(c["status"], "passed", "{c}");
    }
    // The rebuilt case went through compile, fixtures and golden...
    assert!(phase(rebuilt, "compile_s") > 0.0, "{rebuilt}");
    assert!(phase(rebuilt, "fixtures_s") > 0.0, "{rebuilt}");
    assert!(phase(rebuilt, "golden_s") > 0.0, "{rebuilt}");
    // ...the other still ran from the bundle.
    for key in ["compile_s", "fixtures_s", "golden_s"] {
        assert_eq!(phase(stored, key), 0.0, "{stored}: {key}");
    }
}

#[test]
fn missing_slot_is_rebuilt_alone() {
    fallback_rebuilds_only_the_bad_slot(
        |bundle| {
            let mut m = read_manifest(bundle);
            m["slots"]
                .as_object_mut()
                .unwrap()
                .remove("vector_example::small")
                .unwrap();
            write_manifest(bundle, &m);
        },
        "is missing from the bundle",
    );
}

#[test]
fn deleted_slot_directory_is_rebuilt_alone() {
    fallback_rebuilds_only_the_bad_slot(
        |bundle| {
            std::fs::remove_dir_all(slot_dir(bundle, "vector_example::small")).unwrap();
        },
        "is unreadable",
    );
}

#[test]
fn flipped_byte_in_a_golden_is_rebuilt_alone() {
    fallback_rebuilds_only_the_bad_slot(
        |bundle| {
            let path = slot_dir(bundle, "vector_example::small").join("golden/f.npy");
            let mut bytes = std::fs::read(&path).unwrap();
            // The last byte is the sign/exponent byte of the last f32: were
            // the digest not checked, the comparison would fail instead.
            *bytes.last_mut().unwrap() ^= 0x40;
            std::fs::write(&path, bytes).unwrap();
        },
        "file `golden/f.npy` failed its digest check",
    );
}

#[test]
fn slot_for_another_platform_is_rebuilt_alone() {
    fallback_rebuilds_only_the_bad_slot(
        |bundle| {
            let mut m = read_manifest(bundle);
            m["slots"]["vector_example::small"]["platform"] = "a5sim".into();
            write_manifest(bundle, &m);
        },
        "was built for platform `a5sim`",
    );
}

#[test]
fn slot_for_another_runtime_abi_is_rebuilt_alone() {
    fallback_rebuilds_only_the_bad_slot(
        |bundle| {
            let mut m = read_manifest(bundle);
            m["slots"]["vector_example::small"]["runtime_abi"] = 999.into();
            write_manifest(bundle, &m);
        },
        "was built for runtime ABI 999",
    );
}

#[test]
fn edited_scene_definition_makes_the_slot_stale() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vector_example");
    let bundle = precompile(&env, None);
    // A new seed for one case changes its fixtures: its stored inputs and
    // golden no longer describe it.
    let toml = dir.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    let edited = t.replacen(
        "params = { N = 16384 }",
        "params = { N = 16384 }\nseed = 7",
        1,
    );
    assert_ne!(t, edited);
    std::fs::write(&toml, edited).unwrap();
    let (out, report) = run_from(&env, &bundle, None, false);
    assert_success(&out);
    assert!(
        text(&out.stderr).contains(
            "warning: vector_example::small: bundle slot was built from a different definition"
        ),
        "{}",
        show(&out)
    );
    assert!(
        !text(&out.stderr).contains("vector_example::odd"),
        "{}",
        show(&out)
    );
    assert!(phase(case(&report, "vector_example::small"), "golden_s") > 0.0);
    assert_eq!(phase(case(&report, "vector_example::odd"), "golden_s"), 0.0);
}

/// Listing and contents of every file under `dir`, to prove nothing there
/// changed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
                out.push((p, Vec::new()));
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

/// Each escape names files outside the bundle holding exactly the right
/// bytes: a reader that followed the name would find a valid digest and
/// run silently, so the warning proves the name was refused before use.
#[test]
fn path_escapes_in_a_crafted_manifest_are_refused() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example"));
    let outside = env.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();

    let small_dir = slot_dir(&bundle, "vector_example::small");
    let odd_dir = slot_dir(&bundle, "vector_example::odd");
    // small: a golden named through `..`, pointing at an outside copy.
    std::fs::copy(small_dir.join("golden/f.npy"), outside.join("f.npy")).unwrap();
    // odd: the slot directory given as an absolute path (its real one).
    let mut m = read_manifest(&bundle);
    let small = &mut m["slots"]["vector_example::small"];
    let files = small["files"].as_object_mut().unwrap();
    let digest = files.remove("golden/f.npy").unwrap();
    files.insert("../../../outside/f.npy".into(), digest);
    small["golden"][0]["file"] = "../../../outside/f.npy".into();
    m["slots"]["vector_example::odd"]["dir"] = odd_dir.to_str().unwrap().into();
    write_manifest(&bundle, &m);

    let before = snapshot(&outside);
    let (out, report) = run_from(&env, &bundle, Some("vector_example"), false);
    assert_success(&out);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "warning: vector_example::small: bundle slot names `../../../outside/f.npy`, which is refused: `..` component; rebuilding this case"
        ),
        "{}",
        show(&out)
    );
    assert!(
        stderr.contains(&format!(
            "warning: vector_example::odd: bundle slot names `{}`, which is refused: absolute path; rebuilding this case",
            odd_dir.display()
        )),
        "{}",
        show(&out)
    );
    for id in ["vector_example::small", "vector_example::odd"] {
        let c = case(&report, id);
        assert_eq!(c["status"], "passed", "{c}");
        assert!(phase(c, "golden_s") > 0.0, "{id} should have been rebuilt");
    }
    assert_eq!(
        snapshot(&outside),
        before,
        "something outside the bundle changed"
    );
}

#[test]
fn symlink_leading_outside_the_bundle_is_refused() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example"));
    let outside = env.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let golden = slot_dir(&bundle, "vector_example::small").join("golden/f.npy");
    // Same bytes outside, reached through a symlink inside the bundle.
    std::fs::rename(&golden, outside.join("f.npy")).unwrap();
    std::os::unix::fs::symlink(outside.join("f.npy"), &golden).unwrap();
    // A symlink that stays inside the bundle is fine.
    let odd_golden = slot_dir(&bundle, "vector_example::odd").join("golden/f.npy");
    let odd_copy = bundle.join("odd-golden.npy");
    std::fs::rename(&odd_golden, &odd_copy).unwrap();
    std::os::unix::fs::symlink(&odd_copy, &odd_golden).unwrap();

    let before = snapshot(&outside);
    let (out, report) = run_from(&env, &bundle, Some("vector_example"), false);
    assert_success(&out);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "warning: vector_example::small: bundle slot names `golden/f.npy`, which is refused: a symlink resolves outside the bundle"
        ),
        "{}",
        show(&out)
    );
    assert!(!stderr.contains("vector_example::odd"), "{}", show(&out));
    assert!(phase(case(&report, "vector_example::small"), "golden_s") > 0.0);
    assert_eq!(phase(case(&report, "vector_example::odd"), "golden_s"), 0.0);
    assert_eq!(snapshot(&outside), before);
}

#[test]
fn bundle_of_a_newer_schema_or_no_bundle_is_refused() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example::small"));
    let mut m = read_manifest(&bundle);
    m["schema"] = 2.into();
    write_manifest(&bundle, &m);
    let (out, _) = run_from(&env, &bundle, None, false);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bundle schema 2 is newer than this scene understands (schema 1)"),
        "{}",
        show(&out)
    );
    assert!(!text(&out.stdout).contains("PASS"), "{}", show(&out));

    let empty = env.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (out, _) = run_from(&env, &empty, None, false);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("not a scene bundle"),
        "{}",
        show(&out)
    );
}

#[test]
fn precompile_replaces_a_bundle_atomically_and_never_a_non_bundle() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example::small"));
    let bundle2 = precompile(&env, Some("vector_example::odd"));
    assert_eq!(bundle, bundle2);
    let slots: Vec<String> = read_manifest(&bundle)["slots"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(slots, ["vector_example::odd"]);
    // No temp or old copies are left next to it.
    let siblings: Vec<String> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("bundle"))
        .collect();
    assert_eq!(siblings, ["bundle"]);

    let precious = env.dir.path().join("precious");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("notes.txt"), "keep").unwrap();
    let out = env
        .scene(&[
            "precompile",
            "--out",
            precious.to_str().unwrap(),
            "vector_example::odd",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("is not a scene bundle"),
        "{}",
        show(&out)
    );
    assert_eq!(snapshot(&precious).len(), 1);
    assert_eq!(
        std::fs::read_to_string(precious.join("notes.txt")).unwrap(),
        "keep"
    );
}

/// A codegen regression fails pass 1, on a machine with no card, and names
/// the case; the healthy case is still stored.
#[test]
fn codegen_regression_fails_precompile_without_a_card() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let broken = copy_scene(&env, "vector_example", "vector_broken");
    let kernel = broken.join("kernels/add.c");
    let src = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("{src}\nthis is not C;\n")).unwrap();
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", "--out", bundle.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL vector_broken::small"),
        "{}",
        show(&out)
    );
    assert!(
        stdout.contains("ok vector_example::small"),
        "{}",
        show(&out)
    );
    assert!(!env.lock_dir.exists(), "precompile touched the card locks");
    let slots = read_manifest(&bundle)["slots"].clone();
    assert!(slots.get("vector_example::small").is_some());
    assert!(slots.get("vector_broken::small").is_none());
}

/// `--hold-card` (one pass, the old shape) holds the card through compile
/// and goldens: its hold covers more than device work, and the per-case
/// holds tile the run's single hold.
#[test]
fn hold_card_holds_the_card_for_the_whole_run() {
    let env = TestEnv::new();
    let (out, json) = env.run_with_report(&["run", "vector_example", "--hold-card"]);
    assert_success(&out);
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    let first = &cases[0];
    // Compiling, fixtures and the golden ran under the card lock, one after
    // another, and are charged to it (compile_s is summed over parallel
    // compiler processes, so it is not a lower bound of the hold).
    assert!(phase(first, "compile_s") > 0.0);
    let cpu_under_lock =
        phase(first, "fixtures_s") + phase(first, "golden_s") + phase(first, "device_s");
    assert!(phase(first, "lock_held_s") >= cpu_under_lock, "{first}");
    for pair in cases.windows(2) {
        assert_eq!(
            pair[0]["lock"]["released_at"], pair[1]["lock"]["acquired_at"],
            "per-case holds must tile the run's hold"
        );
    }
    let t = &json["totals"];
    let held = t["card_seconds_held"].as_f64().unwrap();
    let device = t["device_seconds"].as_f64().unwrap();
    let sum: f64 = cases.iter().map(|c| phase(c, "lock_held_s")).sum();
    assert!((held - sum).abs() < 1e-9);
    assert!(held > device, "held {held} s for {device} s of device work");
}

/// Warnings of `out`'s stderr about `id`.
fn warnings_for<'a>(stderr: &'a str, id: &str) -> Vec<&'a str> {
    let prefix = format!("warning: {id}: bundle slot ");
    stderr.lines().filter(|l| l.starts_with(&prefix)).collect()
}

/// Slots whose records and files were moved between cases are each
/// internally consistent (every file matches its digest, every key is the
/// one its case recomputes), yet none passes under another case's name:
/// all are rebuilt and pass. `twin` has the same shapes as `small` (only
/// its seed differs), so only the binding can tell their data apart;
/// `odd` has other shapes, so its records no longer describe the case.
#[test]
fn slots_swapped_between_cases_are_rebuilt_not_passed_under_the_wrong_name() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vector_example");
    let toml = dir.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{t}\n[[cases]]\nname = \"twin\"\nparams = {{ N = 16384 }}\nseed = 7\n"),
    )
    .unwrap();
    let bundle = precompile(&env, None);
    let mut m = read_manifest(&bundle);
    let data_fields = ["dir", "files", "sizes", "inputs", "golden"];
    let slots = m["slots"].as_object_mut().unwrap();
    for f in data_fields {
        assert!(
            slots["vector_example::small"].get(f).is_some(),
            "no `{f}` in the slot record"
        );
    }
    let small = slots["vector_example::small"].clone();
    let twin = slots["vector_example::twin"].clone();
    assert_eq!(small["inputs"][0]["shape"], twin["inputs"][0]["shape"]);
    assert_ne!(small["files"], twin["files"], "twin's data must differ");
    for f in data_fields {
        slots.get_mut("vector_example::small").unwrap()[f] = twin[f].clone();
        slots.get_mut("vector_example::twin").unwrap()[f] = small[f].clone();
        // odd: case small's slot directory and records copied over its own.
        slots.get_mut("vector_example::odd").unwrap()[f] = small[f].clone();
    }
    write_manifest(&bundle, &m);

    let (out, report) = run_from(&env, &bundle, None, false);
    assert_success(&out);
    let stderr = text(&out.stderr);
    for id in ["vector_example::small", "vector_example::twin"] {
        let w = warnings_for(&stderr, id);
        assert_eq!(w.len(), 1, "{id}: {}", show(&out));
        assert!(
            w[0].contains("holds records that were not written for this case")
                && w[0].ends_with("; rebuilding this case"),
            "{}",
            w[0]
        );
    }
    let w = warnings_for(&stderr, "vector_example::odd");
    assert_eq!(
        w,
        [
            "warning: vector_example::odd: bundle slot does not match this case: \
             tensor `a` is recorded as f32[16384], the case has f32[12347]; rebuilding this case"
        ],
        "{}",
        show(&out)
    );
    for id in [
        "vector_example::small",
        "vector_example::twin",
        "vector_example::odd",
    ] {
        let c = case(&report, id);
        assert_eq!(c["status"], "passed", "{c}");
        assert!(phase(c, "golden_s") > 0.0, "{id} was not rebuilt: {c}");
        assert!(phase(c, "fixtures_s") > 0.0, "{id} was not rebuilt: {c}");
    }
}

/// A bundle built for another platform is refused once, with the flag to
/// use, before any work: one error line, exit 2, no case run.
#[test]
fn bundle_for_another_platform_is_refused_once() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example"));
    let mut m = read_manifest(&bundle);
    m["platform"] = "a5sim".into();
    for slot in m["slots"].as_object_mut().unwrap().values_mut() {
        slot["platform"] = "a5sim".into();
    }
    write_manifest(&bundle, &m);
    let (out, report) = run_from(&env, &bundle, None, true);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "error: --from: bundle {} was built for a5sim, but this run is for a2a3sim; \
             run with --platform a5sim",
            bundle.display()
        )],
        "{}",
        show(&out)
    );
    assert!(!text(&out.stdout).contains("PASS"), "{}", show(&out));
    assert!(report.is_null(), "a report was written: {report}");
    assert!(!env.lock_dir.exists(), "a card lock was touched");
}

/// `scene run --from` with stdout and stderr in files, waited for with a
/// deadline: a run that hangs is killed and fails the test.
fn run_from_bounded(env: &TestEnv, bundle: &Path, filter: &str) -> (Output, Value) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let report = env.report_path();
    let out_path = env.dir.path().join("stdout.txt");
    let err_path = env.dir.path().join("stderr.txt");
    let mut child = env
        .scene(&[
            "run",
            "--from",
            bundle.to_str().unwrap(),
            "--report-json",
            report.to_str().unwrap(),
            filter,
        ])
        .env("SCENE_CACHE_DIR", env.dir.path().join("pass2-cache"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "scene run --from did not finish in 240 s; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    (out, read_report_or_null(&report))
}

/// Bundle files that are not files: a symlink to `/dev/zero` (read, it
/// would grow the process without bound) and a FIFO (read, it would hang
/// it) are damage like any other: the run finishes and both cases pass
/// after a rebuild.
#[test]
fn bundle_files_that_are_not_files_are_rebuilt_without_hanging() {
    let env = TestEnv::new();
    let bundle = precompile(&env, Some("vector_example"));
    let golden = slot_dir(&bundle, "vector_example::small").join("golden/f.npy");
    std::fs::remove_file(&golden).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &golden).unwrap();
    let input = slot_dir(&bundle, "vector_example::odd").join("inputs/a.npy");
    std::fs::remove_file(&input).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&input)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo failed");

    let (out, report) = run_from_bounded(&env, &bundle, "vector_example");
    assert_success(&out);
    let stderr = text(&out.stderr);
    let small = warnings_for(&stderr, "vector_example::small");
    assert_eq!(small.len(), 1, "{}", show(&out));
    assert!(
        small[0].contains("names `golden/f.npy`, which is refused"),
        "{}",
        small[0]
    );
    let odd = warnings_for(&stderr, "vector_example::odd");
    assert_eq!(odd.len(), 1, "{}", show(&out));
    assert!(
        odd[0].contains("file `inputs/a.npy` is unreadable")
            && odd[0].contains("is a FIFO, not a regular file")
            && odd[0].ends_with("; rebuilding this case"),
        "{}",
        odd[0]
    );
    for id in ["vector_example::small", "vector_example::odd"] {
        let c = case(&report, id);
        assert_eq!(c["status"], "passed", "{c}");
        assert!(phase(c, "golden_s") > 0.0, "{id} was not rebuilt: {c}");
    }
}
