//! The remote kernel cache tier (`SCENE_CACHE_REMOTE`) through the real
//! `scene` binary against a real `redis-server` on a loopback port (and a
//! real S3 API: moto's server mode), each runner with its own local cache
//! and the real compiler behind a logging wrapper.
//!
//! Redis tests skip with a message only when `redis-server` cannot be found
//! or started; under CI (`CI` set) they fail instead, since `.ci/run`
//! installs it. The S3 test skips with a message when moto is not
//! installed.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use common::{TestEnv, assert_success, copy_scene, in_ci, output_with_report, read_report, run_ok};

/// Whether a missing service must fail the test rather than skip it.
fn skip(what: &str) {
    assert!(!in_ci(), "{what}: CI must not skip this test");
    eprintln!("SKIPPED: {what}");
}

/// A port free right now on 127.0.0.1 (the server may still lose a race
/// for it: callers retry).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// A `redis-server` of this test: loopback only, no persistence, in a
/// private directory; killed on drop.
struct Redis {
    child: Option<Child>,
    port: u16,
    /// `--requirepass`, which `redis-cli` then needs too.
    password: Option<String>,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts one, waiting for its "Ready to accept connections" line;
    /// `None` (after a message) if `redis-server` cannot run here.
    fn start() -> Option<Redis> {
        Self::start_with_password(None)
    }

