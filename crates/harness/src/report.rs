//! What a run produced: one [`CaseReport`] per case and a [`RunReport`]
//! summary, serialisable as the `--report-json` contract.
//!
//! Field names here are a contract with users' CI scripts: add fields, never
//! rename them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::lexical;

/// The `--report-json` schema this `scene` writes (`schema`) and reads
/// (`scene report`). Reports written before the field existed have none
/// and are refused by the reader.
pub const REPORT_SCHEMA: u32 = 1;

use crate::compare::OutputReport;

/// Outcome of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Passed,
    Failed,
}

/// Which stage a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureStage {
    /// The scene's `scene.toml` did not load (the entry is `<scene>::load`).
    Load,
    Compile,
    Fixtures,
    Golden,
    Device,
    Compare,
}

impl std::fmt::Display for FailureStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailureStage::Load => "load",
            FailureStage::Compile => "compile",
            FailureStage::Fixtures => "fixtures",
            FailureStage::Golden => "golden",
            FailureStage::Device => "device",
            FailureStage::Compare => "compare",
        })
    }
}

impl FailureStage {
    /// What the case was doing, for a sentence: `failed compiling`,
    /// `failed building input fixtures`, `failed computing the golden`.
    pub fn doing(&self) -> &'static str {
        match self {
            FailureStage::Load => "loading its scene.toml",
            FailureStage::Compile => "compiling",
            FailureStage::Fixtures => "building input fixtures",
            FailureStage::Golden => "computing the golden",
            FailureStage::Device => "on the device",
            FailureStage::Compare => "comparing outputs",
        }
    }
}

/// Why a case failed, typed. Reports carry its [`FailureStage`] and its
/// text (`failure_stage`, `message`: the JSON contract); code that needs
/// more than the text matches on this.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CaseFailure {
    /// The scene's `scene.toml` did not load.
    #[error("{0}")]
    Load(String),
    #[error("{0}")]
    Compile(String),
    /// The case's tensors need more bytes than the per-case bound; `bytes`
    /// is `None` when the sum does not even fit a `u64`.
    #[error(
        "the case's tensors need {} bytes, more than the bound of {bound} bytes per case",
        bytes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
    )]
    TooLarge { bytes: Option<u64>, bound: u64 },
    /// The case's tensors cannot fit the device memory it would run with
    /// (`device_memory`): failed before fixtures, golden or card.
    #[error("{0}")]
    DeviceMemory(#[from] crate::device_memory::DeviceMemoryError),
    #[error("{0}")]
    Fixtures(String),
    #[error("{0}")]
    Golden(String),
    #[error("{0}")]
    Device(String),
    #[error("{0}")]
    Compare(String),
}

impl CaseFailure {
    /// A failure known only by its stage and text.
    pub fn from_stage(stage: FailureStage, message: String) -> Self {
        match stage {
            FailureStage::Load => Self::Load(message),
            FailureStage::Compile => Self::Compile(message),
            FailureStage::Fixtures => Self::Fixtures(message),
            FailureStage::Golden => Self::Golden(message),
            FailureStage::Device => Self::Device(message),
            FailureStage::Compare => Self::Compare(message),
        }
    }

    /// The stage the failure is reported under.
    pub fn stage(&self) -> FailureStage {
        match self {
            Self::Load(_) => FailureStage::Load,
            Self::Compile(_) => FailureStage::Compile,
            Self::TooLarge { .. } | Self::DeviceMemory(_) | Self::Fixtures(_) => {
                FailureStage::Fixtures
            }
            Self::Golden(_) => FailureStage::Golden,
            Self::Device(_) => FailureStage::Device,
            Self::Compare(_) => FailureStage::Compare,
        }
    }
}

/// Seconds spent in each phase of one case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Phases {
    pub compile_s: f64,
    pub fixtures_s: f64,
    pub golden_s: f64,
    /// Waiting for the card lock.
    pub lock_wait_s: f64,
    /// From acquiring the card to releasing it.
    pub lock_held_s: f64,
    /// The device session's card time: from handing the case to the
    /// card's worker to its reply (upload of tensors and the callable's
    /// images, run, download, the reset after it), less `runtime_open_s`.
    pub device_s: f64,
    /// The part of `device_s` the session measured itself (register,
    /// upload, run, download, free); the rest is the worker protocol and
    /// the device reset.
    pub session_s: f64,
    /// The part of `lock_held_s` spent loading the runtime and opening the
    /// card(s) for this case: a worker pays it on its first case on a card
    /// (0 when the card was open already); in-process, every case.
    pub runtime_open_s: f64,
    pub compare_s: f64,
}

