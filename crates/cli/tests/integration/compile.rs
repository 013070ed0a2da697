//! Integration tests of `scene compile` and the global compile budget, run
//! against the real `scene` binary with real compilers. Compilers and linkers
//! are wrapped by small bash scripts that log when each process starts and
//! ends, so the tests observe the processes themselves rather than the
//! harness's own bookkeeping.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TestEnv, assert_success, copy_scene, show};

/// One tool process seen by a wrapper: start/end in ns since the epoch and
/// the arguments it was given.
#[derive(Debug, Clone)]
struct ToolRun {
    start: u128,
    end: u128,
    args: String,
}

/// Wrappers for the compiler and linker that log to one file and run the
/// real tool in between (not `exec`: the `end` line must follow its exit).
struct ToolLog {
    log: PathBuf,
    cc: PathBuf,
    ld: PathBuf,
}

impl ToolLog {
    fn new(env: &TestEnv) -> Self {
        let bin = env.dir.path().join("wrappers");
        std::fs::create_dir_all(&bin).unwrap();
        let log = env.dir.path().join("tools.log");
        let write = |name: &str, real: &str| {
            let path = bin.join(name);
            let script = format!(
                "#!/bin/bash\n\
                 echo \"start $(date +%s%N) $$ $*\" >> '{log}'\n\
                 {real} \"$@\"\n\
                 status=$?\n\
                 echo \"end $(date +%s%N) $$\" >> '{log}'\n\
                 exit $status\n",
                log = log.display()
            );
            scene_util::write_executable(&path, script).unwrap();
            path
        };
        let cc = write("cc-wrapper", "cc");
        let ld = write("ld-wrapper", "ld");
        Self { log, cc, ld }
    }

    /// A `scene` command whose compiler and linker are the wrappers.
    fn scene(&self, env: &TestEnv, args: &[&str]) -> std::process::Command {
        let mut cmd = env.scene(args);
        cmd.env("SCENE_CC", &self.cc).env("SCENE_LD", &self.ld);
        cmd
    }

    fn clear(&self) {
        let _ = std::fs::remove_file(&self.log);
    }

    /// Every logged process; panics on a start without an end (a tool still
    /// running after `scene` exited would itself be a bug).
    fn runs(&self) -> Vec<ToolRun> {
        let text = match std::fs::read_to_string(&self.log) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => panic!("reading {}: {e}", self.log.display()),
        };
        let mut open: BTreeMap<String, (u128, String)> = BTreeMap::new();
        let mut runs = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(4, ' ');
            let (Some(what), Some(ts), Some(pid)) = (parts.next(), parts.next(), parts.next())
            else {
                panic!("malformed log line: {line:?}");
            };
            let ts: u128 = ts.parse().unwrap_or_else(|_| panic!("bad time: {line:?}"));
            match what {
                "start" => {
                    let args = parts.next().unwrap_or("").to_string();
                    assert!(
                        open.insert(pid.to_string(), (ts, args)).is_none(),
                        "pid {pid} started twice"
                    );
                }
                "end" => {
                    let (start, args) = open
                        .remove(pid)
                        .unwrap_or_else(|| panic!("end without start: {line:?}"));
                    runs.push(ToolRun {
                        start,
                        end: ts,
                        args,
                    });
                }
                _ => panic!("malformed log line: {line:?}"),
            }
        }
        assert!(open.is_empty(), "tools never finished: {open:?}");
        runs
    }
}

/// The largest number of runs alive at one instant. A run ending at the
/// same nanosecond another starts does not overlap it.
fn max_overlap(runs: &[ToolRun]) -> usize {
    let mut events: Vec<(u128, i32)> = runs
        .iter()
        .flat_map(|r| [(r.start, 1), (r.end, -1)])
        .collect();
    // Ends (-1) sort before starts (+1) at equal times.
    events.sort();
    let (mut live, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        live += delta;
        max = max.max(live);
    }
    max as usize
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `ok <scene> (<n> incores, digest <hex>)` lines, as scene -> digest.
fn digests(out: &Output) -> BTreeMap<String, String> {
    stdout(out)
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("ok ")?;
            let (scene, tail) = rest.split_once(' ')?;
            let digest = tail.split("digest ").nth(1)?.trim_end_matches(')');
            Some((scene.to_string(), digest.to_string()))
        })
        .collect()
}

