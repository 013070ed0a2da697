//! What a run produced: one [`CaseReport`] per case and a [`RunReport`]
//! summary, serialisable as the `--report-json` contract.
//!
//! Field names here are a contract with users' CI scripts: add fields, never
//! rename them.

use serde::Serialize;

/// Outcome of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Passed,
    Failed,
}

/// Which stage a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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
            Self::TooLarge { .. } | Self::Fixtures(_) => FailureStage::Fixtures,
            Self::Golden(_) => FailureStage::Golden,
            Self::Device(_) => FailureStage::Device,
            Self::Compare(_) => FailureStage::Compare,
        }
    }
}

/// Seconds spent in each phase of one case.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Phases {
    pub compile_s: f64,
    pub fixtures_s: f64,
    pub golden_s: f64,
    /// Waiting for the card lock.
    pub lock_wait_s: f64,
    /// From acquiring the card to releasing it.
    pub lock_held_s: f64,
    /// The device session: open the card, upload (tensors and the
    /// callable's images), run, download, close.
    pub device_s: f64,
    /// The part of `device_s` from opening the card to closing it, as the
    /// session measured it; the rest is the worker process's start, runtime
    /// load and exit.
    pub session_s: f64,
    pub compare_s: f64,
}

/// When the card lock was held (Unix seconds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LockInterval {
    pub acquired_at: f64,
    pub released_at: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// `scene::case`.
    pub name: String,
    pub scene: String,
    pub case: String,
    pub status: CaseStatus,
    pub devices: Vec<u32>,
    pub phases: Phases,
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
    pub wall_s: f64,
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
#[derive(Clone, Debug, Default, Serialize)]
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
    /// `card_seconds_held / device_seconds` (1.0 is perfect; 0 when no device work).
    pub held_to_device_ratio: f64,
    /// Sum of `lock_wait_s`.
    pub queueing_seconds: f64,
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub platform: String,
    pub cases: Vec<CaseReport>,
    pub totals: RunTotals,
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
            t.queueing_seconds += c.phases.lock_wait_s;
        }
        t.held_to_device_ratio = if t.device_seconds > 0.0 {
            t.card_seconds_held / t.device_seconds
        } else {
            0.0
        };
        Self {
            platform: platform.to_string(),
            cases,
            totals: t,
        }
    }

    /// The report with `first` (e.g. scenes that did not load) ahead of its
    /// cases, totals recomputed: entries and totals always agree.
    pub fn with_cases_before(self, mut first: Vec<CaseReport>) -> Self {
        if first.is_empty() {
            return self;
        }
        first.extend(self.cases);
        Self::new(&self.platform, first, self.totals.wall_s)
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

/// Seconds since the Unix epoch of a `SystemTime`, as a float.
pub fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl RunReport {
    /// JUnit XML: one `<testcase>` per case (classname = scene), failures
    /// with their message, skipped cases marked skipped.
    pub fn to_junit(&self) -> String {
        let t = &self.totals;
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        x.push_str(&format!(
            "<testsuites name=\"scenes\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">\n",
            self.cases.len(),
            t.failed,
            t.skipped,
            t.wall_s
        ));
        x.push_str(&format!(
            "  <testsuite name=\"scenes.{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">\n",
            xml_escape(&self.platform),
            self.cases.len(),
            t.failed,
            t.skipped,
            t.wall_s
        ));
        for c in &self.cases {
            x.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(&c.scene),
                xml_escape(&c.case),
                c.wall_s
            ));
            match c.status {
                CaseStatus::Passed => x.push_str("/>\n"),
                CaseStatus::Failed => {
                    let msg = c.message.as_deref().unwrap_or("failed");
                    let first = msg.lines().next().unwrap_or("failed");
                    let stage = c.failure_stage.map(|s| s.to_string()).unwrap_or_default();
                    x.push_str(&format!(
                        ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                        xml_escape(&stage),
                        xml_escape(first),
                        xml_escape(msg)
                    ));
                }
            }
        }
        x.push_str("  </testsuite>\n</testsuites>\n");
        x
    }
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_and_counts() {
        let mut failed = CaseReport::new("s", "c<1>");
        failed.fail(FailureStage::Compare, "tensor `f` & \"more\"\nline 2");
        let passed = CaseReport::new("s", "ok");
        let r = RunReport::new("a2a3sim", vec![failed, passed], 1.0);
        let x = r.to_junit();
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("name=\"c&lt;1&gt;\""), "{x}");
        assert!(
            x.contains("message=\"tensor `f` &amp; &quot;more&quot;\""),
            "{x}"
        );
        assert!(x.contains("<testcase classname=\"s\" name=\"ok\""), "{x}");
        assert_eq!(r.summary_line(), "1 passed, 1 failed");
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
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(
            x.contains("type=\"load\" message=\"bad/scene.toml: oops\""),
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