/// When the card lock was held (Unix seconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockInterval {
    pub acquired_at: f64,
    pub released_at: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseReport {
    /// `scene::case`.
    pub name: String,
    pub scene: String,
    pub case: String,
    pub status: CaseStatus,
    #[serde(default)]
    pub devices: Vec<u32>,
    #[serde(default)]
    pub phases: Phases,
    #[serde(default)]
    pub lock: Option<LockInterval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_stage: Option<FailureStage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The failure, typed (`failure_stage` and `message` are its stage and
    /// text); not serialised.
    #[serde(skip)]
    pub failure: Option<CaseFailure>,
    /// Wall time of the case from its first stage to its verdict.
    #[serde(default)]
    pub wall_s: f64,
    /// Every output, in declaration order, with the comparison that judged
    /// it and its verdict (`pass`, `fail`, `skipped`); empty when the case
    /// failed before the compare stage.
    #[serde(default)]
    pub outputs: Vec<OutputReport>,
    /// Level 3: each rank's device time (its run, concurrent with the
    /// others'), in rank order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankTime>,
    /// Level 3: card-seconds the group held (`lock_held_s` x its cards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_seconds: Option<f64>,
    /// Level-3 `[[steps]]`: each step that ran, in order, with its time
    /// and the card time it held (0 for a host step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepTime>,
    /// Devices opened for this case (its `phases.runtime_open_s`): one per
    /// card when its worker opened them, 0 when they were open already.
    #[serde(default)]
    pub runtime_opens: u32,
    /// What this case's user code left in its device worker's process (a
    /// thread still running, a signal handler, an environment variable
    /// set, a file left open). The worker was replaced after the case, so
    /// no later case inherits it; absent when the case left nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_residue: Option<String>,
    /// The golden came from the golden cache (nothing was computed).
    #[serde(default)]
    pub golden_cached: bool,
    /// Why the golden was computed instead of read from the golden cache
    /// (absent when it was read, or not needed: a bundle slot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub golden_miss: Option<String>,
    /// The golden was computed in this run (counted in
    /// `totals.goldens_computed`); not serialised.
    #[serde(skip)]
    pub golden_computed: bool,
    /// `--rounds N [--warmup K]`: the per-round device times of the
    /// measured rounds (absent for an ordinary one-round run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundsReport>,
    /// `--trace DIR`: the case's trace-event JSON file (Chrome/Perfetto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// `--dep-graph DIR`: the case's task graph as Graphviz DOT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dep_graph: Option<String>,
    /// `--dump-args`: the directory of the case's recorded task arguments
    /// (what `scene replay DIR TASK` reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_dump: Option<String>,
    /// The directory of the case's tensor dump (`inputs/`, `outputs/`,
    /// `golden/` `.npy` files and `meta.json`; see
    /// [`crate::observe::dump`]) when one was written: a failing case's
    /// (under `SCENE_FAILURE_DUMP_DIR`, default `target/scene-dumps`), or
    /// every case's with `--dump DIR`. Absolute (a relative dump root is
    /// taken against the run's working directory); absent when no dump was
    /// written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump: Option<String>,
}

/// The benchmark rounds of one case: `n` measured rounds after `warmup`
/// unreported ones, all in one session on one card hold.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RoundsReport {
    pub n: u32,
    pub warmup: u32,
    /// Statistics over the measured rounds that ran (fewer than `n` when
    /// the session failed part way).
    pub device_s: RoundStats,
    /// Each measured round's device time, in order.
    #[serde(default)]
    pub per_round_s: Vec<f64>,
    /// The warmup rounds (1-based) whose outputs did not match the
    /// golden; every round is judged, not only up to the first failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_warmup: Vec<u32>,
    /// The measured rounds (1-based) whose outputs did not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<u32>,
}

/// Minimum, median and maximum of per-round seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RoundStats {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl RoundStats {
    /// The statistics of `times` (all zero when empty); the median of an
    /// even count is the mean of the middle two.
    pub fn of(times: &[f64]) -> Self {
        let mut t: Vec<f64> = times.iter().copied().filter(|x| x.is_finite()).collect();
        if t.is_empty() {
            return Self::default();
        }
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        };
        Self {
            min: t[0],
            median,
            max: t[n - 1],
        }
    }
}

/// One rank's device time in a level-3 case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RankTime {
    pub rank: usize,
    pub device_s: f64,
}

/// One step of a level-3 case's `[[steps]]` (`crate::steps`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StepTime {
    /// Its index in `[[steps]]`.
    pub step: usize,
    /// `chip step `f``, `host step `f` (host.c)`, ...
    pub kind: String,
    /// The earlier steps it depends on through its tensors (what
    /// simpler's TensorMap would wait for).
    pub after: Vec<usize>,
    /// Wall time of the step (a chip step's includes its card wait).
    pub seconds: f64,
    /// Card time it held: its `lock_held_s` share (0 for a host step).
    pub lock_held_s: f64,
}

/// Records a level-3 case's per-rank device times and the group's
/// card-seconds (after the release, so `lock_held_s` is final).
pub fn record_group(report: &mut CaseReport, ranks: &[std::time::Duration]) {
    report.ranks = ranks
        .iter()
        .enumerate()
        .map(|(rank, t)| RankTime {
            rank,
            device_s: t.as_secs_f64(),
        })
        .collect();
    report.card_seconds = Some(report.phases.lock_held_s * report.devices.len().max(1) as f64);
}

impl CaseReport {
    pub fn new(scene: &str, case: &str) -> Self {
        Self {
            name: format!("{scene}::{case}"),
            scene: scene.to_string(),
            case: case.to_string(),
            status: CaseStatus::Passed,
            devices: Vec::new(),
            phases: Phases::default(),
            lock: None,
            failure_stage: None,
            message: None,
            failure: None,
            wall_s: 0.0,
            outputs: Vec::new(),
            ranks: Vec::new(),
            card_seconds: None,
            steps: Vec::new(),
            golden_cached: false,
            runtime_opens: 0,
            worker_residue: None,
            golden_miss: None,
            golden_computed: false,
            rounds: None,
            trace: None,
            dep_graph: None,
            args_dump: None,
            dump: None,
        }
    }