fn summary(out: &Output) -> String {
    stdout(out).lines().last().unwrap_or("").to_string()
}

fn check_budget(env: &TestEnv, filter: &str, workers: usize) -> Vec<ToolRun> {
    let tools = ToolLog::new(env);
    tools.clear();
    let n = workers.to_string();
    let out = tools
        .scene(env, &["compile", filter, "--compile-workers", &n])
        .output()
        .unwrap();
    assert_success(&out);
    let runs = tools.runs();
    let max = max_overlap(&runs);
    eprintln!(
        "{filter}: {} tool runs, max {max} alive, budget {workers}",
        runs.len()
    );
    assert!(
        max > 1 && max <= workers,
        "{} tool runs with at most {max} alive at once; expected 1 < max <= {workers}",
        runs.len()
    );
    runs
}

/// 39 incores + 1 orchestration of one scene, with N = 2 and N = 3: some
/// tools overlap, never more than N.
#[test]
fn budget_bounds_live_tools_within_one_scene() {
    for workers in [2, 3] {
        let env = TestEnv::new();
        let runs = check_budget(&env, "decode_layer", workers);
        let links = runs.iter().filter(|r| r.args.contains(" -T ")).count();
        let compiles = runs
            .iter()
            .filter(|r| r.args.contains("decode_layer/"))
            .count();
        // Every unit ran its tools: 39 incore links; 39 incore + 1
        // orchestration compiles (builtins and tool probes come on top).
        assert_eq!(links, 39, "workers = {workers}");
        assert_eq!(compiles, 40, "workers = {workers}");
    }
}

/// Two scenes in one run share the budget: the bound holds for the whole
/// run, not per scene (per-scene pools would allow 2N).
#[test]
fn budget_bounds_live_tools_across_two_scenes() {
    for workers in [2, 3] {
        let env = TestEnv::with_scenes(&[]);
        copy_scene(&env, "vector_example", "vec_a");
        copy_scene(&env, "vector_example", "vec_b");
        let runs = check_budget(&env, "vec_", workers);
        for scene in ["vec_a", "vec_b"] {
            let compiled = runs.iter().filter(|r| r.args.contains(scene)).count();
            // orchestration + 3 kernels, each compiled from that scene's dir.
            assert_eq!(compiled, 4, "{scene}, workers = {workers}");
        }
    }
}

/// Worker count and finish order do not change what is built.
#[test]
fn callables_are_identical_for_1_and_4_workers() {
    let mut seen = Vec::new();
    for workers in ["1", "4"] {
        // A fresh env each time: nothing may be reused between the two builds.
        let env = TestEnv::new();
        let out = env
            .scene(&["compile", "--compile-workers", workers, "--explain"])
            .output()
            .unwrap();
        assert_success(&out);
        let d = digests(&out);
        assert!(
            d.contains_key("decode_layer") && d.contains_key("vector_example"),
            "{}",
            show(&out)
        );
        // `<outcome> <scene>/<unit> (...) <secs> s [key <hex>]: <why>`, in
        // finish order; keyed by unit so the order does not matter.
        let keys: BTreeMap<String, String> = stdout(&out)
            .lines()
            .filter_map(|l| {
                let unit = l.split(' ').nth(1)?.to_string();
                let key = l.split("[key ").nth(1)?.split(']').next()?.to_string();
                Some((unit, key))
            })
            .collect();
        assert!(keys.len() >= 40, "{}", show(&out));
        seen.push((d, keys));
    }
    assert_eq!(seen[0].0, seen[1].0, "callable digests differ");
    assert_eq!(seen[0].1, seen[1].1, "unit keys differ");
}

/// Points `<scene>`'s `mul` kernel at the shared source `../common/mul.c`.
fn share_mul(scene_dir: &Path) {
    let toml = scene_dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains("source = \"kernels/mul.c\""));
    std::fs::write(
        &toml,
        text.replace("source = \"kernels/mul.c\"", "source = \"../common/mul.c\""),
    )
    .unwrap();
    std::fs::remove_file(scene_dir.join("kernels/mul.c")).unwrap();
}