    /// [`Redis::start`], clients having to `AUTH` with `password`.
    fn start_with_password(password: Option<&str>) -> Option<Redis> {
        let dir = tempfile::tempdir().expect("tempdir");
        for _attempt in 0..5 {
            let port = free_port();
            let spawned = Command::new("redis-server")
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--protected-mode", "yes", "--daemonize", "no"])
                .arg("--dir")
                .arg(dir.path())
                .args(password.map(|p| ["--requirepass", p]).into_iter().flatten())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn();
            let mut child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    skip(&format!("cannot start redis-server: {e}"));
                    return None;
                }
            };
            let stdout = child.stdout.take().expect("piped");
            let mut lines = BufReader::new(stdout).lines();
            let mut log = Vec::new();
            let ready = lines.by_ref().map_while(Result::ok).any(|l| {
                log.push(l.clone());
                l.contains("Ready to accept connections")
            });
            if ready {
                // Keep draining its log so it never blocks on a full pipe.
                std::thread::spawn(move || lines.for_each(drop));
                return Some(Redis {
                    child: Some(child),
                    port,
                    password: password.map(str::to_owned),
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            let collided = log.iter().any(|l| l.contains("Address already in use"));
            if !collided {
                skip(&format!("redis-server did not start: {}", log.join(" | ")));
                return None;
            }
        }
        skip("redis-server found no free port in 5 attempts");
        None
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// `redis-cli` against this server; stdout as bytes.
    fn cli(&self, args: &[&str]) -> Vec<u8> {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(p) = &self.password {
            cmd.args(["--no-auth-warning", "-a", p]);
        }
        let out = cmd.args(args).output().expect("run redis-cli");
        assert!(
            out.status.success(),
            "redis-cli {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn cli_text(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cli(args)).trim().to_owned()
    }

    fn dbsize(&self) -> usize {
        self.cli_text(&["DBSIZE"]).parse().expect("DBSIZE")
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .cli_text(&["--scan", "--pattern", "*"])
            .lines()
            .map(str::to_owned)
            .collect();
        keys.sort();
        keys
    }

    /// Flips one bit of the last byte of `key`'s value (in the artifact:
    /// the manifest comes first).
    fn flip_last_byte(&self, key: &str) {
        let len: usize = self.cli_text(&["STRLEN", key]).parse().expect("STRLEN");
        assert!(len > 0, "{key} is empty");
        let at = (len - 1).to_string();
        let byte = self.cli(&["GETRANGE", key, &at, &at])[0];
        let flipped = if byte == b'A' { "B" } else { "A" };
        self.cli(&["SETRANGE", key, &at, flipped]);
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A compiler wrapper that logs each invocation's arguments, one line per
/// process. With `SCENE_TEST_BLOCK_ON=<text>`, an invocation whose
/// arguments contain <text> says so on the `SCENE_TEST_READY` fifo and
/// waits for a line on `SCENE_TEST_RELEASE` before compiling.
pub(crate) struct Wrapper {
    pub(crate) path: PathBuf,
    log: PathBuf,
}

impl Wrapper {
    pub(crate) fn new(dir: &Path) -> Wrapper {
        let log = dir.join("cc.log");
        let path = dir.join("cc-wrapper");
        let script = format!(
            r#"#!/bin/sh
echo "$*" >> '{log}'
if [ -n "$SCENE_TEST_BLOCK_ON" ]; then
  case "$*" in
    *"$SCENE_TEST_BLOCK_ON"*)
      echo ready > "$SCENE_TEST_READY"
      read _ < "$SCENE_TEST_RELEASE";;
  esac
fi
exec cc "$@"
"#,
            log = log.display()
        );
        scene_util::write_executable(&path, script).unwrap();
        Wrapper { path, log }
    }

    /// Compiler processes that compiled something: a runner with an empty
    /// local cache still asks `cc --version` once for the key's compiler
    /// identity (memoised in its local `tools/`), which compiles nothing.
    pub(crate) fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.trim() != "--version")
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn reset(&self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Scenes, one logging compiler, and any number of runners (each its own
/// local cache) sharing one remote.
struct Fleet {
    env: TestEnv,
    cc: Wrapper,
    remote: String,
}

impl Fleet {
    /// The package's own scenes (the whole suite).
    fn suite(remote: String) -> Fleet {
        let env = TestEnv::new();
        let cc = Wrapper::new(env.dir.path());
        Fleet { env, cc, remote }
    }

    /// A private copy of `vector_example` only.
    fn vector(remote: String) -> Fleet {
        let env = TestEnv::with_scenes(&[]);
        copy_scene(&env, "vector_example", "vector_example");
        let cc = Wrapper::new(env.dir.path());
        Fleet { env, cc, remote }
    }

    fn cache(&self, runner: &str) -> PathBuf {
        self.env.dir.path().join(format!("cache-{runner}"))
    }

    /// `scene <args>` as runner `runner`.
    fn scene(&self, runner: &str, args: &[&str]) -> Command {
        let mut cmd = self.env.scene(args);
        cmd.env("SCENE_CACHE_DIR", self.cache(runner))
            .env("SCENE_CACHE_REMOTE", &self.remote)
            .env_remove("SCENE_CACHE_REMOTE_READONLY")
            .env("SCENE_CACHE_REMOTE_TIMEOUT", "10")
            .env("SCENE_CC", &self.cc.path)
            .env("TMPDIR", self.env.dir.path());
        cmd
    }

    /// Local entries of `runner`: (key hex, unit, kind).
    fn entries(&self, runner: &str) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        let Ok(shards) = std::fs::read_dir(self.cache(runner).join("entries")) else {
            return out;
        };
        for shard in shards {
            for dir in std::fs::read_dir(shard.unwrap().path()).unwrap() {
                let dir = dir.unwrap().path();
                let Ok(bytes) = std::fs::read(dir.join("manifest.json")) else {
                    continue;
                };
                let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                out.push((
                    dir.file_name().unwrap().to_string_lossy().into_owned(),
                    m["unit"].as_str().unwrap().to_owned(),
                    m["kind"].as_str().unwrap().to_owned(),
                ));
            }
        }
        out.sort();
        out
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Warning lines about the remote tier.
fn remote_warnings(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.contains("remote kernel cache"))
        .map(str::to_owned)
        .collect()
}

/// `remote: hits H, misses M, ...` of `scene cache stats`: (H, M).
fn remote_stats(fleet: &Fleet, runner: &str) -> (u64, u64, u64) {
    let out = run_ok(&mut fleet.scene(runner, &["cache", "stats"]));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("remote: hits"))
        .unwrap_or_else(|| panic!("no remote line in:\n{text}"));
    let number = |word: &str| -> u64 {
        let at = line
            .find(word)
            .unwrap_or_else(|| panic!("{word} in {line}"))
            + word.len();
        line[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{word} in {line}"))
    };
    (number("hits"), number("misses"), number("errors"))
}

/// The acceptance path: A compiles the suite cold and fills the remote; B,
/// with an empty local cache, runs the whole suite starting no compiler.
#[test]
fn runner_b_runs_the_whole_suite_without_a_compiler() {
    let Some(redis) = Redis::start() else { return };
    let fleet = Fleet::suite(redis.url());
    let a = run_ok(&mut fleet.scene("a", &["compile"]));
    assert!(remote_warnings(&a).is_empty(), "{}", stderr(&a));
    let compiled = fleet.cc.lines().len();
    assert!(compiled > 0, "A compiled nothing");
    let units = fleet
        .entries("a")
        .iter()
        .filter(|(_, _, kind)| kind != "callable")
        .count();
    assert!(
        redis.dbsize() > units,
        "units, callables and builtins are all remote"
    );
    let (hits, misses, errors) = remote_stats(&fleet, "a");
    assert_eq!((hits, misses, errors), (0, units as u64, 0));

    fleet.cc.reset();
    let (b, json) = output_with_report(
        &mut fleet.scene("b", &["run"]),
        &fleet.env.dir.path().join("b.json"),
    );
    assert_success(&b);
    assert_eq!(
        fleet.cc.lines(),
        Vec::<String>::new(),
        "B started compiler processes"
    );
    assert!(remote_warnings(&b).is_empty(), "{}", stderr(&b));
    assert_eq!(json["remote_hits"], units as u64, "{}", json["remote_hits"]);
    assert_eq!(json["remote_misses"], 0);
    assert_eq!(json["totals"]["failed"], 0);
    assert_eq!(
        fleet.entries("b"),
        fleet.entries("a"),
        "B's local cache is A's"
    );
    assert_eq!(remote_stats(&fleet, "b"), (units as u64, 0, 0));
}

#[test]
fn a_flipped_remote_byte_recompiles_exactly_that_unit_and_repairs_it() {
    let Some(redis) = Redis::start() else { return };
    let fleet = Fleet::vector(redis.url());
    run_ok(&mut fleet.scene("a", &["compile"]));
    let (key, _, _) = fleet
        .entries("a")
        .into_iter()
        .find(|(_, unit, _)| unit.ends_with("/add"))
        .expect("an entry for the add kernel");
    let object = redis
        .keys()
        .into_iter()
        .find(|k| k.ends_with(&key) && k.contains("/entries/"))
        .unwrap_or_else(|| panic!("no remote object for {key}: {:?}", redis.keys()));
    let before = redis.cli(&["GET", &object]);
    redis.flip_last_byte(&object);
    let flipped = redis.cli(&["GET", &object]);
    assert_ne!(flipped, before);

    fleet.cc.reset();
    let b = run_ok(&mut fleet.scene("b", &["compile", "--explain"]));
    let lines = fleet.cc.lines();
    assert_eq!(lines.len(), 1, "exactly one compiler process: {lines:?}");
    assert!(lines[0].contains("kernels/add.c"), "{lines:?}");
    let text = stdout(&b);
    assert_eq!(
        text.lines().filter(|l| l.contains("remote hit")).count(),
        3,
        "orchestration, mul, add_scalar:\n{text}"
    );
    assert!(remote_warnings(&b).is_empty(), "{}", stderr(&b));
    // Repaired (rewritten by B's publish: its manifest records B's compile
    // time, so not byte-equal to A's); it verifies again, so a third runner
    // compiles nothing.
    assert_ne!(redis.cli(&["GET", &object]), flipped);
    fleet.cc.reset();
    run_ok(&mut fleet.scene("c", &["compile"]));
    assert_eq!(fleet.cc.lines(), Vec::<String>::new());
    assert_eq!(remote_stats(&fleet, "b"), (3, 1, 0));
}

/// Issue 27: a key of the wrong type (`-WRONGTYPE` on `GET`) used to turn
/// the remote off for the whole run; it is a miss for that key only.
#[test]
fn issue27_a_wrongtype_key_is_a_miss_for_that_unit_only() {
    let Some(redis) = Redis::start() else { return };
    let fleet = Fleet::vector(redis.url());
    run_ok(&mut fleet.scene("a", &["compile"]));
    let (key, _, _) = fleet
        .entries("a")
        .into_iter()
        .find(|(_, unit, _)| unit.ends_with("/add"))
        .expect("an entry for the add kernel");
    let object = redis
        .keys()
        .into_iter()
        .find(|k| k.ends_with(&key) && k.contains("/entries/"))
        .unwrap_or_else(|| panic!("no remote object for {key}: {:?}", redis.keys()));
    redis.cli(&["DEL", &object]);
    redis.cli(&["LPUSH", &object, "not a cache object"]);
    assert_eq!(redis.cli_text(&["TYPE", &object]), "list");

    fleet.cc.reset();
    let b = run_ok(&mut fleet.scene("b", &["compile", "--explain"]));
    let lines = fleet.cc.lines();
    assert_eq!(lines.len(), 1, "exactly one compiler process: {lines:?}");
    assert!(lines[0].contains("kernels/add.c"), "{lines:?}");
    let text = stdout(&b);
    assert_eq!(
        text.lines().filter(|l| l.contains("remote hit")).count(),
        3,
        "the other units still hit the remote:\n{text}"
    );
    let warnings = remote_warnings(&b);
    assert_eq!(warnings.len(), 1, "{}", stderr(&b));
    assert!(warnings[0].contains(&object), "{warnings:?}");
    assert!(warnings[0].contains("WRONGTYPE"), "{warnings:?}");
    assert!(!warnings[0].contains("unavailable"), "{warnings:?}");
    assert_eq!(remote_stats(&fleet, "b"), (3, 1, 1));
    // B's publish replaced the list with the object (SET takes any type).
    assert_eq!(redis.cli_text(&["TYPE", &object]), "string");
    fleet.cc.reset();
    run_ok(&mut fleet.scene("c", &["compile"]));
    assert_eq!(fleet.cc.lines(), Vec::<String>::new());
}

#[test]
fn killing_redis_mid_run_leaves_the_run_passing_with_one_warning() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let fleet = Fleet::vector(redis.url());
    run_ok(&mut fleet.scene("a", &["compile"]));
    // B needs one compile (an edited kernel); it blocks in the compiler
    // until the test has killed redis, after B's remote reads succeeded.
    let add = fleet
        .env
        .scenes_dir
        .as_ref()
        .expect("own scenes")
        .join("vector_example/kernels/add.c");
    let text = std::fs::read_to_string(&add).unwrap();
    std::fs::write(&add, format!("{text}\n/* edited by runner B */\n")).unwrap();
    let ready = fleet.env.dir.path().join("ready.fifo");
    let release = fleet.env.dir.path().join("release.fifo");
    for fifo in [&ready, &release] {
        let status = Command::new("mkfifo").arg(fifo).status().unwrap();
        assert!(status.success(), "mkfifo {}", fifo.display());
    }
    let report = fleet.env.dir.path().join("b.json");
    let b = fleet
        .scene("b", &["run", "--report-json"])
        .arg(&report)
        .env("SCENE_TEST_BLOCK_ON", "kernels/add.c")
        .env("SCENE_TEST_READY", &ready)
        .env("SCENE_TEST_RELEASE", &release)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::fs::File::open(&ready)
        .unwrap()
        .read_to_string(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    redis.kill();
    writeln!(
        std::fs::File::options().write(true).open(&release).unwrap(),
        "go"
    )
    .unwrap();
    let out = b.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let warnings = remote_warnings(&out);
    assert_eq!(warnings.len(), 1, "{}", stderr(&out));
    assert!(warnings[0].contains("local cache only"), "{warnings:?}");
    let json = read_report(&report);
    assert_eq!(json["remote_hits"], 3);
    assert_eq!(json["remote_misses"], 1);
    let (_, _, errors) = remote_stats(&fleet, "b");
    assert_eq!(errors, 1);
}

#[test]
fn read_only_mode_never_writes() {
    let Some(redis) = Redis::start() else { return };
    let fleet = Fleet::vector(redis.url());
    // An empty remote, read-only: everything compiles, nothing is written.
    let ro = run_ok(
        fleet
            .scene("ro", &["compile"])
            .env("SCENE_CACHE_REMOTE_READONLY", "1"),
    );
    assert!(remote_warnings(&ro).is_empty(), "{}", stderr(&ro));
    assert!(!fleet.cc.lines().is_empty());
    assert_eq!(redis.dbsize(), 0, "{:?}", redis.keys());
    // A trusted runner fills it; a read-only one with an edit reads what
    // it can and writes nothing.
    run_ok(&mut fleet.scene("a", &["compile"]));
    let keys = redis.keys();
    assert!(!keys.is_empty());
    let add = fleet
        .env
        .scenes_dir
        .as_ref()
        .expect("own scenes")
        .join("vector_example/kernels/add.c");
    let text = std::fs::read_to_string(&add).unwrap();
    std::fs::write(&add, format!("{text}\n/* untrusted edit */\n")).unwrap();
    fleet.cc.reset();
    run_ok(
        fleet
            .scene("pr", &["compile"])
            .env("SCENE_CACHE_REMOTE_READONLY", "1"),
    );
    assert_eq!(fleet.cc.lines().len(), 1, "{:?}", fleet.cc.lines());
    assert_eq!(redis.keys(), keys, "read-only wrote to the remote");
    assert_eq!(remote_stats(&fleet, "pr").0, 3);
}

/// A moto S3 server of this test; killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Option<Moto> {
        let has_moto = Command::new("python3")
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_moto {
            eprintln!("SKIPPED: moto (python3 -m moto.server) is not installed");
            return None;
        }
        for _attempt in 0..5 {
            let port = free_port();
            let mut child = Command::new("python3")
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn moto");
            let stderr = child.stderr.take().expect("piped");
            let mut lines = BufReader::new(stderr).lines();
            let mut log = Vec::new();
            let ready = lines.by_ref().map_while(Result::ok).any(|l| {
                log.push(l.clone());
                l.contains("Running on")
            });
            if ready {
                std::thread::spawn(move || lines.for_each(drop));
                return Some(Moto { child, port });
            }
            let _ = child.kill();
            let _ = child.wait();
            if !log.iter().any(|l| l.contains("in use")) {
                panic!("moto did not start: {}", log.join("\n"));
            }
        }
        panic!("moto found no free port in 5 attempts");
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `PUT /<bucket>`: moto accepts unsigned requests.
    fn create_bucket(&self, bucket: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to moto");
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn s3_remote_against_moto() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("scene-cache-test");
    let fleet = Fleet::vector("s3://scene-cache-test/ci/kernels".into());
    let s3 = |cmd: &mut Command| {
        cmd.env("AWS_ENDPOINT_URL", moto.endpoint())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env_remove("AWS_ENDPOINT_URL_S3")
            .env_remove("AWS_SESSION_TOKEN");
    };
    let mut a = fleet.scene("a", &["compile"]);
    s3(&mut a);
    let a = run_ok(&mut a);
    assert!(remote_warnings(&a).is_empty(), "{}", stderr(&a));
    assert!(!fleet.cc.lines().is_empty());
    fleet.cc.reset();
    let mut b = fleet.scene("b", &["compile", "--explain"]);
    s3(&mut b);
    let b = run_ok(&mut b);
    assert!(remote_warnings(&b).is_empty(), "{}", stderr(&b));
    assert_eq!(fleet.cc.lines(), Vec::<String>::new());
    assert_eq!(
        stdout(&b)
            .lines()
            .filter(|l| l.contains("remote hit"))
            .count(),
        4,
        "{}",
        stdout(&b)
    );
}

/// Issue 27, cause 5: a redis password holding `/` was printed whole by
/// `run`, `compile` and `cache stats` (the redaction split the URL at the
/// password's first `/`), and a percent-encoded one was sent to AUTH
/// undecoded. The password here holds raw `/`, `@`, `:` and an encoded
/// `%2F`; the server requires it, so the remote only works when it is
/// decoded right, and no output, report, JUnit or trace shows any of it.
#[test]
fn redis_password_with_slash_is_decoded_and_never_printed() {
    const MARK: &str = "Pl4nted";
    let decoded = format!("{MARK}/s3cr@t:x/y");
    let Some(redis) = Redis::start_with_password(Some(&decoded)) else {
        return;
    };
    let url = format!("redis://:{MARK}/s3cr@t:x%2Fy@127.0.0.1:{}/0", redis.port);
    let fleet = Fleet::vector(url);
    let dir = fleet.env.dir.path().to_path_buf();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut keep = |what: &str, out: &Output| {
        seen.push((format!("{what} stdout"), stdout(out)));
        seen.push((format!("{what} stderr"), stderr(out)));
    };

    let compiled = run_ok(&mut fleet.scene("a", &["compile", "--explain", "-v"]));
    assert!(
        remote_warnings(&compiled).is_empty(),
        "{}",
        stderr(&compiled)
    );
    assert!(
        redis.dbsize() > 0,
        "the decoded password authenticated and wrote"
    );
    keep("compile", &compiled);
    let (report, junit, traces) = (dir.join("r.json"), dir.join("r.xml"), dir.join("traces"));
    let ran = run_ok(
        fleet
            .scene("b", &["run", "--explain", "-v", "--report-json"])
            .arg(&report)
            .arg("--junit")
            .arg(&junit)
            .arg("--trace")
            .arg(&traces),
    );
    assert!(remote_warnings(&ran).is_empty(), "{}", stderr(&ran));
    keep("run", &ran);
    assert!(read_report(&report)["remote_hits"].as_u64() > Some(0));
    let stats = run_ok(&mut fleet.scene("b", &["cache", "stats"]));
    assert!(
        stdout(&stats).contains("remote: redis://***@127.0.0.1:"),
        "{}",
        stdout(&stats)
    );
    keep("cache stats", &stats);

    // Refused (a wrong password) and unusable (a bad database) URLs say so
    // without the password either.
    let wrong = format!("redis://:{MARK}/wr@ng:x%2Fy@127.0.0.1:{}/0", redis.port);
    let refused = fleet
        .scene("c", &["compile"])
        .env("SCENE_CACHE_REMOTE", &wrong)
        .output()
        .expect("run scene");
    assert_eq!(remote_warnings(&refused).len(), 1, "{}", stderr(&refused));
    keep("wrong password", &refused);
    let bad_db = format!("redis://:{MARK}/s3cr@t@127.0.0.1:{}/not-a-db", redis.port);
    let unusable = fleet
        .scene("c", &["cache", "stats"])
        .env("SCENE_CACHE_REMOTE", &bad_db)
        .output()
        .expect("run scene");
    assert_eq!(unusable.status.code(), Some(2), "{}", stderr(&unusable));
    keep("bad database", &unusable);

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let (path, kind) = (entry.path(), entry.file_type().expect("file type"));
            if kind.is_dir() {
                walk(&path, out);
            } else if kind.is_file() {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&dir, &mut files);
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_default();
        seen.push((
            file.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    assert!(seen.iter().any(|(what, _)| what.ends_with("r.xml")));
    assert!(
        seen.iter().any(|(what, _)| what.contains("traces")),
        "a trace file"
    );
    for (what, text) in &seen {
        for secret in [MARK, "s3cr@t", "wr@ng", "x%2Fy"] {
            assert!(!text.contains(secret), "{what} shows `{secret}`:\n{text}");
        }
    }
}

/// A Redis server that answers every command with a valid reply trickled
/// a byte at a time (`GET`: `$-1\r\n`, a miss; anything else: `+OK\r\n`),
/// each byte after `pause`; it counts the commands it read until a `STOP`
/// connection ends it.
struct TricklingRedis {
    port: u16,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl TricklingRedis {
    fn start(pause: std::time::Duration) -> TricklingRedis {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let thread = std::thread::spawn(move || {
            let mut commands = Vec::new();
            for conn in listener.incoming() {
                let mut conn = BufReader::new(conn.expect("accept"));
                if conn.fill_buf().map_or(true, |b| b.starts_with(b"STOP")) {
                    return commands;
                }
                'commands: while let Some(name) = read_resp_command(&mut conn) {
                    let reply: &[u8] = if name == "GET" {
                        b"$-1\r\n"
                    } else {
                        b"+OK\r\n"
                    };
                    commands.push(name);
                    for byte in reply {
                        // The behaviour under test (a slow server), not
                        // synchronisation.
                        std::thread::sleep(pause);
                        if conn
                            .get_mut()
                            .write_all(std::slice::from_ref(byte))
                            .is_err()
                        {
                            break 'commands;
                        }
                    }
                }
            }
            commands
        });
        TricklingRedis { port, thread }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Stops it; the commands it was sent.
    fn finish(self) -> Vec<String> {
        let mut stop = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stop.write_all(b"STOP").expect("stop");
        self.thread.join().expect("the trickling server")
    }
}

/// The name of the next RESP command on `conn`; `None` once it is closed.
fn read_resp_command(conn: &mut BufReader<TcpStream>) -> Option<String> {
    fn header(conn: &mut BufReader<TcpStream>, kind: char) -> Option<usize> {
        let mut line = String::new();
        conn.read_line(&mut line).ok()?;
        line.strip_prefix(kind)?.trim_end().parse().ok()
    }
    let count = header(conn, '*')?;
    let mut name = None;
    for _ in 0..count {
        let len = header(conn, '$')?;
        let mut arg = vec![0; len + 2];
        conn.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        name.get_or_insert_with(|| String::from_utf8_lossy(&arg).into_owned());
    }
    name
}

/// Issue 38, cause 4: a Redis remote that trickles each reply (every byte
/// within `SCENE_CACHE_REMOTE_TIMEOUT`, the whole reply past it) used to
/// keep each request alive for the whole reply: the `GET`s *succeeded* as
/// slow misses one after another (48 s for one scene's cold compile with a
/// byte per 1.9 s). Here, before the fix, the server was sent five `GET`s
/// (about a second each) until a request queued behind them found its
/// deadline spent before it got the connection. Now the first request ends
/// at its deadline: one warning, the remote off for the rest of the run,
/// and the server sees that one request only; the compile still succeeds
/// from the local tier.
#[test]
fn a_trickling_remote_is_switched_off_after_one_request_with_one_warning() {
    let timeout = std::time::Duration::from_millis(600);
    let server = TricklingRedis::start(timeout / 3);
    let fleet = Fleet::vector(server.url());
    let out = run_ok(
        fleet
            .scene("a", &["compile"])
            .env("SCENE_CACHE_REMOTE_TIMEOUT", "0.6"),
    );
    assert!(!fleet.cc.lines().is_empty(), "a cold compile compiles");
    let warnings = remote_warnings(&out);
    assert_eq!(warnings.len(), 1, "{}", stderr(&out));
    assert!(
        warnings[0].contains("unavailable")
            && warnings[0].contains("no complete answer within 600ms")
            && warnings[0].contains("local cache only"),
        "{warnings:?}"
    );
    let commands = server.finish();
    assert_eq!(
        commands,
        ["GET"],
        "requests after the first reached the server"
    );
    let (hits, _, errors) = remote_stats(&fleet, "a");
    assert_eq!((hits, errors), (0, 1));
}
