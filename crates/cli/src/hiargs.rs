//! The high-level half of the configuration: [`HiArgs`], resolved once
//! from [`LowArgs`] (the command line and the environment) and not changed
//! afterwards. Every derived value is computed here: the root and the
//! scenes directory, the cache directory and its remote tier, the platform
//! and its toolchain, the engine's [`RunConfig`] with its rounds, warmup,
//! trace, dependency-graph and argument-dump directories, and the card
//! pool. The commands take these values as they are (ripgrep's
//! `LowArgs` -> `HiArgs`).
//!
//! Rules, the same for every value: an empty value means unset; a flag
//! wins over its variable (which is then not even parsed, so a bad value
//! there cannot break a run that overrides it); a bad value is a usage
//! error ([`UsageError`], exit 2) naming the flag or variable.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use scene_device::DeviceList;
use scene_device::worker::WorkerCommand;
use scene_harness::golden::python::provision::Provision;
use scene_harness::platform::PlatformTable;
use scene_harness::replay::ReplayRequest;
use scene_harness::simpler::SimplerRoot;
use scene_harness::{Platform, RunConfig, SelectedCase};
use scene_kernels::cache::{RemoteConfig, S3Settings, check_remote_url};
use scene_util::Cancel;

use crate::Layout;
use crate::args::{CacheCommand, ColorChoice, Command, ReportArgs, Selection};
use crate::env::Environment;
use crate::error::{CliError, UsageError};
use crate::lowargs::{Flags, LowArgs};
use crate::output::{Stream, Verbosity};
use crate::parse::{
    NoTests, parse_bool, parse_bytes, parse_count, parse_positive_seconds, parse_threads,
};
use crate::paths::{
    check_config_dirs, check_dir, check_not_an_input, check_output_file, is_stdout,
};

/// The one configuration of this process's command.
pub(crate) struct HiArgs {
    /// The workspace root and the scenes directory.
    pub(crate) layout: Layout,
    pub(crate) verbosity: Verbosity,
    pub(crate) command: HiCommand,
}

/// The command with everything it needs resolved.
pub(crate) enum HiCommand {
    List(ListSetup),
    Run(Box<RunSetup>),
    Compile(CompileSetup),
    Precompile(PrecompileSetup),
    Cache(CacheSetup),
    Report(ReportSetup),
    Replay(Box<ReplaySetup>),
}

/// `scene list`: the selection and the platform it selects for.
pub(crate) struct ListSetup {
    pub(crate) selection: Selection,
    pub(crate) platform: Platform,
    /// With test files named: the configuration their Python runs with.
    pub(crate) config: Option<Box<RunConfig>>,
}

/// `scene run`.
pub(crate) struct RunSetup {
    pub(crate) engine: Engine,
    /// Where case lines and the summary go: stderr when a report takes
    /// stdout.
    pub(crate) stream: Stream,
    pub(crate) report_json: Option<PathBuf>,
    pub(crate) junit: Option<PathBuf>,
    /// `--from`: the bundle to run.
    pub(crate) from: Option<PathBuf>,
    pub(crate) explain: bool,
}

/// `scene compile`.
pub(crate) struct CompileSetup {
    pub(crate) engine: Engine,
    pub(crate) explain: bool,
}

/// `scene precompile`.
pub(crate) struct PrecompileSetup {
    pub(crate) engine: Engine,
    /// `--out`: the bundle directory.
    pub(crate) out: PathBuf,
}

/// `scene cache`.
pub(crate) struct CacheSetup {
    pub(crate) dir: PathBuf,
    pub(crate) remote: Option<RemoteConfig>,
    pub(crate) command: CacheCommand,
}

/// `scene report`.
pub(crate) struct ReportSetup {
    pub(crate) args: ReportArgs,
    /// Some output is `-`: the Markdown then goes to stdout only if named.
    pub(crate) stdout_taken: bool,
    /// `--github-summary`: the file GITHUB_STEP_SUMMARY names.
    pub(crate) step_summary: Option<PathBuf>,
}

