//! The persistent kernel cache through the real `scene` binary, with the
//! real compiler behind a logging wrapper (`SCENE_CC`) and a private cache
//! dir per test.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use common::{TestEnv, copy_scene, show};

/// A compiler wrapper that logs each invocation's arguments, one line per
/// process. With `SCENE_TEST_BLOCK_ON=<text>`, an invocation whose
/// arguments contain <text> says so on the `SCENE_TEST_READY` fifo and then
/// blocks on the `SCENE_TEST_RELEASE` fifo (and fails once released).
struct Wrapper {
    path: PathBuf,
    log: PathBuf,
}

fn wrapper(dir: &Path, name: &str, comment: &str) -> Wrapper {
    let log = dir.join(format!("{name}.log"));
    let path = dir.join(name);
    let script = format!(
        r#"#!/bin/sh
# {comment}
echo "$*" >> '{log}'
if [ -n "$SCENE_TEST_BLOCK_ON" ]; then
  case "$*" in
    *"$SCENE_TEST_BLOCK_ON"*)
      echo ready > "$SCENE_TEST_READY"
      read _ < "$SCENE_TEST_RELEASE"
      exit 1;;
  esac
fi
exec cc "$@"
"#,
        log = log.display()
    );
    scene_util::write_executable(&path, script).unwrap();
    Wrapper { path, log }
}

impl Wrapper {
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Compiler processes whose arguments mention `needle`.
    fn count(&self, needle: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(needle)).count()
    }

    fn reset(&self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A private copy of `vector_example` and a logging compiler.
struct Fixture {
    env: TestEnv,
    scene_dir: PathBuf,
    cc: Wrapper,
}

impl Fixture {
    fn new() -> Self {
        let env = TestEnv::with_scenes(&[]);
        let scene_dir = copy_scene(&env, "vector_example", "vector_example");
        let cc = wrapper(env.dir.path(), "cc-wrapper", "first compiler");
        Fixture { env, scene_dir, cc }
    }

    fn scene(&self, args: &[&str]) -> Command {
        let mut cmd = self.env.scene(args);
        // Scratch dirs of killed runs stay inside the test's temp dir.
        cmd.env("SCENE_CC", &self.cc.path)
            .env("TMPDIR", self.env.dir.path());
        cmd
    }

    fn run(&self) -> Output {
        let out = self.scene(&["run"]).output().unwrap();
        assert_passed(&out);
        out
    }

    fn edit(&self, rel: &str, f: impl FnOnce(String) -> String) {
        let path = self.scene_dir.join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, f(text)).unwrap();
    }

    fn entries(&self) -> Vec<Entry> {
        entries(&self.env.cache_dir)
    }

    fn entry(&self, unit: &str) -> Entry {
        self.entries()
            .into_iter()
            .find(|e| e.unit == unit)
            .unwrap_or_else(|| panic!("no entry for {unit}: {:?}", self.entries()))
    }
}

fn assert_passed(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().last(),
        Some("2 passed, 0 failed"),
        "{stdout}"
    );
}

fn pass_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL"))
        .map(|l| l.split(" (").next().unwrap_or(l).to_owned())
        .collect()
}

#[derive(Debug, Clone)]
struct Entry {
    dir: PathBuf,
    key: String,
    unit: String,
    kind: String,
}

impl Entry {
    fn artifact(&self) -> PathBuf {
        self.dir.join("artifact")
    }
    fn manifest(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }
}

/// Every readable entry under `cache/entries/<shard>/<key>/`.
fn entries(cache: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let Ok(shards) = std::fs::read_dir(cache.join("entries")) else {
        return out;
    };
    for shard in shards {
        for dir in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let dir = dir.unwrap().path();
            let Ok(bytes) = std::fs::read(dir.join("manifest.json")) else {
                continue;
            };
            let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            out.push(Entry {
                key: dir.file_name().unwrap().to_string_lossy().into_owned(),
                unit: m["unit"].as_str().unwrap().to_owned(),
                kind: m["kind"].as_str().unwrap().to_owned(),
                dir,
            });
        }
    }
    out
}

