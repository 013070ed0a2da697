//! The environment, read once: the only place in the harness that calls
//! `std::env::var`. Entry points capture an [`Environment`] and resolve it
//! with the command line into one [`RunConfig`] ([`resolve`]); the engine
//! below takes values only.
//!
//! Rules, the same for every variable: an empty value means unset; a flag
//! wins over its variable; a bad value is a usage error naming the
//! variable.

use std::ffi::OsString;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use scene_device::DeviceList;
use scene_device::worker::WorkerCommand;
use scene_harness::platform::{PlatformName, PlatformTable};
use scene_harness::python::provision::Provision;
use scene_harness::{Platform, RunConfig};
use scene_kernels::cache::{RemoteConfig, S3Settings, check_remote_url};

use crate::Layout;

/// Every environment variable the harness reads (README lists them too).
pub const VARIABLES: &[&str] = &[
    "SCENE_PLATFORM",
    "SCENE_PLATFORMS_FILE",
    "SCENE_DEVICES",
    "TASK_DEVICE",
    "SCENE_LOCK_DIR",
    "SCENE_CC",
    "SCENE_CXX",
    "SCENE_LD",
    "SCENE_RUNTIME_LIB",
    "SCENE_RUNTIME_OPTIONS",
    "SCENE_COMPILE_WORKERS",
    "SCENE_GOLDEN_THREADS",
    "SCENE_CACHE_DIR",
    "SCENE_CACHE_REMOTE",
    "SCENE_CACHE_REMOTE_READONLY",
    "SCENE_CACHE_REMOTE_TIMEOUT",
    // An s3:// remote's endpoint, region and credentials.
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SCENE_SCENES_DIR",
    "SCENE_ROOT",
    "SCENE_FAILURE_DUMP_DIR",
    "SCENE_NO_TESTS",
    "SCENE_MAX_CASE_BYTES",
    "SCENE_COMM_TIMEOUT",
    // Python goldens and fixtures: the interpreter, the per-case deadline.
    "SCENE_PYTHON",
    "SCENE_GOLDEN_TIMEOUT",
    // `auto` (default) or `never`: managed environments for Python goldens.
    "SCENE_PYTHON_PROVISION",
    // Any non-empty value: no golden cache (`--no-golden-cache`).
    "SCENE_NO_GOLDEN_CACHE",
    // No colour unless `--color always` (https://no-color.org).
    "NO_COLOR",
    // Where bare tool names (`cc`, `ld`) are found.
    "PATH",
    // GitHub Actions' job summary file (`scene report --github-summary`).
    "GITHUB_STEP_SUMMARY",
];

/// The values of [`VARIABLES`] at one moment; empty values are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    vars: Vec<(&'static str, OsString)>,
}

impl Environment {
    /// Reads the process environment.
    pub fn capture() -> Self {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// An environment from a lookup function (tests, embedding).
    pub fn from_lookup(mut lookup: impl FnMut(&str) -> Option<OsString>) -> Self {
        let vars = VARIABLES
            .iter()
            .filter_map(|&name| {
                let value = lookup(name).filter(|v| !v.is_empty())?;
                Some((name, value))
            })
            .collect();
        Self { vars }
    }

    /// An environment of exactly these variables (tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::from_lookup(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    fn os(&self, name: &str) -> Option<&OsString> {
        self.vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// This environment with `name` set to `value` (a flag standing in for
    /// its variable); `None` leaves it as it is.
    pub fn with_value(mut self, name: &'static str, value: Option<&str>) -> Self {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.vars.retain(|(n, _)| *n != name);
            self.vars.push((name, OsString::from(v)));
        }
        self
    }

    /// A variable as a path.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.os(name).map(PathBuf::from)
    }

    /// A variable as text; a value that is not UTF-8 is a usage error.
    pub fn text(&self, name: &str) -> Result<Option<String>, ConfigError> {
        self.os(name)
            .map(|v| {
                v.to_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ConfigError(format!("{name}: the value is not valid UTF-8")))
            })
            .transpose()
    }
}

/// A bad value in the command line or the environment: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// What to do when a selection matches no case (`--no-tests`,
/// `SCENE_NO_TESTS`), as in cargo-nextest: by default it is an error, so a
/// typo in a filter or a platform no scene supports cannot pass green.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoTests {
    /// An error: exit [`crate::EXIT_NO_TESTS`] (the `cargo test` target: a
    /// failing trial).
    #[default]
    Fail,
    /// A warning on stderr; the run passes.
    Warn,
    /// Silently passes.
    Pass,
}