    /// The entry of a scene whose `scene.toml` did not load: `<scene>::load`,
    /// failed in the `load` stage with the loader's message.
    pub fn load_failure(scene: &str, message: impl Into<String>) -> Self {
        let mut r = Self::new(scene, "load");
        r.fail_with(CaseFailure::Load(message.into()));
        r
    }

    /// Fails the case in `stage` with `message` (a [`CaseFailure`] of that
    /// stage).
    pub fn fail(&mut self, stage: FailureStage, message: impl Into<String>) {
        self.fail_with(CaseFailure::from_stage(stage, message.into()));
    }

    /// Fails the case with a typed failure; its stage and text become
    /// `failure_stage` and `message`.
    pub fn fail_with(&mut self, failure: CaseFailure) {
        self.status = CaseStatus::Failed;
        self.failure_stage = Some(failure.stage());
        self.message = Some(failure.to_string());
        self.failure = Some(failure);
    }
}

/// Totals over a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunTotals {
    pub passed: usize,
    pub failed: usize,
    /// Always 0 today (no case is skipped once selected); kept in the
    /// report contract.
    pub skipped: usize,
    /// Sum of `lock_held_s`: card-seconds claimed.
    pub card_seconds_held: f64,
    /// Sum of `device_s`: card-seconds of device work.
    pub device_seconds: f64,
    /// Devices opened over the run (a worker opens its card(s) once,
    /// plus once more after a crash replaced it), and the card-seconds
    /// those opens took (sum of `runtime_open_s`, within
    /// `card_seconds_held`, not in `device_seconds`).
    pub runtime_opens: u64,
    pub runtime_open_s: f64,
    /// `card_seconds_held / device_seconds` (1.0 is perfect; 0 when no device work).
    pub held_to_device_ratio: f64,
    /// Sum of `lock_wait_s`.
    pub queueing_seconds: f64,
    pub wall_s: f64,
    /// Sum of `compile_s`: seconds of compiler work charged to the cases.
    pub compile_seconds: f64,
    /// Compile units (one orchestration or incore kernel) the run needed,
    /// by outcome: served from the kernel cache or an earlier build of the
    /// run (`units_cached`), compiled (`units_compiled`: a compiler ran),
    /// failed. All 0 when every case came from a bundle slot.
    pub units_cached: usize,
    pub units_compiled: usize,
    pub units_failed: usize,
    /// Goldens computed in this run (not read from the golden cache nor
    /// from a bundle): 0 on a warm run.
    #[serde(default)]
    pub goldens_computed: usize,
}

/// What the compile stage of a run did, by unit outcome (see
/// [`RunTotals::units_cached`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitCounts {
    pub cached: usize,
    pub compiled: usize,
    pub failed: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    /// [`REPORT_SCHEMA`].
    pub schema: u32,
    pub platform: String,
    pub cases: Vec<CaseReport>,
    pub totals: RunTotals,
    /// When the run started (Unix seconds): the report's end less `wall_s`.
    pub started_at: f64,
    /// Compile units this run took from the remote kernel cache tier
    /// (verified, then copied into the local cache); 0 without a remote.
    #[serde(default)]
    pub remote_hits: u64,
    /// Compile units this run compiled after the remote tier had no
    /// usable entry for them.
    #[serde(default)]
    pub remote_misses: u64,
    /// The absolute directory of the `--report-json` file this report was
    /// written to (absent when it went to stdout, or was written by an
    /// older `scene`). With it a reader of a moved report finds the
    /// artifacts that were written under that directory (dumps, traces
    /// uploaded with the report): they moved with it. See
    /// `scene report` ([`RunReport::artifact_path`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_dir: Option<String>,
    /// The absolute working directory of the run: relative artifact paths
    /// in the report are relative to it (absent in reports of an older
    /// `scene`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
}

impl RunReport {
    pub fn new(platform: &str, cases: Vec<CaseReport>, wall_s: f64) -> Self {
        let mut t = RunTotals {
            wall_s,
            ..RunTotals::default()
        };
        for c in &cases {
            match c.status {
                CaseStatus::Passed => t.passed += 1,
                CaseStatus::Failed => t.failed += 1,
            }
            t.card_seconds_held += c.phases.lock_held_s * c.devices.len().max(1) as f64;
            t.device_seconds += c.phases.device_s * c.devices.len().max(1) as f64;
            t.runtime_opens += u64::from(c.runtime_opens);
            t.runtime_open_s += c.phases.runtime_open_s;
            t.queueing_seconds += c.phases.lock_wait_s;
            t.compile_seconds += c.phases.compile_s;
            t.goldens_computed += usize::from(c.golden_computed);
        }
        t.held_to_device_ratio = if t.device_seconds > 0.0 {
            t.card_seconds_held / t.device_seconds
        } else {
            0.0
        };
        Self {
            schema: REPORT_SCHEMA,
            platform: platform.to_string(),
            cases,
            totals: t,
            started_at: unix_seconds(std::time::SystemTime::now()) - wall_s,
            remote_hits: 0,
            remote_misses: 0,
            report_dir: None,
            working_dir: None,
        }
    }

    /// The report with `first` (e.g. scenes that did not load) ahead of its
    /// cases, totals recomputed: entries and totals always agree.
    pub fn with_cases_before(self, mut first: Vec<CaseReport>) -> Self {
        if first.is_empty() {
            return self;
        }
        let units = self.unit_counts();
        first.extend(self.cases);
        Self {
            started_at: self.started_at,
            remote_hits: self.remote_hits,
            remote_misses: self.remote_misses,
            report_dir: self.report_dir,
            working_dir: self.working_dir,
            ..Self::new(&self.platform, first, self.totals.wall_s)
        }
        .with_unit_counts(units)
    }