/// A kernel source shared by two scenes is one unit: compiled (and linked)
/// once for both.
#[test]
fn shared_kernel_compiles_once_for_all_its_scenes() {
    let env = TestEnv::with_scenes(&[]);
    let a = copy_scene(&env, "vector_example", "vec_a");
    let b = copy_scene(&env, "vector_example", "vec_b");
    let common = env.scenes_dir.as_ref().unwrap().join("common");
    std::fs::create_dir_all(&common).unwrap();
    std::fs::copy(a.join("kernels/mul.c"), common.join("mul.c")).unwrap();
    share_mul(&a);
    share_mul(&b);
    let tools = ToolLog::new(&env);
    let out = tools.scene(&env, &["compile"]).output().unwrap();
    assert_success(&out);
    let runs = tools.runs();
    let compiles_of = |needle: &str| {
        runs.iter()
            .filter(|r| r.args.contains(" -c ") && r.args.contains(needle))
            .count()
    };
    assert_eq!(compiles_of("common/mul.c"), 1, "{runs:#?}");
    // Each scene's own kernels still compile once per scene.
    assert_eq!(compiles_of("kernels/add.c"), 2, "{runs:#?}");
    let out = env.scene(&["run"]).output().unwrap();
    assert_success(&out);
}

/// One broken kernel source used by two scenes fails exactly those two,
/// naming the kernel and quoting the compiler; the third still builds and
/// runs.
#[test]
fn broken_shared_kernel_fails_only_its_scenes() {
    let env = TestEnv::with_scenes(&[]);
    let a = copy_scene(&env, "vector_example", "vec_a");
    let b = copy_scene(&env, "vector_example", "vec_b");
    copy_scene(&env, "vector_example", "vec_ok");
    let src = std::fs::read_to_string(a.join("kernels/mul.c")).unwrap();
    let common = env.scenes_dir.as_ref().unwrap().join("common");
    std::fs::create_dir_all(&common).unwrap();
    std::fs::write(
        common.join("mul.c"),
        src.replace("a[i] * b[i];", "a[i] * b[i] +;"),
    )
    .unwrap();
    share_mul(&a);
    share_mul(&b);

    let out = env.scene(&["compile"]).output().unwrap();
    let so = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for scene in ["vec_a", "vec_b"] {
        assert!(so.contains(&format!("FAIL {scene}\n")), "{so}");
        assert!(
            so.contains(&format!("scene `{scene}`: kernel `mul`")),
            "{scene}: {so}"
        );
    }
    assert!(so.contains("error:"), "compiler diagnostics missing: {so}");
    assert!(so.contains("ok vec_ok "), "{so}");
    assert!(
        summary(&out).starts_with("compiled 3 callables: 0 cached, 1 compiled, 2 failed in "),
        "{so}"
    );

    let out = env.scene(&["run"]).output().unwrap();
    let so = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(so.contains("FAIL vec_a::small"), "{so}");
    assert!(so.contains("FAIL vec_b::small"), "{so}");
    assert!(so.contains("`mul`"), "{so}");
    assert!(so.contains("PASS vec_ok::small"), "{so}");
    assert!(so.contains("PASS vec_ok::odd"), "{so}");
}