impl std::str::FromStr for NoTests {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "fail" => Ok(Self::Fail),
            "warn" => Ok(Self::Warn),
            "pass" => Ok(Self::Pass),
            _ => Err(format!("`{s}` is not one of fail, warn, pass")),
        }
    }
}

/// `--no-tests`, else `SCENE_NO_TESTS`, else [`NoTests::Fail`].
/// `NO_COLOR` is set (to anything but the empty string): no colour unless
/// `--color always`.
pub fn no_color(env: &Environment) -> bool {
    env.os("NO_COLOR").is_some()
}

pub fn no_tests(env: &Environment, flag: Option<NoTests>) -> Result<NoTests, ConfigError> {
    if let Some(f) = flag {
        return Ok(f);
    }
    Ok(parsed_var(env, "SCENE_NO_TESTS", str::parse)?.unwrap_or_default())
}

/// What the command line says about a run; `None` = not given.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub platform: Option<PlatformName>,
    pub compile_workers: Option<NonZeroUsize>,
    pub devices: Option<DeviceList>,
    pub golden_threads: Option<NonZeroUsize>,
    pub lock_timeout: Option<Duration>,
    pub runtime: Option<PathBuf>,
    /// `Some(ZERO)` = no limit.
    pub case_timeout: Option<Duration>,
    pub dump: Option<PathBuf>,
    pub verbose: bool,
    pub hold_card: bool,
    /// `--in-process`: no device worker process.
    pub in_process: bool,
    /// `--max-case-bytes`; `Some(0)` = no bound.
    pub max_case_bytes: Option<u64>,
    /// `--no-golden-cache`.
    pub no_golden_cache: bool,
    /// `--no-provision`: `SCENE_PYTHON_PROVISION=never`.
    pub no_provision: bool,
    /// Whether the command uses cards at all (`run`): only then are the
    /// card variables read, so a bad `SCENE_DEVICES` cannot break
    /// `scene compile`.
    pub uses_cards: bool,
}

/// The platform table: the built-ins plus `SCENE_PLATFORMS_FILE`, else
/// `<root>/scene-platforms.toml` when it exists.
pub fn platform_table(env: &Environment, root: &Path) -> Result<PlatformTable, ConfigError> {
    PlatformTable::load(root, env.path("SCENE_PLATFORMS_FILE").as_deref())
        .map_err(|e| ConfigError(e.to_string()))
}

/// The platform named by `--platform`, else `SCENE_PLATFORM`, else
/// `a2a3sim`, with `SCENE_CC` / `SCENE_CXX` / `SCENE_LD` applied to its toolchain and
/// `PATH` as its tool search path.
pub fn resolve_platform(
    env: &Environment,
    root: &Path,
    flag: Option<&str>,
) -> Result<Platform, ConfigError> {
    let name = match flag {
        Some(f) => f.to_owned(),
        None => env
            .text("SCENE_PLATFORM")?
            .unwrap_or_else(|| "a2a3sim".to_owned()),
    };
    let table = platform_table(env, root)?;
    let mut platform = table
        .get(&name)
        .map_err(|e| ConfigError(e.to_string()))?
        .clone();
    let toolchain = platform.toolchain_mut();
    toolchain.search_path = env.os("PATH").cloned();
    if let Some(cc) = env.path("SCENE_CC") {
        toolchain.compiler = cc;
    }
    if let Some(cxx) = env.path("SCENE_CXX") {
        toolchain.cxx = cxx;
    }
    if let Some(ld) = env.path("SCENE_LD") {
        toolchain.linker = ld;
    }
    Ok(platform)
}

/// The kernel cache directory: `--cache-dir`, else `SCENE_CACHE_DIR`, else
/// `<root>/target/scene-cache`.
pub fn cache_dir(env: &Environment, flag: Option<&Path>, root: &Path) -> PathBuf {
    flag.filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| env.path("SCENE_CACHE_DIR"))
        .unwrap_or_else(|| root.join("target").join("scene-cache"))
}