/// `scene replay`.
pub(crate) struct ReplaySetup {
    pub(crate) config: RunConfig,
    pub(crate) request: ReplayRequest,
}

/// What the commands that run the engine on a selection (`run`,
/// `compile`, `precompile`) share.
pub(crate) struct Engine {
    pub(crate) selection: Selection,
    pub(crate) no_tests: NoTests,
    pub(crate) config: EngineConfig,
}

/// The engine's configuration, resolved. The card pool is the one value
/// that depends on what was selected (a level-3 case needs a group of
/// cards), so the [`RunConfig`] comes from [`EngineConfig::for_cases`].
#[derive(Clone, Debug)]
pub(crate) struct EngineConfig {
    base: RunConfig,
    /// No pool was given (`--device`, `SCENE_DEVICES`, `TASK_DEVICE`): it
    /// is sized for the largest rank group selected.
    size_pool: bool,
}

impl EngineConfig {
    /// The configuration `flags` and `env` give: [`resolve`], with the
    /// directories it will create checked ([`check_config_dirs`]).
    pub(crate) fn resolve(
        layout: &Layout,
        env: &Environment,
        cache_dir_flag: Option<&Path>,
        flags: &Flags,
        cancel: &Cancel,
    ) -> Result<Self, UsageError> {
        let mut base = resolve(layout, env, cache_dir_flag, flags)?;
        base.cancel = cancel.clone();
        check_config_dirs(&mut base, flags.uses_cards)?;
        let given =
            flags.devices.is_some() || env.is_set("SCENE_DEVICES") || env.is_set("TASK_DEVICE");
        Ok(EngineConfig {
            base,
            size_pool: flags.uses_cards && !given,
        })
    }

    pub(crate) fn platform(&self) -> &Platform {
        &self.base.platform
    }

    /// The run configuration for `cases`: with no pool given, cards
    /// `0..K-1` for the largest rank group `K` among them (level 3), so
    /// the default runs every case; just card `0` when no case needs more
    /// than one card.
    /// The configuration before the card pool is sized.
    pub(crate) fn base(&self) -> &RunConfig {
        &self.base
    }

    pub(crate) fn for_cases(&self, cases: &[SelectedCase]) -> RunConfig {
        let mut config = self.base.clone();
        let k = cases.iter().map(SelectedCase::cards).max().unwrap_or(1);
        if self.size_pool
            && k > 1
            && let Ok(pool) = format!("0-{}", k - 1).parse()
        {
            config.devices = pool;
        }
        config
    }
}