    /// The report with `n` goldens computed (read-back case reports do not
    /// carry what was computed, their runs' totals do).
    fn with_goldens_computed(mut self, n: usize) -> Self {
        self.totals.goldens_computed = n;
        self
    }

    /// The report with the compile stage's unit counts in its totals.
    pub fn with_unit_counts(mut self, units: UnitCounts) -> Self {
        self.totals.units_cached = units.cached;
        self.totals.units_compiled = units.compiled;
        self.totals.units_failed = units.failed;
        self
    }

    /// The compile stage's unit counts, from the totals.
    pub fn unit_counts(&self) -> UnitCounts {
        UnitCounts {
            cached: self.totals.units_cached,
            compiled: self.totals.units_compiled,
            failed: self.totals.units_failed,
        }
    }

    /// Reads a `--report-json` file's bytes. Refuses a report without a
    /// `schema` (written before schema 1) or with another schema than
    /// [`REPORT_SCHEMA`], and one that is not a report at all. Each
    /// case's typed `failure` is rebuilt from its stage and message.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ReportReadError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| ReportReadError::Json(e.to_string()))?;
        let Some(object) = value.as_object() else {
            return Err(ReportReadError::NotAReport(
                "it is not a JSON object".into(),
            ));
        };
        match object.get("schema") {
            None if object.contains_key("cases") && object.contains_key("totals") => {
                return Err(ReportReadError::NoSchema);
            }
            None => {
                return Err(ReportReadError::NotAReport(
                    "it has no `schema`, `cases` or `totals`".into(),
                ));
            }
            Some(v) if v.as_u64() != Some(u64::from(REPORT_SCHEMA)) => {
                return Err(ReportReadError::Schema(v.to_string()));
            }
            Some(_) => {}
        }
        let mut report: RunReport =
            serde_json::from_value(value).map_err(|e| ReportReadError::Json(e.to_string()))?;
        for c in &mut report.cases {
            if let (Some(stage), Some(message)) = (c.failure_stage, &c.message) {
                c.failure = Some(CaseFailure::from_stage(stage, message.clone()));
            }
        }
        Ok(report)
    }

    /// The closing line every runner parses: `N passed, M failed[, K skipped]`.
    pub fn summary_line(&self) -> String {
        let t = &self.totals;
        if t.skipped > 0 {
            format!(
                "{} passed, {} failed, {} skipped",
                t.passed, t.failed, t.skipped
            )
        } else {
            format!("{} passed, {} failed", t.passed, t.failed)
        }
    }

    pub fn all_passed(&self) -> bool {
        self.totals.failed == 0
    }
}

/// Where a report file is being read from now, for
/// [`RunReport::artifact_path`].
#[derive(Clone, Copy, Debug)]
pub struct ReadAt<'a> {
    /// The absolute directory the report file is in now.
    pub dir: &'a Path,
    /// Whether that is another place than the report's recorded
    /// `report_dir` (the report was moved or copied, to another machine
    /// perhaps); `false` when the report records none.
    pub moved: bool,
    /// The directory relative artifact paths are taken against when the
    /// report records no `working_dir` (the reader's working directory).
    pub cwd: &'a Path,
}

/// An artifact path of a report ([`RunReport::artifact_path`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactPath {
    /// The path as the run wrote it, absolute: a relative one taken
    /// against the run's `working_dir` (or, without one, the reader's).
    pub recorded: PathBuf,
    /// When the report moved and `recorded` lies under its recorded
    /// `report_dir`: the same place under the directory the report is in
    /// now (the artifact moved with it).
    pub moved_to: Option<PathBuf>,
}

impl RunReport {
    /// Where an artifact path of this report (a case's `trace`,
    /// `dep_graph`, `args_dump` or `dump`) is, the report being read at
    /// `at`. Exact, no search: a path under the `report_dir` the run
    /// recorded is rebased onto the report's directory now, any other path
    /// stays as the run recorded it. A report without `report_dir` (an
    /// older `scene`, or one written to stdout) is never rebased.
    pub fn artifact_path(&self, path: &str, at: &ReadAt<'_>) -> ArtifactPath {
        let p = Path::new(path);
        let recorded = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match &self.working_dir {
                Some(w) => Path::new(w).join(p),
                None => at.cwd.join(p),
            }
        };
        let moved_to = match (&self.report_dir, at.moved) {
            (Some(dir), true) => lexical(&recorded)
                .strip_prefix(lexical(Path::new(dir)))
                .ok()
                .map(|rel| at.dir.join(rel)),
            _ => None,
        };
        ArtifactPath { recorded, moved_to }
    }
}

/// Why a `--report-json` file could not be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportReadError {
    #[error("not valid report JSON: {0}")]
    Json(String),
    #[error("not a `scene run --report-json` report: {0}")]
    NotAReport(String),
    #[error(
        "report has no `schema` field: written by an older `scene` (before report schema {REPORT_SCHEMA}); re-run it with this one"
    )]
    NoSchema,
    #[error("report schema {0} is not the one this `scene` reads ({REPORT_SCHEMA})")]
    Schema(String),
}