/// The remote kernel cache tier: `--cache-remote` (applied to `env` as
/// `SCENE_CACHE_REMOTE` by the entry point), else `SCENE_CACHE_REMOTE`, else
/// none; `SCENE_CACHE_REMOTE_READONLY` (`1`/`true`/`yes` or
/// `0`/`false`/`no`), `SCENE_CACHE_REMOTE_TIMEOUT` (seconds per remote
/// operation, default 2), and for `s3://` the AWS variables.
pub fn cache_remote(env: &Environment) -> Result<Option<RemoteConfig>, ConfigError> {
    let Some(url) = env.text("SCENE_CACHE_REMOTE")? else {
        return Ok(None);
    };
    check_remote_url(&url).map_err(|e| ConfigError(format!("SCENE_CACHE_REMOTE: {e}")))?;
    let mut remote = RemoteConfig::new(url);
    remote.read_only = parsed_var(env, "SCENE_CACHE_REMOTE_READONLY", parse_bool)?.unwrap_or(false);
    if let Some(t) = parsed_var(
        env,
        "SCENE_CACHE_REMOTE_TIMEOUT",
        crate::args::parse_seconds,
    )? {
        if t.is_zero() {
            return Err(ConfigError(
                "SCENE_CACHE_REMOTE_TIMEOUT: must be more than 0 seconds".into(),
            ));
        }
        remote.timeout = t;
    }
    remote.s3 = S3Settings {
        endpoint: env
            .text("AWS_ENDPOINT_URL_S3")?
            .or(env.text("AWS_ENDPOINT_URL")?),
        region: env.text("AWS_REGION")?.or(env.text("AWS_DEFAULT_REGION")?),
        access_key_id: env.text("AWS_ACCESS_KEY_ID")?,
        secret_access_key: env.text("AWS_SECRET_ACCESS_KEY")?,
        session_token: env.text("AWS_SESSION_TOKEN")?,
    };
    Ok(Some(remote))
}

/// `1`, `true`, `yes` or `0`, `false`, `no` (any case).
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!("`{s}` is not one of 1, true, yes, 0, false, no")),
    }
}