fn set_mtime(path: &Path, when: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

const DAY: Duration = Duration::from_secs(86400);

#[test]
fn warm_run_starts_no_compiler_and_refreshes_entries() {
    let f = Fixture::new();
    let cold = f.run();
    assert!(f.cc.count("kernels/add.c") == 1, "{:?}", f.cc.lines());
    // orchestration + 3 incores + the callable entry.
    assert_eq!(f.entries().len(), 5, "{:?}", f.entries());
    let old = SystemTime::now() - 3 * DAY;
    for e in f.entries() {
        set_mtime(&e.manifest(), old);
    }
    f.cc.reset();

    let warm = f.run();
    assert_eq!(
        f.cc.lines(),
        Vec::<String>::new(),
        "compiler processes started"
    );
    assert_eq!(pass_lines(&warm), pass_lines(&cold));
    for e in f.entries() {
        assert!(mtime(&e.manifest()) > old, "hit did not refresh {e:?}");
    }

    let stats = f.scene(&["cache", "stats"]).output().unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{text}");
    assert!(text.contains("entries: 5"), "{text}");
    assert!(
        text.contains("hits    0, misses    4, compiles    4"),
        "{text}"
    );
    assert!(
        text.contains("hits    4, misses    0, compiles    0"),
        "{text}"
    );
    assert!(text.contains("time saved"), "{text}");
}

#[test]
fn editing_a_kernel_source_recompiles_only_that_kernel() {
    let f = Fixture::new();
    f.run();
    f.cc.reset();
    f.edit("kernels/add.c", |t| format!("{t}\n/* edited */\n"));
    f.run();
    assert_eq!(f.cc.count("kernels/add.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/mul.c"), 0);
    assert_eq!(f.cc.count("kernels/add_scalar.c"), 0);
    assert_eq!(f.cc.count("orchestration.c"), 0);
}

#[test]
fn editing_an_included_header_recompiles_only_its_includers() {
    let f = Fixture::new();
    std::fs::write(f.scene_dir.join("kernels/inner.h"), "#define INNER 1\n").unwrap();
    std::fs::write(
        f.scene_dir.join("kernels/outer.h"),
        "#include \"inner.h\"\n",
    )
    .unwrap();
    f.edit("kernels/mul.c", |t| format!("#include \"outer.h\"\n{t}"));
    f.run();
    f.cc.reset();
    std::fs::write(f.scene_dir.join("kernels/inner.h"), "#define INNER 2\n").unwrap();
    f.run();
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/add.c"), 0);
    assert_eq!(f.cc.count("kernels/add_scalar.c"), 0);
    assert_eq!(f.cc.count("orchestration.c"), 0);
}

/// Issue 27, cause 2: `mul.c` takes its operator from a header named by a
/// `defines` entry in `scene.toml` (`#include KHDR`), which the include
/// scanner cannot see. Editing that header into a wrong kernel must
/// recompile it, and the run must then fail, not pass on the old binary.
#[test]
fn header_named_by_a_defines_entry_is_followed_and_a_wrong_kernel_fails() {
    let f = Fixture::new();
    std::fs::write(f.scene_dir.join("kernels/op.h"), "#define OP *\n").unwrap();
    f.edit("kernels/mul.c", |t| {
        format!(
            "#include KHDR\n{}",
            t.replace("a[i] * b[i]", "a[i] OP b[i]")
        )
    });
    f.edit("scene.toml", |t| {
        t.replace(
            "source = \"kernels/mul.c\"",
            "source = \"kernels/mul.c\"\ndefines = { KHDR = '\"op.h\"' }",
        )
    });
    f.run();
    f.cc.reset();
    f.run();
    assert_eq!(f.cc.count("kernels/mul.c"), 0, "unchanged: a hit");

    std::fs::write(f.scene_dir.join("kernels/op.h"), "#define OP +\n").unwrap();
    let compile = f.scene(&["compile", "--explain"]).output().unwrap();
    let text = String::from_utf8_lossy(&compile.stdout);
    assert!(compile.status.success(), "{text}");
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/add.c"), 0);
    assert!(text.contains("kernels/op.h changed"), "{text}");
    let out = f.scene(&["run"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a wrong kernel passed:\n{stdout}");
    assert!(stdout.contains("FAIL vector_example::small"), "{stdout}");
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "the run used that compile");

    // Fixed again: the right kernel, from the cache or the compiler, passes.
    std::fs::write(f.scene_dir.join("kernels/op.h"), "#define OP *\n").unwrap();
    f.run();
}

/// Issue 27, cause 2: `#define H "hdr.h"` / `#include H`.
#[test]
fn header_included_through_a_macro_is_followed() {
    let f = Fixture::new();
    std::fs::write(f.scene_dir.join("kernels/hdr.h"), "#define UNUSED_K 1\n").unwrap();
    f.edit("kernels/mul.c", |t| {
        format!("#define H \"hdr.h\"\n#include H\n{t}")
    });
    f.run();
    f.cc.reset();
    f.run();
    assert_eq!(f.cc.lines(), Vec::<String>::new(), "unchanged: all hits");
    std::fs::write(f.scene_dir.join("kernels/hdr.h"), "#define UNUSED_K 2\n").unwrap();
    f.run();
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/add.c"), 0);
    assert_eq!(f.cc.count("orchestration.c"), 0);
}

#[test]
fn changing_a_define_recompiles_that_kernel() {
    let f = Fixture::new();
    f.run();
    f.cc.reset();
    f.edit("scene.toml", |t| {
        t.replace(
            "source = \"kernels/mul.c\"",
            "source = \"kernels/mul.c\"\ndefines = { UNUSED_TILE = \"64\" }",
        )
    });
    f.run();
    let lines = f.cc.lines();
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "{lines:?}");
    assert_eq!(f.cc.count("-DUNUSED_TILE=64"), 1, "{lines:?}");
    assert_eq!(f.cc.count("kernels/add.c"), 0);
    assert_eq!(f.cc.count("orchestration.c"), 0);
}

#[test]
fn changing_the_compiler_identity_recompiles_everything() {
    let mut f = Fixture::new();
    f.run();
    let other = wrapper(f.env.dir.path(), "cc-other", "a different compiler build");
    f.cc = other;
    f.run();
    for unit in [
        "kernels/add.c",
        "kernels/mul.c",
        "kernels/add_scalar.c",
        "orchestration.c",
    ] {
        assert_eq!(f.cc.count(unit), 1, "{unit}: {:?}", f.cc.lines());
    }
}

#[test]
fn editing_the_orchestration_reuses_every_incore() {
    let f = Fixture::new();
    f.run();
    let incores: Vec<String> = f
        .entries()
        .into_iter()
        .filter(|e| e.kind == "incore")
        .map(|e| e.key)
        .collect();
    assert_eq!(incores.len(), 3);
    f.cc.reset();
    f.edit("orchestration.c", |t| format!("{t}\n/* edited */\n"));
    f.run();
    assert_eq!(f.cc.count("orchestration.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(
        f.cc.lines().len(),
        1,
        "only the orchestration: {:?}",
        f.cc.lines()
    );
    let callables = f.entries().iter().filter(|e| e.kind == "callable").count();
    assert_eq!(
        callables, 2,
        "a new callable entry over the same incore keys"
    );
    for key in incores {
        assert!(f.entries().iter().any(|e| e.key == key));
    }
}

/// Damages the `add` kernel's entry with `damage`, then checks the next
/// run warns about it by key, recompiles exactly that unit and passes, and
/// that the cache is consistent afterwards.
fn damaged_entry_is_detected_and_rebuilt(damage: impl FnOnce(&Fixture, &Entry)) {
    let f = Fixture::new();
    f.run();
    let add = f.entry("vector_example/add");
    damage(&f, &add);
    f.cc.reset();
    let out = f.run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains(&add.key), "{stderr}");
    assert!(warnings[0].contains("damaged"), "{stderr}");
    assert_eq!(f.cc.count("kernels/add.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/mul.c"), 0);
    let verify = f.scene(&["cache", "verify"]).output().unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn flipped_byte_is_detected() {
    damaged_entry_is_detected_and_rebuilt(|_, e| {
        let mut bytes = std::fs::read(e.artifact()).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        std::fs::write(e.artifact(), bytes).unwrap();
    });
}

#[test]
fn truncated_artifact_is_detected() {
    damaged_entry_is_detected_and_rebuilt(|_, e| {
        let bytes = std::fs::read(e.artifact()).unwrap();
        std::fs::write(e.artifact(), &bytes[..bytes.len() / 2]).unwrap();
    });
}

#[test]
fn deleted_manifest_is_detected() {
    damaged_entry_is_detected_and_rebuilt(|_, e| std::fs::remove_file(e.manifest()).unwrap());
}

#[test]
fn garbage_manifest_is_detected() {
    damaged_entry_is_detected_and_rebuilt(|_, e| {
        std::fs::write(e.manifest(), b"{\"schema\": 1, garbage").unwrap();
    });
}

#[test]
fn manifest_of_another_key_is_detected() {
    damaged_entry_is_detected_and_rebuilt(|f, e| {
        // A well-formed manifest and artifact, filed under the wrong key.
        let mul = f.entry("vector_example/mul");
        std::fs::copy(mul.manifest(), e.manifest()).unwrap();
        std::fs::copy(mul.artifact(), e.artifact()).unwrap();
    });
}

#[test]
fn verify_reports_removes_and_exits_1_on_damage() {
    let f = Fixture::new();
    f.run();
    let add = f.entry("vector_example/add");
    std::fs::write(add.artifact(), b"not a kernel").unwrap();
    let out = f.scene(&["cache", "verify"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("damaged {}", add.key)), "{stdout}");
    assert!(stdout.contains("checked 5 entries: 1 damaged"), "{stdout}");
    assert!(!add.dir.exists(), "damaged entry removed");
    let again = f.scene(&["cache", "verify"]).output().unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("checked 4 entries: 0 damaged"));
}

#[test]
fn concurrent_processes_compile_each_unit_once() {
    let f = Fixture::new();
    let children: Vec<_> = (0..3)
        .map(|_| {
            f.scene(&["run", "--compile-workers", "2"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        assert_passed(&child.wait_with_output().unwrap());
    }
    for unit in [
        "kernels/add.c",
        "kernels/mul.c",
        "kernels/add_scalar.c",
        "orchestration.c",
    ] {
        assert_eq!(f.cc.count(unit), 1, "{unit}: {:?}", f.cc.lines());
    }
    assert_eq!(f.entries().len(), 5);
    let verify = f.scene(&["cache", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0));
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn a_process_killed_mid_build_leaves_a_consistent_cache() {
    let f = Fixture::new();
    let ready = f.env.dir.path().join("ready.fifo");
    let release = f.env.dir.path().join("release.fifo");
    mkfifo(&ready);
    mkfifo(&release);
    let mut child = f
        .scene(&["run", "--compile-workers", "1"])
        .env("SCENE_TEST_BLOCK_ON", "kernels/mul.c")
        .env("SCENE_TEST_READY", &ready)
        .env("SCENE_TEST_RELEASE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded, as a failure guard only) until the wrapper compiling
    // mul.c says it is blocked: the scene process is mid-build, holding
    // mul's key lock, with other units possibly already published.
    let (tx, rx) = std::sync::mpsc::channel();
    let ready_path = ready.clone();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::fs::File::open(&ready_path).and_then(|mut f| f.read_to_string(&mut text));
        let _ = tx.send(text);
    });
    let said = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the compiler wrapper never reached mul.c");
    assert_eq!(said.trim(), "ready");
    child.kill().unwrap();
    child.wait().unwrap();
    // Let the orphaned wrapper go (it exits without producing anything).
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&release)
            .unwrap(),
    );

    let verify = f.scene(&["cache", "verify"]).output().unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert!(
        !f.entries().iter().any(|e| e.unit == "vector_example/mul"),
        "no entry for the killed unit"
    );
    f.cc.reset();
    f.run();
    assert_eq!(f.cc.count("kernels/mul.c"), 1, "{:?}", f.cc.lines());
}

#[test]
fn prune_by_age_then_by_size() {
    let f = Fixture::new();
    f.run();
    let now = SystemTime::now();
    let add = f.entry("vector_example/add");
    let mul = f.entry("vector_example/mul");
    set_mtime(&add.manifest(), now - 20 * DAY);
    set_mtime(&mul.manifest(), now - 2 * DAY);
    let out = f.scene(&["cache", "prune"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("removed 1 entries"), "{stdout}");
    assert!(!add.dir.exists() && mul.dir.exists(), "{stdout}");

    let out = f
        .scene(&["cache", "prune", "--max-age", "1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!mul.dir.exists(), "unused for 2 days > 1 day");
    let left = f.entries().len();
    assert_eq!(left, 3);

    // By size: the least recently used go first.
    let mut order = f.entries();
    for (i, e) in order.iter().enumerate() {
        set_mtime(&e.manifest(), now - DAY / 24 * (i as u32 + 1));
    }
    let newest_size: u64 = ["artifact", "manifest.json"]
        .iter()
        .map(|n| std::fs::metadata(order[0].dir.join(n)).unwrap().len())
        .sum();
    let out = f
        .scene(&["cache", "prune", "--max-size", &newest_size.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let left = f.entries();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        left[0].key,
        order.remove(0).key,
        "the most recently used stays"
    );
    // Runs still pass after pruning.
    f.run();
}

#[test]
fn unwritable_cache_dir_falls_back_with_one_warning() {
    let f = Fixture::new();
    let blocker = f.env.dir.path().join("not-a-dir");
    std::fs::write(&blocker, "a file").unwrap();
    let out = f
        .scene(&["run"])
        .env("SCENE_CACHE_DIR", blocker.join("cache"))
        .output()
        .unwrap();
    assert_passed(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("not-a-dir/cache"), "{stderr}");
}

/// Issue 38, cause 5: the `scene` binary unpacks the simulator runtime it
/// carries into `<cache>/runtime/`, and a cache directory that could not
/// take it stopped every `scene run` of an installed binary (no runtime
/// beside it) with exit 3: "cannot find the device runtime ...; set
/// SCENE_RUNTIME_LIB or build scene-sim-runtime" for a cache dir that is a
/// file, lies under one or is a FIFO (the run had dropped the cache, and
/// with it the embedded runtime), "cannot unpack the simulator runtime
/// ... to /proc/self/fdinfo/runtime/..." for a directory even root cannot
/// write in. As documented, a run compiles without a cache after one
/// warning: the runtime goes into a private temp directory (removed at
/// the end) and nothing else is said. `compile` and `precompile` too;
/// `scene cache` keeps such a directory a usage error.
#[test]
fn an_unusable_cache_dir_runs_with_one_warning_and_a_private_runtime() {
    let env = TestEnv::new();
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let fifo = env.dir.path().join("a-fifo");
    mkfifo(&fifo);
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let warnings = |out: &Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("warning"))
            .map(str::to_owned)
            .collect()
    };
    let private_dirs = || -> Vec<String> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("scene-runtime-"))
            .collect()
    };
    let unwritable = PathBuf::from("/proc/self/fdinfo");
    for (i, cache) in [file.clone(), file.join("cache"), fifo, unwritable.clone()]
        .iter()
        .enumerate()
    {
        let mut commands = vec![vec!["run".to_owned(), "vector_example::small".to_owned()]];
        // One cache of each kind (refused by the command line, refused by
        // the kernel cache itself) for the commands that need no card.
        if i == 0 || cache == &unwritable {
            let bundle = env.dir.path().join(format!("bundle-{i}"));
            commands.push(vec!["compile".into(), "vector_example".into()]);
            commands.push(vec![
                "precompile".into(),
                "vector_example::small".into(),
                "--out".into(),
                bundle.display().to_string(),
            ]);
        }
        for args in commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = env
                .lone_scene(&args)
                .env("SCENE_CACHE_DIR", cache)
                .env("TMPDIR", &tmp)
                .output()
                .unwrap();
            let what = format!("{args:?} with the cache {}", cache.display());
            assert_eq!(out.status.code(), Some(0), "{what}: {}", show(&out));
            let warned = warnings(&out);
            assert_eq!(warned.len(), 1, "{what}: {}", show(&out));
            assert!(
                warned[0].contains(&cache.display().to_string()),
                "{what}: {warned:?}"
            );
            if args[0] == "run" {
                assert!(
                    String::from_utf8_lossy(&out.stdout).contains("1 passed"),
                    "{what}: {}",
                    show(&out)
                );
            }
            assert_eq!(private_dirs(), Vec::<String>::new(), "{what}: left behind");
        }
    }
    // `scene cache` cannot work without its directory: a usage error.
    for cache in [file.clone(), file.join("cache")] {
        for sub in ["stats", "verify", "prune", "clear"] {
            let out = env
                .lone_scene(&["cache", sub])
                .env("SCENE_CACHE_DIR", &cache)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "cache {sub}: {}", show(&out));
        }
    }
}