/// Seconds since the Unix epoch of a `SystemTime`, as a float.
pub fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl RunReport {
    /// JUnit XML, as cargo-nextest writes it (with its `quick-junit`): one
    /// `<testsuites>` and one `<testsuite name="scenes.<platform>">` with
    /// counts (`tests`, `failures`, `errors`), `time` and the start
    /// `timestamp`, the run's summary as the suite's `<system-out>`; one
    /// `<testcase>` per case (classname = scene, name = case, `time`), its
    /// phases as its `<system-out>`. A case that could not be built (its
    /// `scene.toml` did not load, or it did not compile) is an `<error>`;
    /// any later stage that failed is a `<failure>`. Both carry the stage as
    /// `type`, the first line of the message as `message` and the whole
    /// message as text.
    pub fn to_junit(&self) -> String {
        junit_of(std::slice::from_ref(self))
    }

    /// This report's `<testsuite>` (see [`RunReport::to_junit`]).
    fn junit_suite(&self) -> quick_junit::TestSuite {
        use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
        let t = &self.totals;
        let time = std::time::Duration::try_from_secs_f64(t.wall_s).unwrap_or_default();
        let started = timestamp(self.started_at);
        let mut suite = TestSuite::new(xml_text(&format!("scenes.{}", self.platform)));
        suite.set_time(time);
        if let Some(ts) = started {
            suite.set_timestamp(ts);
        }
        suite.set_system_out(xml_text(&format!(
            "cards: {:.3} card-s held for {:.3} s of device work; {:.3} s queued\n{}\n",
            t.card_seconds_held,
            t.device_seconds,
            t.queueing_seconds,
            self.summary_line()
        )));
        for c in &self.cases {
            let status = match c.status {
                CaseStatus::Passed => TestCaseStatus::success(),
                CaseStatus::Failed => {
                    let kind = match c.failure_stage {
                        Some(FailureStage::Load | FailureStage::Compile) => NonSuccessKind::Error,
                        _ => NonSuccessKind::Failure,
                    };
                    let msg = c.message.as_deref().unwrap_or("failed");
                    let mut status = TestCaseStatus::non_success(kind);
                    status
                        .set_message(xml_text(msg.lines().next().unwrap_or("failed")))
                        .set_description(xml_text(msg));
                    if let Some(stage) = c.failure_stage {
                        status.set_type(stage.to_string());
                    }
                    status
                }
            };
            let mut case = TestCase::new(xml_text(&c.case), status);
            case.set_classname(xml_text(&c.scene))
                .set_time(std::time::Duration::try_from_secs_f64(c.wall_s).unwrap_or_default());
            let p = &c.phases;
            let mut out = format!(
                "compile_s={:.3} fixtures_s={:.3} golden_s={:.3} lock_wait_s={:.3} \
                 lock_held_s={:.3} device_s={:.3} session_s={:.3} compare_s={:.3}\n",
                p.compile_s,
                p.fixtures_s,
                p.golden_s,
                p.lock_wait_s,
                p.lock_held_s,
                p.device_s,
                p.session_s,
                p.compare_s
            );
            for o in &c.outputs {
                out.push_str(&format!(
                    "output {}: {} {}\n",
                    o.name, o.comparison, o.verdict
                ));
            }
            case.set_system_out(xml_text(&out));
            suite.add_test_case(case);
        }
        suite
    }

    /// Merges reports of one suite split across runners (`--partition`)
    /// into one report per platform, in the order platforms first appear:
    /// cases concatenated, totals recomputed from them (so they are the
    /// sums of the parts), compile unit counts summed, `started_at` the
    /// earliest start and `wall_s` from it to the latest end.
    pub fn merge(reports: &[RunReport]) -> Vec<RunReport> {
        let mut platforms: Vec<&str> = Vec::new();
        for r in reports {
            if !platforms.contains(&r.platform.as_str()) {
                platforms.push(&r.platform);
            }
        }
        platforms
            .into_iter()
            .map(|platform| {
                let parts: Vec<&RunReport> =
                    reports.iter().filter(|r| r.platform == platform).collect();
                let started_at = parts
                    .iter()
                    .map(|r| r.started_at)
                    .fold(f64::INFINITY, f64::min);
                let ended_at = parts
                    .iter()
                    .map(|r| r.started_at + r.totals.wall_s)
                    .fold(f64::NEG_INFINITY, f64::max);
                let cases = parts.iter().flat_map(|r| r.cases.iter().cloned()).collect();
                let units = parts.iter().fold(UnitCounts::default(), |u, r| UnitCounts {
                    cached: u.cached + r.totals.units_cached,
                    compiled: u.compiled + r.totals.units_compiled,
                    failed: u.failed + r.totals.units_failed,
                });
                Self {
                    started_at,
                    remote_hits: parts.iter().map(|r| r.remote_hits).sum(),
                    remote_misses: parts.iter().map(|r| r.remote_misses).sum(),
                    ..Self::new(platform, cases, (ended_at - started_at).max(0.0))
                }
                .with_unit_counts(units)
                .with_goldens_computed(parts.iter().map(|r| r.totals.goldens_computed).sum())
            })
            .collect()
    }
}