/// A positive count (`--compile-workers`, `SCENE_GOLDEN_THREADS`, ...).
pub(crate) fn parse_count(s: &str) -> Result<NonZeroUsize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) => NonZeroUsize::new(n).ok_or_else(|| "must be at least 1".to_string()),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// A number of bytes, with an optional suffix K, M, G, T (powers of 1024)
/// or B (`--max-size`, `--max-case-bytes`, `SCENE_MAX_CASE_BYTES`).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'B' => 0,
                _ => return Err(format!("`{s}`: unknown size suffix `{c}`")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// Most threads `--golden-threads` / `SCENE_GOLDEN_THREADS` may ask for:
/// more is a typo, not a machine.
pub const MAX_GOLDEN_THREADS: usize = 1024;

/// A thread count: positive and at most [`MAX_GOLDEN_THREADS`].
pub(crate) fn parse_threads(s: &str) -> Result<NonZeroUsize, String> {
    let n = parse_count(s)?;
    if n.get() > MAX_GOLDEN_THREADS {
        return Err(format!(
            "`{s}` is too many threads (at most {MAX_GOLDEN_THREADS})"
        ));
    }
    Ok(n)
}

/// A value of variable `name` parsed by `parse`; errors name the variable.
fn parsed_var<T>(
    env: &Environment,
    name: &str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    env.text(name)?
        .map(|v| parse(&v).map_err(|e| ConfigError(format!("{name}: {e}"))))
        .transpose()
}

/// Fraction of physical memory one case's tensors may take by default.
pub const DEFAULT_CASE_MEMORY_FRACTION: u64 = 4;

/// `--max-case-bytes`, else `SCENE_MAX_CASE_BYTES`, else a quarter of
/// physical memory (no bound where that cannot be read); `0` = no bound.
fn max_case_bytes(env: &Environment, flag: Option<u64>) -> Result<Option<u64>, ConfigError> {
    let given = match flag {
        Some(b) => Some(b),
        None => parsed_var(env, "SCENE_MAX_CASE_BYTES", parse_bytes)?,
    };
    Ok(match given {
        Some(0) => None,
        Some(b) => Some(b),
        None => physical_memory().map(|m| m / DEFAULT_CASE_MEMORY_FRACTION),
    })
}

/// Total physical memory in bytes (`MemTotal` of `/proc/meminfo`); `None`
/// where that is not available.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The cards: `--device`, else `SCENE_DEVICES`, else `TASK_DEVICE`, else `0`.
/// `--device`, else `SCENE_DEVICES`, else `TASK_DEVICE`, else card `0`.
fn devices(env: &Environment, flag: Option<&DeviceList>) -> Result<DeviceList, ConfigError> {
    if let Some(d) = flag {
        return Ok(d.clone());
    }
    DeviceList::resolve(
        None,
        env.text("SCENE_DEVICES")?.as_deref(),
        env.text("TASK_DEVICE")?.as_deref(),
    )
    .map_err(|e| ConfigError(e.to_string()))
}

/// With no pool given (no `--device`, `SCENE_DEVICES` or `TASK_DEVICE`),
/// the pool is cards `0..K-1` for the largest rank group `K` among `cases`
/// (level 3), so the default runs every case; just card `0` when no case
/// needs more than one card.
pub fn size_default_pool(
    config: &mut RunConfig,
    env: &Environment,
    flag: Option<&DeviceList>,
    cases: &[scene_harness::SelectedCase],
) {
    let given =
        flag.is_some() || env.os("SCENE_DEVICES").is_some() || env.os("TASK_DEVICE").is_some();
    let k = cases
        .iter()
        .map(scene_harness::SelectedCase::cards)
        .max()
        .unwrap_or(1);
    if !given
        && k > 1
        && let Ok(pool) = format!("0-{}", k - 1).parse()
    {
        config.devices = pool;
    }
}

/// `name` in the directories of `path` (a `PATH` value): the first
/// executable file of that name.
fn find_on_path(path: Option<&OsString>, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A positive number of seconds (`SCENE_COMM_TIMEOUT=2`, `0.5`).
fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v < 1e9 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

/// `SCENE_GOLDEN_TIMEOUT`: seconds, positive, finite, at most 10^9.
fn parse_golden_timeout(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v <= 1e9) {
        return Err(format!(
            "`{s}` is not a positive number of seconds (at most 1e9)"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Command line + environment -> the one configuration of a run.
pub fn resolve(
    layout: &Layout,
    env: &Environment,
    cache_dir_flag: Option<&Path>,
    flags: &Flags,
) -> Result<RunConfig, ConfigError> {
    let platform = resolve_platform(env, &layout.root, flags.platform.as_deref())?;
    let mut config = RunConfig::new(layout.root.clone(), platform);
    if let Some(include) =
        crate::locate::include_dir(&layout.root, crate::locate::exe_dir().as_deref())
    {
        config.abi_include_dir = include;
    }
    config.cache_dir = Some(cache_dir(env, cache_dir_flag, &layout.root));
    config.cache_remote = cache_remote(env)?;
    // A flag wins: its variable is not even parsed (a bad value there
    // cannot break a run that overrides it).
    let compile_workers = match flags.compile_workers {
        Some(n) => Some(n),
        None => parsed_var(env, "SCENE_COMPILE_WORKERS", parse_count)?,
    };
    if let Some(n) = compile_workers {
        config.compile_workers = n;
    }
    let golden_threads = match flags.golden_threads {
        Some(n) => Some(n),
        None => parsed_var(env, "SCENE_GOLDEN_THREADS", parse_threads)?,
    };
    if let Some(n) = golden_threads {
        config.golden_threads = n.get();
    }
    config.max_case_bytes = max_case_bytes(env, flags.max_case_bytes)?;
    // The flag wins over the variable (not even parsed then); a named
    // interpreter is used as it is whatever either says.
    let provision = match flags.no_provision {
        true => Provision::Never,
        false => parsed_var(env, "SCENE_PYTHON_PROVISION", str::parse)?.unwrap_or_default(),
    };
    config.python.provision = provision;
    if let Some(python) = env.path("SCENE_PYTHON") {
        config.python.python = python;
        config.python.provision = Provision::Given;
    }
    config.python.uv = find_on_path(env.os("PATH"), "uv");
    if let Some(t) = parsed_var(env, "SCENE_GOLDEN_TIMEOUT", parse_golden_timeout)? {
        config.python.timeout = t;
    }
    config.golden_cache = !(flags.no_golden_cache || env.os("SCENE_NO_GOLDEN_CACHE").is_some());
    if let Some(d) = env.path("SCENE_FAILURE_DUMP_DIR") {
        config.dumps.failures = d;
    }
    config.dumps.every_case = flags
        .dump
        .as_ref()
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()));
    if flags.uses_cards {
        config.devices = devices(env, flags.devices.as_ref())?;
        config.lock_dir = scene_device::resolve_lock_dir(env.path("SCENE_LOCK_DIR").as_deref());
        config.runtime_lib = flags
            .runtime
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| env.path("SCENE_RUNTIME_LIB"));
        config.embedded_runtime = Some(crate::embedded_runtime::SIM_RUNTIME);
        config.runtime_options = env.text("SCENE_RUNTIME_OPTIONS")?.unwrap_or_default();
        config.lock_timeout = flags.lock_timeout;
        if let Some(t) = flags.case_timeout {
            config.case_timeout = (!t.is_zero()).then_some(t);
        }
        if let Some(t) = parsed_var(env, "SCENE_COMM_TIMEOUT", parse_seconds)? {
            config.comm_timeout = Some(t);
        }
        config.verbose = flags.verbose;
        config.hold_card = flags.hold_card;
        if !flags.in_process {
            // This executable serves as its own device worker (see
            // `serve_device_worker`, called first thing by every entry point).
            config.device_worker = Some(WorkerCommand::current_exe().map_err(|e| {
                ConfigError(format!(
                    "cannot find this executable to start device workers: {e} (--in-process runs without them)"
                ))
            })?);
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        Environment::from_pairs(pairs)
    }

    fn layout() -> Layout {
        Layout {
            root: PathBuf::from("/ws"),
            scenes_dir: PathBuf::from("/ws/tests/scenes"),
        }
    }

    fn cards() -> Flags {
        Flags {
            uses_cards: true,
            ..Flags::default()
        }
    }

    #[test]
    fn python_variables() {
        let c = resolve(&layout(), &env(&[]), None, &cards()).unwrap();
        assert_eq!(c.python.python, PathBuf::from("python3"));
        assert_eq!(c.python.timeout, Duration::from_secs(300));
        assert!(c.golden_cache);
        let e = env(&[
            ("SCENE_PYTHON", "/opt/py/bin/python3"),
            ("SCENE_GOLDEN_TIMEOUT", "2.5"),
            ("SCENE_NO_GOLDEN_CACHE", "1"),
        ]);
        let c = resolve(&layout(), &e, None, &cards()).unwrap();
        assert_eq!(c.python.python, PathBuf::from("/opt/py/bin/python3"));
        assert_eq!(c.python.timeout, Duration::from_millis(2500));
        assert!(!c.golden_cache);
        let flags = Flags {
            no_golden_cache: true,
            ..cards()
        };
        assert!(
            !resolve(&layout(), &env(&[]), None, &flags)
                .unwrap()
                .golden_cache
        );
        assert_eq!(
            c.python.provision,
            Provision::Given,
            "SCENE_PYTHON: as it is"
        );
        for bad in ["0", "-1", "nan", "soon", "1e10"] {
            let e = env(&[("SCENE_GOLDEN_TIMEOUT", bad)]);
            let err = resolve(&layout(), &e, None, &cards())
                .unwrap_err()
                .to_string();
            assert!(err.contains("SCENE_GOLDEN_TIMEOUT"), "{bad}: {err}");
        }
    }

    #[test]
    fn python_provision_variable_and_flag() {
        let c = resolve(&layout(), &env(&[]), None, &cards()).unwrap();
        assert_eq!(c.python.provision, Provision::Auto);
        for (value, want) in [("auto", Provision::Auto), ("never", Provision::Never)] {
            let e = env(&[("SCENE_PYTHON_PROVISION", value)]);
            let c = resolve(&layout(), &e, None, &cards()).unwrap();
            assert_eq!(c.python.provision, want, "{value}");
        }
        let e = env(&[("SCENE_PYTHON_PROVISION", "sometimes")]);
        let err = resolve(&layout(), &e, None, &cards())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SCENE_PYTHON_PROVISION") && err.contains("sometimes"),
            "{err}"
        );
        // The flag wins over the variable, a bad value included.
        let flags = Flags {
            no_provision: true,
            ..cards()
        };
        let c = resolve(&layout(), &e, None, &flags).unwrap();
        assert_eq!(c.python.provision, Provision::Never);
        // SCENE_PYTHON wins over both: never provisioned.
        let e = env(&[
            ("SCENE_PYTHON", "/opt/py/bin/python3"),
            ("SCENE_PYTHON_PROVISION", "auto"),
        ]);
        let c = resolve(&layout(), &e, None, &cards()).unwrap();
        assert_eq!(c.python.provision, Provision::Given);
    }

    #[test]
    fn uv_is_found_on_path() {
        let tmp = tempfile::tempdir().unwrap();
        let c = resolve(
            &layout(),
            &env(&[("PATH", tmp.path().to_str().unwrap())]),
            None,
            &cards(),
        );
        assert_eq!(c.unwrap().python.uv, None);
        let uv = tmp.path().join("uv");
        std::fs::write(&uv, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&uv, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", tmp.path().display());
        let c = resolve(&layout(), &env(&[("PATH", &path)]), None, &cards()).unwrap();
        assert_eq!(c.python.uv, Some(uv));
    }

    #[test]
    fn empty_values_are_unset() {
        let e = env(&[("SCENE_FAILURE_DUMP_DIR", ""), ("SCENE_PLATFORM", "")]);
        let c = resolve(&layout(), &e, None, &cards()).unwrap();
        assert_eq!(c.dumps.failures, PathBuf::from("/ws/target/scene-dumps"));
        assert_eq!(c.platform.name(), "a2a3sim");
    }

    #[test]
    fn flags_win_over_variables() {
        let e = env(&[
            ("SCENE_PLATFORM", "a5sim"),
            ("SCENE_COMPILE_WORKERS", "3"),
            ("SCENE_DEVICES", "4-5"),
            ("SCENE_CACHE_DIR", "/env-cache"),
        ]);
        let c = resolve(&layout(), &e, None, &cards()).unwrap();
        assert_eq!(c.platform.name(), "a5sim");
        assert_eq!(c.compile_workers.get(), 3);
        assert_eq!(c.devices.ids(), [4, 5]);
        assert_eq!(c.cache_dir.as_deref(), Some(Path::new("/env-cache")));
        let flags = Flags {
            platform: Some("a2a3sim".parse().unwrap()),
            compile_workers: NonZeroUsize::new(1),
            devices: Some("7".parse().unwrap()),
            ..cards()
        };
        let c = resolve(&layout(), &e, Some(Path::new("/flag-cache")), &flags).unwrap();
        assert_eq!(c.platform.name(), "a2a3sim");
        assert_eq!(c.compile_workers.get(), 1);
        assert_eq!(c.devices.ids(), [7]);
        assert_eq!(c.cache_dir.as_deref(), Some(Path::new("/flag-cache")));
    }

    #[test]
    fn a_flag_wins_over_a_bad_variable() {
        let e = env(&[
            ("SCENE_COMPILE_WORKERS", "many"),
            ("SCENE_GOLDEN_THREADS", "0"),
            ("SCENE_DEVICES", "x"),
            ("SCENE_MAX_CASE_BYTES", "lots"),
            ("SCENE_NO_TESTS", "maybe"),
        ]);
        let flags = Flags {
            compile_workers: NonZeroUsize::new(2),
            golden_threads: NonZeroUsize::new(3),
            devices: Some("1".parse().unwrap()),
            max_case_bytes: Some(10),
            ..cards()
        };
        let c = resolve(&layout(), &e, None, &flags).unwrap();
        assert_eq!(c.compile_workers.get(), 2);
        assert_eq!(c.golden_threads, 3);
        assert_eq!(c.devices.ids(), [1]);
        assert_eq!(c.max_case_bytes, Some(10));
        assert_eq!(no_tests(&e, Some(NoTests::Warn)).unwrap(), NoTests::Warn);
        assert!(no_tests(&e, None).is_err());
    }

    #[test]
    fn scene_devices_wins_over_task_device() {
        let e = env(&[("SCENE_DEVICES", "1"), ("TASK_DEVICE", "2")]);
        assert_eq!(
            resolve(&layout(), &e, None, &cards())
                .unwrap()
                .devices
                .ids(),
            [1]
        );
        let e = env(&[("TASK_DEVICE", "2,3")]);
        assert_eq!(
            resolve(&layout(), &e, None, &cards())
                .unwrap()
                .devices
                .ids(),
            [2, 3]
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value) in [
            ("SCENE_COMPILE_WORKERS", "many"),
            ("SCENE_GOLDEN_THREADS", "0"),
            ("SCENE_GOLDEN_THREADS", "1025"),
            ("SCENE_DEVICES", "x"),
            ("SCENE_PLATFORM", "a9"),
        ] {
            let e = env(&[(name, value)]);
            let err = resolve(&layout(), &e, None, &cards())
                .unwrap_err()
                .to_string();
            let named = err.contains(name) || err.contains(value);
            assert!(named, "{name}={value}: {err}");
        }
    }

    #[test]
    fn commands_without_cards_ignore_card_variables() {
        let e = env(&[("SCENE_DEVICES", "not a list"), ("TASK_DEVICE", "x")]);
        assert!(resolve(&layout(), &e, None, &Flags::default()).is_ok());
        assert!(resolve(&layout(), &e, None, &cards()).is_err());
    }

    #[test]
    fn max_case_bytes_flag_variable_and_default() {
        let none = env(&[]);
        let c = resolve(&layout(), &none, None, &Flags::default()).unwrap();
        if let Some(m) = physical_memory() {
            assert_eq!(c.max_case_bytes, Some(m / DEFAULT_CASE_MEMORY_FRACTION));
        }
        let e = env(&[("SCENE_MAX_CASE_BYTES", "2M")]);
        let c = resolve(&layout(), &e, None, &Flags::default()).unwrap();
        assert_eq!(c.max_case_bytes, Some(2 << 20));
        let flags = Flags {
            max_case_bytes: Some(0),
            ..Flags::default()
        };
        let c = resolve(&layout(), &e, None, &flags).unwrap();
        assert_eq!(c.max_case_bytes, None, "flag wins; 0 = no bound");
        let e = env(&[("SCENE_MAX_CASE_BYTES", "lots")]);
        let err = resolve(&layout(), &e, None, &Flags::default()).unwrap_err();
        assert!(err.to_string().contains("SCENE_MAX_CASE_BYTES"), "{err}");
    }

    #[test]
    fn cache_remote_variables_and_flag() {
        assert_eq!(cache_remote(&env(&[])).unwrap(), None);
        let e = env(&[
            ("SCENE_CACHE_REMOTE", "s3://bucket/ci"),
            ("SCENE_CACHE_REMOTE_READONLY", "yes"),
            ("SCENE_CACHE_REMOTE_TIMEOUT", "0.5"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ]);
        let r = cache_remote(&e).unwrap().expect("configured");
        assert_eq!(r.url, "s3://bucket/ci");
        assert!(r.read_only);
        assert_eq!(r.timeout, Duration::from_millis(500));
        assert_eq!(r.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(r.s3.region.as_deref(), Some("eu-west-1"));
        assert_eq!(r.s3.secret_access_key.as_deref(), Some("secret"));
        let c = resolve(&layout(), &e, None, &Flags::default()).unwrap();
        assert_eq!(c.cache_remote, Some(r));
        // The flag stands in for the variable.
        let flagged = e.with_value("SCENE_CACHE_REMOTE", Some("redis://127.0.0.1:7/1"));
        let r = cache_remote(&flagged).unwrap().expect("configured");
        assert_eq!(r.url, "redis://127.0.0.1:7/1");
        for (name, value) in [
            ("SCENE_CACHE_REMOTE", "ftp://x"),
            ("SCENE_CACHE_REMOTE_READONLY", "perhaps"),
            ("SCENE_CACHE_REMOTE_TIMEOUT", "soon"),
            ("SCENE_CACHE_REMOTE_TIMEOUT", "0"),
        ] {
            let mut pairs = vec![("SCENE_CACHE_REMOTE", "file:///tmp/x")];
            pairs.retain(|(n, _)| *n != name);
            pairs.push((name, value));
            let err = cache_remote(&env(&pairs)).unwrap_err().to_string();
            assert!(err.contains(name), "{name}={value}: {err}");
        }
    }

    #[test]
    fn toolchain_overrides_apply() {
        let e = env(&[
            ("SCENE_CC", "/opt/cc"),
            ("SCENE_CXX", "/opt/c++"),
            ("SCENE_LD", "/opt/ld"),
        ]);
        let p = resolve_platform(&e, Path::new("/nonexistent-ws"), None).unwrap();
        assert_eq!(p.toolchain().compiler, PathBuf::from("/opt/cc"));
        assert_eq!(p.toolchain().cxx, PathBuf::from("/opt/c++"));
        assert_eq!(p.toolchain().linker, PathBuf::from("/opt/ld"));
    }
}