impl HiArgs {
    /// Resolves what the user said. `built`: the layout the binary was
    /// built with (the last place the root is looked for); `cancel`: what
    /// SIGINT / SIGTERM cancel, for the commands that start long work.
    pub(crate) fn resolve(low: LowArgs, built: Layout, cancel: &Cancel) -> Result<Self, CliError> {
        let LowArgs {
            root,
            scenes_dir,
            cache_dir,
            quiet,
            verbose,
            color,
            command,
            env,
            cwd,
            exe_dir,
        } = low;
        let layout = layout(
            built,
            root,
            scenes_dir,
            &env,
            cwd.as_deref(),
            exe_dir.as_deref(),
        );
        let verbosity = Verbosity {
            quiet,
            verbose,
            color: match color {
                Some(ColorChoice::Always) => Some(true),
                Some(ColorChoice::Never) => Some(false),
                Some(ColorChoice::Auto) | None => env.is_set("NO_COLOR").then_some(false),
            },
        };
        let cache_flag = cache_dir.as_deref();
        // The configuration first, then `--no-tests`: a bad flag or
        // variable is a usage error before any scene is read.
        let engine = |selection: Selection, flags: &Flags| -> Result<Engine, UsageError> {
            let selection = with_test_paths(selection);
            let config = EngineConfig::resolve(&layout, &env, cache_flag, flags, cancel)?;
            let no_tests = no_tests(&env, flags.no_tests)?;
            Ok(Engine {
                selection,
                no_tests,
                config,
            })
        };
        let command = match command {
            Command::Cache(args) => {
                let dir = cache_dir_of(&env, cache_flag, &layout.root);
                check_dir("cache dir (--cache-dir, SCENE_CACHE_DIR)", &dir)
                    .map_err(UsageError::from)?;
                HiCommand::Cache(CacheSetup {
                    dir,
                    remote: cache_remote(&env)?,
                    command: args.command,
                })
            }
            Command::List(args) => {
                let platform =
                    resolve_platform(&env, &layout.root, args.selection.platform.as_deref())?;
                let selection = with_test_paths(args.selection);
                let config = match selection.paths.is_empty() {
                    true => None,
                    false => {
                        let flags = Flags {
                            platform: selection.platform.clone(),
                            ..Flags::default()
                        };
                        let c = EngineConfig::resolve(&layout, &env, cache_flag, &flags, cancel)?;
                        Some(Box::new(c.base().clone()))
                    }
                };
                HiCommand::List(ListSetup {
                    selection,
                    platform,
                    config,
                })
            }
            Command::Run(args) => {
                // Checked before any work: a report that cannot be
                // written fails now.
                let to_stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(is_stdout);
                if to_stdout(&args.report_json) && to_stdout(&args.junit) {
                    return Err(UsageError::TwoReportsOnStdout.into());
                }
                // A report on stdout keeps stdout for the report: every
                // human line (case lines, summary) goes to stderr.
                let stream = if to_stdout(&args.report_json) || to_stdout(&args.junit) {
                    Stream::Stderr
                } else {
                    Stream::Stdout
                };
                for (flag, path) in [
                    ("--report-json", &args.report_json),
                    ("--junit", &args.junit),
                ] {
                    if let Some(path) = path
                        && !is_stdout(path)
                    {
                        check_output_file(flag, path).map_err(UsageError::from)?;
                    }
                }
                let flags = Flags::run(&args, verbose);
                let args = *args;
                HiCommand::Run(Box::new(RunSetup {
                    engine: engine(args.selection, &flags)?,
                    stream,
                    report_json: args.report_json,
                    junit: args.junit,
                    from: args.from,
                    explain: args.explain,
                }))
            }
            Command::Compile(args) => {
                let flags = Flags::compile(&args);
                HiCommand::Compile(CompileSetup {
                    engine: engine(args.selection, &flags)?,
                    explain: args.explain,
                })
            }
            Command::Precompile(args) => {
                check_dir("--out", &args.out).map_err(UsageError::from)?;
                let flags = Flags::precompile(&args);
                HiCommand::Precompile(PrecompileSetup {
                    engine: engine(args.selection, &flags)?,
                    out: args.out,
                })
            }
            Command::Report(args) => HiCommand::Report(report_setup(args, &env)?),
            Command::Replay(args) => {
                if !args.dir.is_dir() {
                    return Err(UsageError::NoDumpDir(args.dir).into());
                }
                // The platform the task was recorded on (a bad manifest is
                // reported by the replay itself).
                let platform = scene_harness::observe::args_dump::read_manifest(&args.dir)
                    .ok()
                    .and_then(|m| m.platform.parse().ok());
                let flags = Flags::replay(&args, platform);
                let mut config = resolve(&layout, &env, cache_flag, &flags)?;
                check_config_dirs(&mut config, true).map_err(UsageError::from)?;
                HiCommand::Replay(Box::new(ReplaySetup {
                    config,
                    request: ReplayRequest {
                        dir: args.dir,
                        task: args.task,
                        scene_dir: args.scene,
                    },
                }))
            }
        };
        Ok(HiArgs {
            layout,
            verbosity,
            command,
        })
    }
}