/// JUnit XML of `reports` as one `<testsuites>` (named `scenes`) with one
/// `<testsuite>` per report ([`RunReport::to_junit`] for one): counts,
/// `time` from the earliest start to the latest end, and that start's
/// `timestamp`.
pub fn junit_of(reports: &[RunReport]) -> String {
    use quick_junit::Report;
    let started_at = reports
        .iter()
        .map(|r| r.started_at)
        .fold(f64::INFINITY, f64::min);
    let ended_at = reports
        .iter()
        .map(|r| r.started_at + r.totals.wall_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut report = Report::new("scenes");
    if started_at.is_finite() && ended_at.is_finite() {
        report.set_time(
            std::time::Duration::try_from_secs_f64((ended_at - started_at).max(0.0))
                .unwrap_or_default(),
        );
        if let Some(ts) = timestamp(started_at) {
            report.set_timestamp(ts);
        }
    }
    for r in reports {
        report.add_test_suite(r.junit_suite());
    }
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- JUnit serialisation failed: {e} -->\n"))
}

/// Unix seconds as the timestamp JUnit wants (UTC), if representable.
fn timestamp(unix: f64) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    if !(unix.is_finite() && unix >= 0.0) {
        return None;
    }
    let secs = unix.trunc() as i64;
    let nanos = ((unix - unix.trunc()) * 1e9) as u32;
    chrono::DateTime::from_timestamp(secs, nanos.min(999_999_999)).map(|t| t.fixed_offset())
}