/// Issue 38, cause 5: a cache the kernel cache can use but whose
/// `runtime/` cannot take the runtime (here a file in its place) costs one
/// warning naming what failed, and the run goes on with a private copy
/// and the kernel cache.
#[test]
fn a_cache_that_cannot_take_the_runtime_warns_once_and_runs() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.cache_dir).unwrap();
    std::fs::write(env.cache_dir.join("runtime"), "not a directory").unwrap();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = env
        .lone_scene(&["run", "vector_example::small"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", show(&out));
    let expected = format!(
        "warning: cannot unpack the simulator runtime into {}",
        env.cache_dir.join("runtime").display()
    );
    assert!(warnings[0].starts_with(&expected), "{warnings:?}");
    assert!(
        warnings[0].contains("using a private copy in"),
        "{warnings:?}"
    );
    assert!(
        env.cache_dir.join("entries").is_dir(),
        "the kernel cache is still used"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("scene-runtime-"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "left behind");
}

/// Issue 38, cause 5, a full cache: the kernel cache's small entries fit,
/// the runtime (megabytes) does not. One warning naming the failure (`No
/// space left on device`), a private copy, a passing run. Needs a mount
/// namespace for a tiny tmpfs (`unshare -r -m`); skipped with a note
/// where the host forbids one.
#[test]
fn a_full_cache_dir_runs_with_one_warning() {
    if !common::can_hide_dirs() {
        eprintln!("SKIPPED: this host cannot make a mount namespace (`unshare -r -m` fails)");
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.cache_dir).unwrap();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let lone = env.lone_scene(&["run", "vector_example::small"]);
    // A 2 MiB tmpfs over the cache dir, in a namespace of the run's own.
    let mut cmd = Command::new("unshare");
    cmd.args(["-r", "-m", "--", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=2m none "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(&env.cache_dir)
        .arg(lone.get_program())
        .args(lone.get_args())
        .env("TMPDIR", &tmp);
    for (k, v) in lone.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", show(&out));
    assert!(
        warnings[0].contains("cannot unpack the simulator runtime into")
            && warnings[0].contains("No space left on device")
            && warnings[0].contains("using a private copy in"),
        "{warnings:?}"
    );
}

#[test]
fn cache_dir_flag_and_clear() {
    let f = Fixture::new();
    let dir = f.env.dir.path().join("flag-cache");
    let out = f
        .scene(&["run", "--cache-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_passed(&out);
    assert_eq!(entries(&dir).len(), 5);
    assert!(
        entries(&f.env.cache_dir).is_empty(),
        "the flag wins over the env"
    );
    let out = f
        .scene(&["cache", "clear", "--cache-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed 5 entries"));
    assert!(entries(&dir).is_empty());
}

/// File digests outlive the process (`<cache>/digests/files.bin`, holding
/// the workspace's device headers, which are old enough to memoise): a
/// second `scene compile` is still all hits, and `cache clear` removes the
/// store with the rest.
#[test]
fn a_second_compile_hits_with_persisted_digests_and_clear_removes_them() {
    let f = Fixture::new();
    let compile = || {
        let out = f.scene(&["compile", "--explain"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let first = compile();
    assert!(first.contains(" 0 cached,"), "{first}");
    let store = f.env.cache_dir.join("digests").join("files.bin");
    assert!(store.is_file(), "no digest store after a build");
    let second = compile();
    assert!(second.contains(", 0 compiled,"), "{second}");
    assert!(
        !second
            .lines()
            .any(|l| l.starts_with("compiled vector_example")),
        "{second}"
    );

    let out = f.scene(&["cache", "clear"]).output().unwrap();
    assert!(out.status.success());
    assert!(!store.exists() && !store.parent().unwrap().exists());
}

/// The builtins object is cached too (in `<cache>/objects/`): a new process
/// with a warm cache that must link an edited kernel compiles no builtins.
#[test]
fn a_warm_cache_compiles_no_builtins_in_a_new_process() {
    let f = Fixture::new();
    f.run();
    assert!(f.cc.count("scene_builtins.c") >= 1, "{:?}", f.cc.lines());
    f.cc.reset();
    f.edit("kernels/add.c", |t| format!("{t}\n/* edited */\n"));
    f.run();
    assert_eq!(f.cc.count("kernels/add.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("scene_builtins.c"), 0, "{:?}", f.cc.lines());
    let stats = f.scene(&["cache", "stats"]).output().unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{text}");
    let support = text
        .lines()
        .find(|l| l.starts_with("support objects: "))
        .unwrap_or_else(|| panic!("no support objects line: {text}"));
    assert!(support.contains("builtins"), "{text}");
    assert!(
        f.entries().iter().all(|e| e.kind != "builtins"),
        "entries/ holds scene units only"
    );
}

/// Bound for a `scene` process that must not hang on a damaged entry.
const NO_HANG: Duration = Duration::from_secs(180);

/// Runs `cmd` to completion, killing it and failing the test if it takes
/// longer than `limit` (a read blocked on a FIFO, say). Output goes to
/// anonymous files, so a chatty child cannot block on a full pipe.
fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    use std::io::{Seek, SeekFrom};
    let mut stdout = tempfile::tempfile().unwrap();
    let mut stderr = tempfile::tempfile().unwrap();
    let mut child = cmd
        .stdout(stdout.try_clone().unwrap())
        .stderr(stderr.try_clone().unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`{cmd:?}` did not finish within {limit:?}");
        }
        // Polling interval of the timeout guard, not a synchronisation.
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |f: &mut std::fs::File| {
        let mut bytes = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut bytes).unwrap();
        bytes
    };
    Output {
        status,
        stdout: read(&mut stdout),
        stderr: read(&mut stderr),
    }
}

/// Replaces a file of the `add` kernel's entry with something that is not
/// a regular file (`damage`), then checks that a run warns about it (naming
/// the key and `what` the file is), recompiles exactly that unit and
/// passes, never hanging; and that `scene cache verify` reports the same
/// damage (done again) and removes the entry.
fn irregular_file_is_damage(what: &str, damage: impl Fn(&Fixture, &Entry)) {
    let f = Fixture::new();
    f.run();
    let add = f.entry("vector_example/add");
    damage(&f, &add);
    f.cc.reset();
    let out = output_within(&mut f.scene(&["run"]), NO_HANG);
    assert_passed(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains(&add.key), "{stderr}");
    assert!(warnings[0].contains("damaged"), "{stderr}");
    assert!(warnings[0].contains(what), "{stderr}");
    assert_eq!(f.cc.count("kernels/add.c"), 1, "{:?}", f.cc.lines());
    assert_eq!(f.cc.count("kernels/mul.c"), 0);

    // Republished under the same key; damage it again for verify.
    let add = f.entry("vector_example/add");
    damage(&f, &add);
    let verify = output_within(&mut f.scene(&["cache", "verify"]), NO_HANG);
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(1), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("damaged {}", add.key)))
        .unwrap_or_else(|| panic!("not reported: {stdout}"));
    assert!(line.contains(what), "{stdout}");
    assert!(stdout.contains("checked 5 entries: 1 damaged"), "{stdout}");
    assert!(std::fs::symlink_metadata(&add.dir).is_err(), "removed");
}

#[test]
fn artifact_linked_to_dev_zero_is_damage_not_a_read() {
    irregular_file_is_damage("a symbolic link", |_, e| {
        std::fs::remove_file(e.artifact()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", e.artifact()).unwrap();
    });
}

#[test]
fn artifact_replaced_by_a_fifo_is_damage_not_a_hang() {
    irregular_file_is_damage("a FIFO", |_, e| {
        std::fs::remove_file(e.artifact()).unwrap();
        mkfifo(&e.artifact());
    });
}

#[test]
fn manifest_linked_to_a_valid_manifest_is_damage() {
    irregular_file_is_damage("a symbolic link", |f, e| {
        let elsewhere = f.env.dir.path().join("elsewhere-manifest.json");
        std::fs::copy(e.manifest(), &elsewhere).unwrap();
        std::fs::remove_file(e.manifest()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, e.manifest()).unwrap();
    });
}

/// The golden entries (`<cache>/goldens/store/<xx>/<key>/`, the kernel
/// cache's golden tier), as dirs.
fn golden_entries(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(shards) = std::fs::read_dir(cache.join("goldens").join("store")) else {
        return out;
    };
    for shard in shards {
        for dir in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            out.push(dir.unwrap().path());
        }
    }
    out.sort();
    out
}

/// `scene cache stats|verify|prune|clear` cover the golden cache beside
/// the kernel entries: counted, a corrupted golden found, named and
/// removed by verify, pruned by the same age policy, cleared.
#[test]
fn cache_commands_cover_the_golden_cache() {
    let f = Fixture::new();
    f.run();
    let goldens = golden_entries(&f.env.cache_dir);
    assert_eq!(goldens.len(), 2, "one golden per case: {goldens:?}");

    let stats = f.scene(&["cache", "stats"]).output().unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{text}");
    let bytes: u64 = goldens
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        text.contains(&format!("goldens: 2, {bytes} bytes")),
        "{text}"
    );

    // Corrupt one golden's data: verify names it, removes it, exits 1.
    let damaged = &goldens[0];
    let artifact = damaged.join("artifact");
    let mut data = std::fs::read(&artifact).unwrap();
    let last = data.len() - 1;
    data[last] ^= 0x40;
    std::fs::write(&artifact, data).unwrap();
    let key = damaged.file_name().unwrap().to_str().unwrap();
    let out = f.scene(&["cache", "verify"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("damaged golden {key}: artifact blake3 ")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("(removed {})", damaged.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("checked 2 golden entries: 1 damaged"),
        "{stdout}"
    );
    assert!(stdout.contains("checked 5 entries: 0 damaged"), "{stdout}");
    assert!(!damaged.exists(), "damaged golden removed");
    let again = f.scene(&["cache", "verify"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("checked 1 golden entries: 0 damaged"),
        "{stdout}"
    );

    // The run recomputes the removed golden; then age both past the max age.
    f.run();
    let goldens = golden_entries(&f.env.cache_dir);
    assert_eq!(goldens.len(), 2);
    let now = SystemTime::now();
    set_mtime(&goldens[0].join("manifest.json"), now - 20 * DAY);
    set_mtime(&goldens[1].join("manifest.json"), now - 2 * DAY);
    let out = f.scene(&["cache", "prune"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("removed 1 golden entries (1 unused for over 14.0 days"),
        "{stdout}"
    );
    assert_eq!(golden_entries(&f.env.cache_dir), vec![goldens[1].clone()]);

    let out = f.scene(&["cache", "clear"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("(1 entries)"), "{stdout}");
    assert!(!f.env.cache_dir.join("goldens").exists());
}

/// Goldens go through the kernel cache's remote tier too (a shared folder
/// here, the cheapest remote): a second runner with an empty local cache
/// computes none of them, and a damaged remote golden is recomputed and
/// republished, never used.
#[test]
fn goldens_share_the_remote_tier() {
    let f = Fixture::new();
    let remote = f.env.dir.path().join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}", remote.display());
    let runner = |name: &str| {
        let mut cmd = f.scene(&["run", "--report-json"]);
        let report = f.env.dir.path().join(format!("{name}.json"));
        cmd.arg(&report)
            .env(
                "SCENE_CACHE_DIR",
                f.env.dir.path().join(format!("cache-{name}")),
            )
            .env("SCENE_CACHE_REMOTE", &url)
            .env_remove("SCENE_CACHE_REMOTE_READONLY");
        let out = cmd.output().unwrap();
        assert_passed(&out);
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("remote kernel cache"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        json
    };
    let goldens_computed = |r: &serde_json::Value| r["totals"]["goldens_computed"].as_u64();
    let a = runner("a");
    assert_eq!(goldens_computed(&a), Some(2), "{a:#}");
    let objects: Vec<PathBuf> = std::fs::read_dir(remote.join("scene-cache"))
        .unwrap()
        .flat_map(|v| std::fs::read_dir(v.unwrap().path().join("goldens")).unwrap())
        .flat_map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap())
        .map(|o| o.unwrap().path())
        .collect();
    assert_eq!(
        objects.len(),
        2,
        "one remote object per golden: {objects:?}"
    );

    let b = runner("b");
    assert_eq!(goldens_computed(&b), Some(0), "{b:#}");
    assert_eq!(
        golden_entries(&f.env.dir.path().join("cache-b")).len(),
        2,
        "copied into B's local cache"
    );

    // Flip a byte of one remote golden: C recomputes exactly that one and
    // repairs the object, so D computes none.
    let mut bytes = std::fs::read(&objects[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&objects[0], &bytes).unwrap();
    let c = runner("c");
    assert_eq!(goldens_computed(&c), Some(1), "{c:#}");
    assert_ne!(std::fs::read(&objects[0]).unwrap(), bytes, "repaired");
    let d = runner("d");
    assert_eq!(goldens_computed(&d), Some(0), "{d:#}");
}