/// `scene report`'s outputs, checked before any report is read.
fn report_setup(args: ReportArgs, env: &Environment) -> Result<ReportSetup, UsageError> {
    let outputs = [
        ("--markdown", &args.markdown),
        ("--junit", &args.junit),
        ("--html", &args.html),
    ];
    let to_stdout: Vec<String> = outputs
        .iter()
        .filter(|(_, p)| p.as_deref().is_some_and(is_stdout))
        .map(|(f, _)| format!("{f} -"))
        .collect();
    if to_stdout.len() > 1 {
        return Err(UsageError::OutputsOnStdout(to_stdout.join(" and ")));
    }
    for (flag, path) in outputs {
        if let Some(path) = path
            && !is_stdout(path)
        {
            check_output_file(flag, path)?;
            check_not_an_input(flag, path, &args.files)?;
        }
    }
    let step_summary = match args.github_summary {
        true => Some(
            env.path("GITHUB_STEP_SUMMARY")
                .ok_or(UsageError::NoStepSummary)?,
        ),
        false => None,
    };
    if let Some(path) = &step_summary {
        check_not_an_input("GITHUB_STEP_SUMMARY", path, &args.files)?;
    }
    Ok(ReportSetup {
        stdout_taken: !to_stdout.is_empty(),
        args,
        step_summary,
    })
}

/// A path flag; empty = not given.
fn given(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.filter(|d| !d.as_os_str().is_empty())
}

/// The workspace root and the scenes: `--root`, else `SCENE_ROOT`, else
/// found from `cwd` or `exe_dir` up, else `built`'s (see
/// [`crate::locate`]); the scenes per [`with_scenes_dir`].
pub(crate) fn layout(
    built: Layout,
    root_flag: Option<PathBuf>,
    scenes_flag: Option<PathBuf>,
    env: &Environment,
    cwd: Option<&Path>,
    exe_dir: Option<&Path>,
) -> Layout {
    let explicit_root = given(root_flag).or_else(|| env.path("SCENE_ROOT"));
    let located = crate::locate::locate(built, explicit_root, cwd, exe_dir);
    with_scenes_dir(located, scenes_flag, env)
}

/// `layout` with its scenes in `--scenes-dir`, else `SCENE_SCENES_DIR`,
/// else where they are.
pub(crate) fn with_scenes_dir(
    layout: Layout,
    scenes_flag: Option<PathBuf>,
    env: &Environment,
) -> Layout {
    Layout {
        scenes_dir: given(scenes_flag)
            .or_else(|| env.path("SCENE_SCENES_DIR"))
            .unwrap_or(layout.scenes_dir),
        ..layout
    }
}

/// `--no-tests`, else `SCENE_NO_TESTS`, else [`NoTests::Fail`].
pub(crate) fn no_tests(env: &Environment, flag: Option<NoTests>) -> Result<NoTests, UsageError> {
    if let Some(f) = flag {
        return Ok(f);
    }
    Ok(env
        .parsed("SCENE_NO_TESTS", str::parse::<NoTests>)?
        .unwrap_or_default())
}

/// The platform table: the built-ins plus `SCENE_PLATFORMS_FILE`, else
/// `<root>/scene-platforms.toml` when it exists.
fn platform_table(env: &Environment, root: &Path) -> Result<PlatformTable, UsageError> {
    Ok(PlatformTable::load(
        root,
        env.path("SCENE_PLATFORMS_FILE").as_deref(),
    )?)
}