/// Every character XML 1.0 forbids (its `Char` production: C0 controls
/// but tab, LF and CR, and U+FFFE / U+FFFF; surrogates cannot occur in a
/// `str`), even escaped as `&#...;`, becomes `?`: one such character in a
/// failure message or a case name made the whole file unparseable, so CI
/// showed no results at all. quick-junit escapes the rest.
fn xml_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            let forbidden = ((c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t'))
                || matches!(c, '\u{FFFE}' | '\u{FFFF}');
            if forbidden { '?' } else { c }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_stats_take_min_median_max() {
        assert_eq!(RoundStats::of(&[]), RoundStats::default());
        let s = RoundStats::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        let s = RoundStats::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 4.0));
    }

    #[test]
    fn outputs_say_which_comparison_judged_them() {
        use crate::compare::Verdict;
        let mut c = CaseReport::new("s", "c");
        c.outputs = vec![
            OutputReport {
                name: "y".into(),
                comparison: "exact".into(),
                verdict: Verdict::Pass,
                detail: None,
            },
            OutputReport {
                name: "z".into(),
                comparison: "cosine(min=0.9)".into(),
                verdict: Verdict::Fail,
                detail: Some("cosine similarity 0.5 < min 0.9".into()),
            },
        ];
        let fresh = CaseReport::new("s", "d");
        let r = RunReport::new("a2a3sim", vec![c, fresh], 1.0);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["cases"][0]["outputs"],
            serde_json::json!([
                { "name": "y", "comparison": "exact", "verdict": "pass" },
                { "name": "z", "comparison": "cosine(min=0.9)", "verdict": "fail",
                  "detail": "cosine similarity 0.5 < min 0.9" },
            ])
        );
        assert_eq!(json["cases"][1]["outputs"], serde_json::json!([]));
        let x = r.to_junit();
        assert!(
            x.contains("output y: exact pass\noutput z: cosine(min=0.9) fail"),
            "{x}"
        );
    }

    #[test]
    fn junit_escapes_and_counts() {
        let mut failed = CaseReport::new("s", "c<1>");
        failed.fail(FailureStage::Compare, "tensor `f` & \"more\"\nline 2\u{1}");
        let passed = CaseReport::new("s", "ok");
        let r = RunReport::new("a2a3sim", vec![failed, passed], 1.0);
        let x = r.to_junit();
        assert!(x.contains("tests=\"2\""), "{x}");
        assert!(x.contains("failures=\"1\""), "{x}");
        assert!(x.contains("errors=\"0\""), "{x}");
        assert!(x.contains("name=\"c&lt;1&gt;\""), "{x}");
        assert!(
            x.contains("<failure message=\"tensor `f` &amp; &quot;more&quot;\" type=\"compare\">"),
            "{x}"
        );
        assert!(x.contains("line 2?</failure>"), "{x}");
        assert!(!x.contains('\u{1}'), "{x}");
        assert!(x.contains("<testcase name=\"ok\" classname=\"s\""), "{x}");
        assert!(x.contains("<system-out>compile_s=0.000 "), "{x}");
        assert!(x.contains("1 passed, 1 failed\n</system-out>"), "{x}");
        // Both the run and the suite carry the start time, in RFC 3339.
        assert_eq!(x.matches(" timestamp=\"20").count(), 2, "{x}");
        assert_eq!(r.summary_line(), "1 passed, 1 failed");
    }

    /// Issue 27, cause 10: U+FFFE / U+FFFF (and C0 controls) in a failure
    /// message, a case or a scene name made the JUnit file unparseable.
    #[test]
    fn junit_with_xml_forbidden_characters_still_parses() {
        let bad = "a\u{FFFE}b\u{FFFF}c\u{0}d\u{1b}e\u{7}";
        let mut failed = CaseReport::new(&format!("s{bad}"), &format!("c{bad}"));
        failed.fail(FailureStage::Compare, format!("first {bad}\nsecond {bad}"));
        let r = RunReport::new("a2a3sim", vec![failed], 1.0);
        for x in [r.to_junit(), junit_of(&[r.clone(), r.clone()])] {
            let doc = roxmltree::Document::parse(&x).unwrap_or_else(|e| panic!("{e}\n{x}"));
            let failure = doc
                .descendants()
                .find(|n| n.has_tag_name("failure"))
                .expect("a <failure>");
            assert_eq!(failure.attribute("message"), Some("first a?b?c?d?e?"));
            assert_eq!(failure.text(), Some("first a?b?c?d?e?\nsecond a?b?c?d?e?"));
            let case = doc
                .descendants()
                .find(|n| n.has_tag_name("testcase"))
                .expect("a <testcase>");
            assert_eq!(case.attribute("name"), Some("ca?b?c?d?e?"));
            assert_eq!(case.attribute("classname"), Some("sa?b?c?d?e?"));
        }
    }

    #[test]
    fn junit_compile_and_load_failures_are_errors() {
        let mut compile = CaseReport::new("s", "c");
        compile.fail(FailureStage::Compile, "add.c:1: error");
        let mut device = CaseReport::new("s", "d");
        device.fail(FailureStage::Device, "card 0 hung");
        let r = RunReport::new("a2a3sim", vec![compile, device], 1.0)
            .with_cases_before(vec![CaseReport::load_failure("bad", "oops")]);
        let x = r.to_junit();
        assert!(x.contains("failures=\"1\""), "{x}");
        assert!(x.contains("errors=\"2\""), "{x}");
        assert!(
            x.contains("<error message=\"add.c:1: error\" type=\"compile\">"),
            "{x}"
        );
        assert!(x.contains("<error message=\"oops\" type=\"load\">"), "{x}");
        assert!(
            x.contains("<failure message=\"card 0 hung\" type=\"device\">"),
            "{x}"
        );
    }

    #[test]
    fn load_failures_are_entries_and_count() {
        let r = RunReport::new("a2a3sim", vec![CaseReport::new("s", "ok")], 2.0);
        let r = r.with_cases_before(vec![CaseReport::load_failure(
            "bad",
            "bad/scene.toml: oops",
        )]);
        assert_eq!(r.cases.len(), 2);
        assert_eq!(r.cases[0].name, "bad::load");
        assert_eq!(r.cases[0].failure_stage, Some(FailureStage::Load));
        assert_eq!(
            r.cases[0].failure,
            Some(CaseFailure::Load("bad/scene.toml: oops".into()))
        );
        assert_eq!((r.totals.passed, r.totals.failed), (1, 1));
        assert_eq!(r.totals.wall_s, 2.0);
        let x = r.to_junit();
        assert!(x.contains("tests=\"2\""), "{x}");
        assert!(x.contains("errors=\"1\""), "{x}");
        assert!(
            x.contains("<error message=\"bad/scene.toml: oops\" type=\"load\">"),
            "{x}"
        );
    }

    #[test]
    fn typed_failures_fill_stage_and_message() {
        let mut r = CaseReport::new("s", "c");
        r.fail_with(CaseFailure::TooLarge {
            bytes: Some(4096),
            bound: 1024,
        });
        assert_eq!(r.status, CaseStatus::Failed);
        assert_eq!(r.failure_stage, Some(FailureStage::Fixtures));
        assert_eq!(
            r.message.as_deref(),
            Some("the case's tensors need 4096 bytes, more than the bound of 1024 bytes per case")
        );
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("failure").is_none(), "{json}");
        let mut r = CaseReport::new("s", "c");
        r.fail(FailureStage::Device, "card 0 hung");
        assert_eq!(r.failure, Some(CaseFailure::Device("card 0 hung".into())));
    }

    #[test]
    fn reports_read_back_and_merge_into_sums() {
        let mut a = CaseReport::new("s", "a");
        a.devices = vec![0];
        a.phases.lock_held_s = 0.25;
        a.phases.device_s = 0.125;
        a.phases.compile_s = 2.0;
        let mut b = CaseReport::new("s", "b");
        b.fail(FailureStage::Compare, "tensor `f` mismatch");
        b.phases.lock_held_s = 0.5;
        let one = RunReport::new("a2a3sim", vec![a], 1.0).with_unit_counts(UnitCounts {
            cached: 3,
            compiled: 1,
            failed: 0,
        });
        let two = RunReport::new("a2a3sim", vec![b], 2.0);
        let json = serde_json::to_vec(&two).unwrap();
        let back = RunReport::from_json(&json).unwrap();
        assert_eq!(back.schema, REPORT_SCHEMA);
        assert_eq!(
            back.cases[0].failure,
            Some(CaseFailure::Compare("tensor `f` mismatch".into()))
        );
        let merged = RunReport::merge(&[one.clone(), back]);
        assert_eq!(merged.len(), 1);
        let t = &merged[0].totals;
        assert_eq!((t.passed, t.failed), (1, 1));
        assert!((t.card_seconds_held - 0.75).abs() < 1e-12);
        assert!((t.device_seconds - 0.125).abs() < 1e-12);
        assert!((t.compile_seconds - 2.0).abs() < 1e-12);
        assert_eq!((t.units_cached, t.units_compiled), (3, 1));
        let x = junit_of(&merged);
        assert!(x.contains("tests=\"2\""), "{x}");
        // Two platforms: two suites.
        let other = RunReport::new("a5sim", vec![CaseReport::new("s", "c")], 1.0);
        assert_eq!(RunReport::merge(&[one, other]).len(), 2);

        let mut old = serde_json::to_value(&two).unwrap();
        old.as_object_mut().unwrap().remove("schema");
        let e = RunReport::from_json(&serde_json::to_vec(&old).unwrap()).unwrap_err();
        assert_eq!(e, ReportReadError::NoSchema);
        old["schema"] = serde_json::json!(2);
        let e = RunReport::from_json(&serde_json::to_vec(&old).unwrap()).unwrap_err();
        assert!(e.to_string().contains("report schema 2"), "{e}");
        assert!(matches!(
            RunReport::from_json(b"[1]"),
            Err(ReportReadError::NotAReport(_))
        ));
        assert!(matches!(
            RunReport::from_json(b"{"),
            Err(ReportReadError::Json(_))
        ));
    }

    fn located(report_dir: Option<&str>, working_dir: Option<&str>) -> RunReport {
        let mut r = RunReport::new("a2a3sim", vec![], 1.0);
        r.report_dir = report_dir.map(str::to_string);
        r.working_dir = working_dir.map(str::to_string);
        r
    }

    #[test]
    fn artifact_paths_under_a_moved_reports_dir_are_rebased_onto_it() {
        let r = located(Some("/ws/run/out"), Some("/ws/run"));
        let here = Path::new("/other/reports/scene-report-1");
        let moved = ReadAt {
            dir: here,
            moved: true,
            cwd: Path::new("/other"),
        };
        let p = |path| r.artifact_path(path, &moved);
        // Absolute and relative (to the run's working directory) alike.
        for path in [
            "/ws/run/out/dumps/s/c",
            "out/dumps/s/c",
            "./out/x/../dumps/s/c",
        ] {
            assert_eq!(
                p(path).moved_to.as_deref(),
                Some(here.join("dumps/s/c").as_path()),
                "{path}"
            );
        }
        assert_eq!(
            p("out/dumps/s/c").recorded,
            Path::new("/ws/run/out/dumps/s/c")
        );
        // The report's directory itself, and `..` that leaves it.
        assert_eq!(p("/ws/run/out").moved_to.as_deref(), Some(here));
        assert_eq!(p("/ws/run/out/../traces/t.json").moved_to, None);
        // Outside the report's directory: as recorded.
        let outside = p("/ws/target/scene-dumps/s/c");
        assert_eq!(outside.recorded, Path::new("/ws/target/scene-dumps/s/c"));
        assert_eq!(outside.moved_to, None);
        // A sibling whose name starts like the directory is not under it.
        assert_eq!(p("/ws/run/outer/d").moved_to, None);

        // Not moved: as recorded.
        let still = ReadAt {
            dir: Path::new("/ws/run/out"),
            moved: false,
            cwd: Path::new("/ws/run"),
        };
        let a = r.artifact_path("out/dumps/s/c", &still);
        assert_eq!(
            (a.recorded.as_path(), a.moved_to),
            (Path::new("/ws/run/out/dumps/s/c"), None)
        );
    }

    /// A report of an older `scene` (no `report_dir`, no `working_dir`):
    /// relative paths against the reader's directory, nothing rebased.
    #[test]
    fn reports_without_a_location_resolve_as_before() {
        let r = located(None, None);
        let at = ReadAt {
            dir: Path::new("/other/reports/x"),
            moved: true,
            cwd: Path::new("/other"),
        };
        assert_eq!(
            r.artifact_path("dumps/s/c", &at),
            ArtifactPath {
                recorded: PathBuf::from("/other/dumps/s/c"),
                moved_to: None
            }
        );
        assert_eq!(
            r.artifact_path("/ws/run/out/t.json", &at).recorded,
            Path::new("/ws/run/out/t.json")
        );
    }

    #[test]
    fn location_and_dump_fields_are_additive() {
        let mut c = CaseReport::new("s", "c");
        let mut r = RunReport::new("a2a3sim", vec![c.clone()], 1.0);
        let json = serde_json::to_value(&r).unwrap();
        for key in ["report_dir", "working_dir"] {
            assert!(json.get(key).is_none(), "{key}: {json}");
        }
        assert!(json["cases"][0].get("dump").is_none(), "{json}");
        // An older report (without them) reads back.
        let back = RunReport::from_json(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert_eq!((back.report_dir, back.working_dir), (None, None));
        assert_eq!(back.cases[0].dump, None);

        c.dump = Some("/ws/out/dumps/s/c".into());
        r = RunReport::new("a2a3sim", vec![c], 1.0);
        r.report_dir = Some("/ws/out".into());
        r.working_dir = Some("/ws".into());
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["report_dir"], "/ws/out");
        assert_eq!(json["working_dir"], "/ws");
        assert_eq!(json["cases"][0]["dump"], "/ws/out/dumps/s/c");
        // Kept when load failures are put ahead of the cases.
        let r = r.with_cases_before(vec![CaseReport::load_failure("bad", "oops")]);
        assert_eq!(r.report_dir.as_deref(), Some("/ws/out"));
        assert_eq!(r.working_dir.as_deref(), Some("/ws"));
    }

    #[test]
    fn lexical_drops_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(lexical(Path::new("/../a")), Path::new("/a"));
        assert_eq!(lexical(Path::new("../a/../../b")), Path::new("../../b"));
    }

    #[test]
    fn totals_ratio() {
        let mut a = CaseReport::new("s", "a");
        a.devices = vec![0];
        a.phases.lock_held_s = 0.2;
        a.phases.device_s = 0.1;
        a.phases.lock_wait_s = 0.5;
        let r = RunReport::new("a2a3sim", vec![a], 1.0);
        assert!((r.totals.held_to_device_ratio - 2.0).abs() < 1e-9);
        assert!((r.totals.queueing_seconds - 0.5).abs() < 1e-9);
    }
}