#[test]
fn zero_or_non_numeric_workers_are_usage_errors() {
    let env = TestEnv::new();
    let out = env
        .scene(&["compile", "--compile-workers", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--compile-workers"),
        "{}",
        show(&out)
    );
    let out = env
        .scene(&["compile"])
        .env("SCENE_COMPILE_WORKERS", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`many` is not a number"),
        "{}",
        show(&out)
    );
}

/// Cases not enabled on the platform, and manual ones unless asked, are not
/// compiled.
#[test]
fn compile_selects_like_run() {
    let env = TestEnv::with_scenes(&[]);
    let only_a5 = copy_scene(&env, "vector_example", "vec_a5");
    let toml = only_a5.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        t.replace(
            "platforms = [\"a2a3sim\", \"a5sim\"]",
            "platforms = [\"a5sim\"]",
        ),
    )
    .unwrap();
    let manual = copy_scene(&env, "vector_example", "vec_manual");
    let toml = manual.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    // Every case manual (some may be already).
    let t = t.replace("manual = true\n", "");
    std::fs::write(&toml, t.replace("params = {", "manual = true\nparams = {")).unwrap();
    copy_scene(&env, "vector_example", "vec_plain");

    let out = env
        .scene(&["compile", "--platform", "a2a3sim"])
        .output()
        .unwrap();
    assert_success(&out);
    let built: Vec<String> = digests(&out).into_keys().collect();
    assert_eq!(built, ["vec_plain"], "{}", show(&out));
    assert!(
        summary(&out).starts_with("compiled 1 callables: "),
        "{}",
        show(&out)
    );

    let out = env
        .scene(&["compile", "--platform", "a5sim", "--include-manual"])
        .output()
        .unwrap();
    assert_success(&out);
    let built: Vec<String> = digests(&out).into_keys().collect();
    assert_eq!(
        built,
        ["vec_a5", "vec_manual", "vec_plain"],
        "{}",
        show(&out)
    );
}

/// Without a terminal, each unit gets a plain line; `-q` keeps only the
/// summary (and failures).
#[test]
fn plain_unit_lines_and_quiet() {
    let env = TestEnv::new();
    let out = env.scene(&["compile", "vector_example"]).output().unwrap();
    assert_success(&out);
    let so = stdout(&out);
    for unit in [
        "orchestration (orchestration)",
        "add (aiv, func_id 0)",
        "mul (aiv, func_id 2)",
    ] {
        assert!(
            so.contains(&format!("compiled vector_example/{unit} ")),
            "{unit}: {so}"
        );
    }
    assert!(
        summary(&out).starts_with("compiled 1 callables: 0 cached, 1 compiled, 0 failed in "),
        "{so}"
    );

    let out = env
        .scene(&["compile", "vector_example", "-q"])
        .output()
        .unwrap();
    assert_success(&out);
    let so = stdout(&out);
    assert_eq!(so.lines().count(), 1, "{so}");
    // Same env, same cache dir: the second build compiles nothing.
    assert!(
        so.starts_with("compiled 1 callables: 1 cached, 0 compiled, 0 failed in "),
        "{so}"
    );
}

/// The warm-up takes no card lock (it can run while every card is busy).
#[test]
fn compile_touches_no_card_lock() {
    let env = TestEnv::new();
    let out = env.scene(&["compile", "vector_example"]).output().unwrap();
    assert_success(&out);
    let locks: Vec<_> = std::fs::read_dir(&env.lock_dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(locks.is_empty(), "lock files created: {locks:?}");
}

/// decode_layer is large (>= 37 incores on both core types) and passes.
#[test]
fn decode_layer_is_large_and_passes() {
    let env = TestEnv::new();
    let out = env.scene(&["compile", "decode_layer"]).output().unwrap();
    assert_success(&out);
    let so = stdout(&out);
    let aic = so.lines().filter(|l| l.contains("(aic, func_id")).count();
    let aiv = so.lines().filter(|l| l.contains("(aiv, func_id")).count();
    assert!(
        aic + aiv >= 37 && aic > 0 && aiv > 0,
        "aic {aic}, aiv {aiv}"
    );

    let out = env
        .scene(&["run", "decode_layer", "--platform", "a2a3sim"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        stdout(&out).contains("PASS decode_layer::"),
        "{}",
        show(&out)
    );
}

/// After a warm-up, a run in another process compiles nothing.
#[test]
fn run_after_compile_starts_no_compiler() {
    let env = TestEnv::new();
    let tools = ToolLog::new(&env);
    let out = tools
        .scene(&env, &["compile", "vector_example"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(!tools.runs().is_empty(), "the warm-up compiled nothing");
    tools.clear();

    let out = tools
        .scene(&env, &["run", "vector_example"])
        .output()
        .unwrap();
    assert_success(&out);
    let runs = tools.runs();
    assert!(
        runs.is_empty(),
        "scene run started {} tools: {runs:?}",
        runs.len()
    );
}