/// The platform named by `--platform`, else `SCENE_PLATFORM`, else
/// `a2a3sim`, with `SCENE_CC` / `SCENE_CXX` / `SCENE_LD` / `SCENE_HOSTED_CXX` /
/// `SCENE_HOSTED_FAST_PATHS` applied to its toolchain,
/// `SCENE_PTO_ISA_ROOT`'s `include` added to its include roots (else the
/// `build/pto-isa` of `SCENE_SIMPLER_ROOT`, when it has one),
/// `SCENE_SIMPLER_ROOT` as its checkout of the original, and `PATH` as its
/// tool search path.
pub(crate) fn resolve_platform(
    env: &Environment,
    root: &Path,
    flag: Option<&str>,
) -> Result<Platform, UsageError> {
    let name = match flag {
        Some(f) => f.to_owned(),
        None => env
            .text("SCENE_PLATFORM")?
            .unwrap_or_else(|| "a2a3sim".to_owned()),
    };
    let table = platform_table(env, root)?;
    let mut platform = table.get(&name)?.clone();
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
    if let Some(cxx) = env.path("SCENE_HOSTED_CXX") {
        toolchain.hosted_cxx = cxx;
    }
    if let Some(fast) = env.parsed("SCENE_HOSTED_FAST_PATHS", parse_bool)? {
        toolchain.hosted_fast_paths = fast;
    }
    // Checkouts as absolute paths: compilers run in the scenes root, not
    // where the user stands.
    let simpler = env
        .path("SCENE_SIMPLER_ROOT")
        .map(|dir| SimplerRoot::new(&absolute(&dir)).map_err(UsageError::SimplerRoot))
        .transpose()?;
    let pto = env
        .path("SCENE_PTO_ISA_ROOT")
        .map(|dir| absolute(&dir))
        .or_else(|| simpler.as_ref().and_then(SimplerRoot::managed_pto_isa));
    if let Some(pto) = pto {
        let include = pto.join("include");
        if !include.join("pto").is_dir() {
            return Err(UsageError::PtoIsaRoot(pto));
        }
        toolchain.include_roots.push(include);
    }
    platform.set_simpler_root(simpler);
    Ok(platform)
}

/// The kernel cache directory: `--cache-dir`, else `SCENE_CACHE_DIR`, else
/// `<root>/target/scene-cache`; absolute (compilers run elsewhere and
/// name the cache's generated headers by path).
fn cache_dir_of(env: &Environment, flag: Option<&Path>, root: &Path) -> PathBuf {
    let dir = flag
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| env.path("SCENE_CACHE_DIR"))
        .unwrap_or_else(|| root.join("target").join("scene-cache"));
    absolute(&dir)
}

/// The remote kernel cache tier: `--cache-remote` (standing in for
/// `SCENE_CACHE_REMOTE` in the [`LowArgs`] environment), else
/// `SCENE_CACHE_REMOTE`, else none; `SCENE_CACHE_REMOTE_READONLY`
/// (`1`/`true`/`yes` or `0`/`false`/`no`), `SCENE_CACHE_REMOTE_TIMEOUT`
/// (seconds per remote operation, default 2), and for `s3://` the AWS
/// variables.
fn cache_remote(env: &Environment) -> Result<Option<RemoteConfig>, UsageError> {
    let Some(url) = env.text("SCENE_CACHE_REMOTE")? else {
        return Ok(None);
    };
    check_remote_url(&url).map_err(UsageError::RemoteUrl)?;
    let mut remote = RemoteConfig::new(url);
    remote.read_only = env
        .parsed("SCENE_CACHE_REMOTE_READONLY", parse_bool)?
        .unwrap_or(false);
    if let Some(t) = env.parsed("SCENE_CACHE_REMOTE_TIMEOUT", parse_positive_seconds)? {
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

/// Fraction of physical memory one case's tensors may take by default.
pub const DEFAULT_CASE_MEMORY_FRACTION: u64 = 4;

/// `--max-case-bytes`, else `SCENE_MAX_CASE_BYTES`, else a quarter of
/// physical memory (no bound where that cannot be read); `0` = no bound.
fn max_case_bytes(env: &Environment, flag: Option<u64>) -> Result<Option<u64>, UsageError> {
    let given = match flag {
        Some(b) => Some(b),
        None => env.parsed("SCENE_MAX_CASE_BYTES", parse_bytes)?,
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

/// `--device`, else `SCENE_DEVICES`, else `TASK_DEVICE`, else card `0`.
fn devices(env: &Environment, flag: Option<&DeviceList>) -> Result<DeviceList, UsageError> {
    if let Some(d) = flag {
        return Ok(d.clone());
    }
    Ok(DeviceList::resolve(
        None,
        env.text("SCENE_DEVICES")?.as_deref(),
        env.text("TASK_DEVICE")?.as_deref(),
    )?)
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

/// A directory flag relative to the working directory, made absolute (the
/// engine may run where another directory is current).
fn absolute(d: &Path) -> PathBuf {
    std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf())
}

/// Command line + environment -> the engine's configuration (its card
/// pool before [`EngineConfig::for_cases`]).
pub(crate) fn resolve(
    layout: &Layout,
    env: &Environment,
    cache_dir_flag: Option<&Path>,
    flags: &Flags,
) -> Result<RunConfig, UsageError> {
    let platform = resolve_platform(env, &layout.root, flags.platform.as_deref())?;
    let mut config = RunConfig::new(layout.root.clone(), platform);
    if let Some(include) =
        crate::locate::include_dir(&layout.root, crate::locate::exe_dir().as_deref())
    {
        config.abi_include_dir = include;
    }
    config.cache_dir = Some(cache_dir_of(env, cache_dir_flag, &layout.root));
    config.cache_remote = cache_remote(env)?;
    let compile_workers = match flags.compile_workers {
        Some(n) => Some(n),
        None => env.parsed("SCENE_COMPILE_WORKERS", parse_count)?,
    };
    if let Some(n) = compile_workers {
        config.compile_workers = n;
    }
    let golden_threads = match flags.golden_threads {
        Some(n) => Some(n),
        None => env.parsed("SCENE_GOLDEN_THREADS", parse_threads)?,
    };
    if let Some(n) = golden_threads {
        config.golden_threads = n.get();
    }
    config.max_case_bytes = max_case_bytes(env, flags.max_case_bytes)?;
    // A named interpreter is used as it is whatever the flag or
    // `SCENE_PYTHON_PROVISION` say.
    let provision = match flags.no_provision {
        true => Provision::Never,
        false => env
            .parsed("SCENE_PYTHON_PROVISION", str::parse::<Provision>)?
            .unwrap_or_default(),
    };
    config.python.provision = provision;
    if let Some(python) = env.path("SCENE_PYTHON") {
        config.python.python = python;
        config.python.provision = Provision::Given;
    }
    config.python.uv = find_on_path(env.os("PATH"), "uv");
    if let Some(t) = env.parsed("SCENE_GOLDEN_TIMEOUT", parse_positive_seconds)? {
        config.python.timeout = t;
    }
    config.golden_cache = !(flags.no_golden_cache || env.is_set("SCENE_NO_GOLDEN_CACHE"));
    if let Some(d) = env.path("SCENE_FAILURE_DUMP_DIR") {
        config.dumps.failures = d;
    }
    config.dumps.every_case = flags.dump.as_deref().map(absolute);
    config.rounds = flags.rounds.unwrap_or(1);
    config.warmup = flags.warmup.unwrap_or(0);
    config.trace_dir = flags.trace.as_deref().map(absolute);
    config.dep_graph_dir = flags.dep_graph.as_deref().map(absolute);
    // A bare `--dump-args`: the default directory.
    config.args_dump = flags.dump_args.as_ref().map(|d| match d.is_empty() {
        true => absolute(&layout.root.join("target").join("scene-args")),
        false => absolute(Path::new(d)),
    });
    if flags.uses_cards {
        config.devices = devices(env, flags.devices.as_ref())?;
        config.lock_dir = scene_device::resolve_lock_dir(env.path("SCENE_LOCK_DIR").as_deref());
        config.runtime_lib = given(flags.runtime.clone()).or_else(|| env.path("SCENE_RUNTIME_LIB"));
        config.embedded_runtime = Some(crate::embedded_runtime::SIM_RUNTIME);
        config.runtime_options = env.text("SCENE_RUNTIME_OPTIONS")?.unwrap_or_default();
        if flags.race_check {
            // After the user's options, so the flag wins over a
            // `race_check=0` there.
            config.runtime_options.push_str(";race_check=1");
        }
        config.lock_timeout = flags.lock_timeout;
        if let Some(t) = flags.case_timeout {
            config.case_timeout = (!t.is_zero()).then_some(t);
        }
        if let Some(t) = env.parsed("SCENE_COMM_TIMEOUT", parse_positive_seconds)? {
            config.comm_timeout = Some(t);
        }
        config.verbose = flags.verbose;
        config.hold_card = flags.hold_card;
        if !flags.in_process {
            // This executable serves as its own device worker (see
            // `serve_device_worker`, called first thing by every entry point).
            config.device_worker =
                Some(WorkerCommand::current_exe().map_err(UsageError::NoExecutable)?);
        }
    }
    Ok(config)
}

/// The positional arguments that name test files of the original
/// project (`scene run <checkout>/tests/st/a2a3`), taken out of the case
/// filters.
fn with_test_paths(mut selection: Selection) -> Selection {
    let (paths, filters): (Vec<String>, Vec<String>) = std::mem::take(&mut selection.filters)
        .into_iter()
        .partition(|a| scene_harness::testfiles::is_test_path(a));
    selection.paths = paths.into_iter().map(PathBuf::from).collect();
    selection.filters = filters;
    selection
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::num::NonZeroUsize;
    use std::time::Duration;

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
        scene_util::write_executable(&uv, "#!/bin/sh\n").unwrap();
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

    /// A relative cache directory is the one under the working directory,
    /// named absolutely: compilers run in the scenes root and are given
    /// the cache's generated headers by path (a relative one silently
    /// missed the bf16 shim there, and bf16 kernels computed nonsense).
    #[test]
    fn a_relative_cache_dir_is_made_absolute() {
        let e = env(&[("SCENE_CACHE_DIR", "rel-cache")]);
        let c = resolve(&layout(), &e, None, &cards()).unwrap();
        let here = std::env::current_dir().unwrap();
        assert_eq!(c.cache_dir, Some(here.join("rel-cache")));
        let c = resolve(&layout(), &e, Some(Path::new("flag/cache")), &cards()).unwrap();
        assert_eq!(c.cache_dir, Some(here.join("flag/cache")));
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

    fn hi(argv: &[&str], pairs: &[(&str, &str)]) -> Result<HiArgs, CliError> {
        use clap::Parser;
        let cli = crate::args::Cli::try_parse_from(argv)?;
        let low = LowArgs::new(cli, env(pairs), None, None);
        HiArgs::resolve(low, layout(), &Cancel::default())
    }

    /// What `scene run` used to patch into its configuration after
    /// resolving it (rounds, warmup, trace, dep-graph, args dump, the
    /// pool) is in the resolved configuration itself.
    #[test]
    fn run_flags_are_resolved_into_the_configuration() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_str().unwrap();
        let argv = [
            "scene",
            "--root",
            root,
            "run",
            "--rounds",
            "3",
            "--warmup",
            "1",
            "--trace",
            "traces",
            "--dep-graph",
            "/abs/graphs",
            "--dump-args",
            "--in-process",
        ];
        let resolved = hi(&argv, &[]).unwrap();
        assert_eq!(resolved.layout.root, tmp.path());
        assert_eq!(resolved.layout.scenes_dir, tmp.path().join("tests/scenes"));
        let HiCommand::Run(run) = resolved.command else {
            panic!("not run")
        };
        let c = run.engine.config.for_cases(&[]);
        assert_eq!((c.rounds, c.warmup), (3, 1));
        assert_eq!(c.trace_dir, Some(absolute(Path::new("traces"))));
        assert!(c.trace_dir.as_deref().is_some_and(Path::is_absolute));
        assert_eq!(c.dep_graph_dir, Some(PathBuf::from("/abs/graphs")));
        assert_eq!(c.args_dump, Some(tmp.path().join("target/scene-args")));
        assert_eq!(c.devices.ids(), [0]);
        assert!(run.engine.config.size_pool, "no pool given: sized per case");
        assert_eq!(run.stream, Stream::Stdout);

        let argv = [
            "scene",
            "--root",
            root,
            "run",
            "--dump-args=/d",
            "--junit",
            "-",
        ];
        let resolved = hi(&argv, &[("SCENE_DEVICES", "1-2")]).unwrap();
        let HiCommand::Run(run) = resolved.command else {
            panic!("not run")
        };
        let c = run.engine.config.for_cases(&[]);
        assert_eq!((c.rounds, c.warmup), (1, 0));
        assert_eq!(c.args_dump, Some(PathBuf::from("/d")));
        assert_eq!(c.devices.ids(), [1, 2]);
        assert!(!run.engine.config.size_pool, "SCENE_DEVICES gives the pool");
        assert_eq!(run.stream, Stream::Stderr, "stdout carries the JUnit");
    }

    #[test]
    fn root_and_scenes_dir_flags_win_over_variables() {
        let e = env(&[
            ("SCENE_ROOT", "/env-root"),
            ("SCENE_SCENES_DIR", "/env-scenes"),
        ]);
        let l = super::layout(layout(), None, None, &e, None, None);
        assert_eq!(l.root, PathBuf::from("/env-root"));
        assert_eq!(l.scenes_dir, PathBuf::from("/env-scenes"));
        let l = super::layout(
            layout(),
            Some("/flag-root".into()),
            Some("/flag-scenes".into()),
            &e,
            None,
            None,
        );
        assert_eq!(l.root, PathBuf::from("/flag-root"));
        assert_eq!(l.scenes_dir, PathBuf::from("/flag-scenes"));
        // Empty flags are unset.
        let l = super::layout(layout(), Some("".into()), Some("".into()), &e, None, None);
        assert_eq!(l.root, PathBuf::from("/env-root"));
        let l = super::layout(layout(), None, None, &env(&[]), None, None);
        assert_eq!(l.root, PathBuf::from("/ws"), "the built layout");
    }

    #[test]
    fn usage_errors_exit_2_before_any_work() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_str().unwrap();
        let code = |argv: &[&str], pairs: &[(&str, &str)]| match hi(argv, pairs) {
            Ok(_) => 0,
            Err(e) => e.exit_code(),
        };
        assert_eq!(code(&["scene", "--root", root, "compile"], &[]), 0);
        assert_eq!(
            code(&["scene", "run", "--report-json", "-", "--junit", "-"], &[]),
            2
        );
        assert_eq!(
            code(
                &["scene", "--root", root, "compile"],
                &[("SCENE_COMPILE_WORKERS", "0")]
            ),
            2
        );
        assert_eq!(
            code(
                &["scene", "--root", root, "run", "--in-process"],
                &[("SCENE_COMM_TIMEOUT", "0")]
            ),
            2
        );
        assert_eq!(
            code(
                &["scene", "--root", root, "list"],
                &[("SCENE_PLATFORM", "a9")]
            ),
            2
        );
        assert_eq!(code(&["scene", "run", "--rounds", "0"], &[]), 2);
        // Issue 27, cause 9: a usage error, not a 68 GB allocation.
        let huge = ["scene", "run", "--rounds", "2", "--warmup", "4294967295"];
        assert_eq!(code(&huge, &[]), 2);
        assert_eq!(code(&["scene", "run", "--rounds", "10001"], &[]), 2);
        assert_eq!(code(&["scene", "--help"], &[]), 0);
        assert_eq!(
            code(&["scene", "report", "--github-summary", "r.json"], &[]),
            2
        );
    }
}
