//! Parsing of the `key=value;...` options string given to `scene_rt_open`.

use std::time::Duration;

use crate::error::{RtError, RtResult};

/// Simulated platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    A2a3Sim,
    A5Sim,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::A2a3Sim => "a2a3sim",
            Platform::A5Sim => "a5sim",
        }
    }
}

/// Test-only fault injection (`fault=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    /// `fatal_on_run:K`: the K-th run (1-based) returns `SCENE_RT_E_DEVICE_FATAL`.
    pub fatal_on_run: Option<u64>,
    /// `corrupt_on_run:K`: the K-th run (1-based) succeeds, then flips the
    /// first 8 bytes of its first output tensor (a kernel that is right once
    /// and wrong later, for testing `--rounds`).
    pub corrupt_on_run: Option<u64>,
    /// `hang`: runs never finish; they end only by the timeout.
    pub hang: bool,
    /// `fault_device=N`: the faults apply to device N only (so a test can
    /// break one card of a pool and watch the others carry on).
    pub only_device: Option<u32>,
}

/// Options of one open device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub platform: Platform,
    /// Emulated core threads per core type, indexed by `SCENE_CORE_*`.
    pub cores: [u32; 2],
    pub arena_bytes: u64,
    pub timeout: Option<Duration>,
    pub faults: Faults,
    /// `open_ms=N`: `scene_rt_open` takes this much longer (a real
    /// runtime's start-up cost, for tests and benchmarks of issue 28).
    pub open_delay: Duration,
    /// `close_ms=N`: `scene_rt_close` takes this much longer.
    pub close_delay: Duration,
    /// `race_check=1`: refuse a task whose `manual_dep` access races one of
    /// an earlier task (a diagnostic, off by default: the original's
    /// kernels write parts of a manual tensor they compute themselves,
    /// which the check cannot see; issue 39).
    pub race_check: bool,
}

pub const DEFAULT_CORES: u32 = 2;
pub const DEFAULT_ARENA_MB: u64 = 256;
/// Upper bounds that keep a typo from exhausting the host.
const MAX_CORES: u32 = 256;
const MAX_ARENA_MB: u64 = 1 << 20;
/// Largest `open_ms` / `close_ms`: 10 minutes.
pub const MAX_DELAY_MS: u64 = 600_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            platform: Platform::A2a3Sim,
            cores: [DEFAULT_CORES, DEFAULT_CORES],
            arena_bytes: DEFAULT_ARENA_MB << 20,
            timeout: None,
            faults: Faults::default(),
            open_delay: Duration::ZERO,
            close_delay: Duration::ZERO,
            race_check: false,
        }
    }
}

fn parse_num(key: &str, value: &str) -> RtResult<u64> {
    value.trim().parse::<u64>().map_err(|_| {
        RtError::Invalid(format!(
            "option `{key}`: `{value}` is not a non-negative integer"
        ))
    })
}

impl Options {
    /// The options as they apply to `device_id`: faults aimed at another
    /// device (`fault_device`) are dropped.
    pub fn for_device(mut self, device_id: i32) -> Options {
        if let Some(only) = self.faults.only_device
            && i64::from(only) != i64::from(device_id)
        {
            self.faults = Faults::default();
        }
        self
    }

    /// Parses `key=value;...`; empty items are ignored, unknown keys are errors.
    pub fn parse(s: &str) -> RtResult<Options> {
        let mut o = Options::default();
        for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                RtError::Invalid(format!("option `{item}` is not of the form key=value"))
            })?;
            let (key, value) = (key.trim(), value.trim());
            match key {
                "platform" => {
                    o.platform = match value {
                        "a2a3sim" => Platform::A2a3Sim,
                        "a5sim" => Platform::A5Sim,
                        _ => {
                            return Err(RtError::Invalid(format!(
                                "option `platform`: unknown platform `{value}` (expected a2a3sim or a5sim)"
                            )));
                        }
                    }
                }
                "aic" | "aiv" => {
                    let n = parse_num(key, value)?;
                    if n > u64::from(MAX_CORES) {
                        return Err(RtError::Invalid(format!(
                            "option `{key}`: {n} cores is more than the maximum {MAX_CORES}"
                        )));
                    }
                    o.cores[usize::from(key == "aiv")] = n as u32;
                }
                "arena_mb" => {
                    let n = parse_num(key, value)?;
                    if n == 0 || n > MAX_ARENA_MB {
                        return Err(RtError::Invalid(format!(
                            "option `arena_mb`: {n} is outside 1..={MAX_ARENA_MB}"
                        )));
                    }
                    o.arena_bytes = n << 20;
                }
                "timeout_ms" => {
                    let n = parse_num(key, value)?;
                    o.timeout = (n > 0).then(|| Duration::from_millis(n));
                }
                "open_ms" | "close_ms" => {
                    let n = parse_num(key, value)?;
                    if n > MAX_DELAY_MS {
                        return Err(RtError::Invalid(format!(
                            "option `{key}`: {n} ms is more than the maximum {MAX_DELAY_MS} (10 minutes)"
                        )));
                    }
                    let d = Duration::from_millis(n);
                    if key == "open_ms" {
                        o.open_delay = d;
                    } else {
                        o.close_delay = d;
                    }
                }
                "race_check" => {
                    o.race_check = match value {
                        "1" | "true" | "on" => true,
                        "0" | "false" | "off" => false,
                        _ => {
                            return Err(RtError::Invalid(format!(
                                "option `race_check`: `{value}` is not 0 or 1"
                            )));
                        }
                    };
                }
                "fault_device" => {
                    let n = parse_num(key, value)?;
                    let n = u32::try_from(n).map_err(|_| {
                        RtError::Invalid(format!("option `fault_device`: {n} is not a device id"))
                    })?;
                    o.faults.only_device = Some(n);
                }
                "fault" => {
                    for f in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                        if f == "hang" {
                            o.faults.hang = true;
                        } else if f == "none" {
                            o.faults = Faults {
                                only_device: o.faults.only_device,
                                ..Faults::default()
                            };
                        } else if let Some(k) = f.strip_prefix("fatal_on_run:") {
                            let k = parse_num("fault=fatal_on_run", k)?;
                            if k == 0 {
                                return Err(RtError::Invalid(
                                    "option `fault=fatal_on_run:K`: K counts runs from 1".into(),
                                ));
                            }
                            o.faults.fatal_on_run = Some(k);
                        } else if let Some(k) = f.strip_prefix("corrupt_on_run:") {
                            let k = parse_num("fault=corrupt_on_run", k)?;
                            if k == 0 {
                                return Err(RtError::Invalid(
                                    "option `fault=corrupt_on_run:K`: K counts runs from 1".into(),
                                ));
                            }
                            o.faults.corrupt_on_run = Some(k);
                        } else {
                            return Err(RtError::Invalid(format!(
                                "option `fault`: unknown fault `{f}` (expected hang, fatal_on_run:K, corrupt_on_run:K or none)"
                            )));
                        }
                    }
                }
                _ => {
                    return Err(RtError::Invalid(format!(
                        "unknown option `{key}` (known: platform, aic, aiv, arena_mb, timeout_ms, open_ms, close_ms, race_check, fault, fault_device)"
                    )));
                }
            }
        }
        if o.faults.hang && o.timeout.is_none() {
            return Err(RtError::Invalid(
                "option `fault=hang` needs `timeout_ms` > 0, or every run would hang forever"
                    .into(),
            ));
        }
        if o.cores == [0, 0] {
            return Err(RtError::Invalid(
                "options `aic` and `aiv` are both 0: the device has no cores".into(),
            ));
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_can_target_one_device() {
        let o = Options::parse("fault=fatal_on_run:1;fault_device=1").unwrap();
        assert_eq!(o.clone().for_device(1).faults.fatal_on_run, Some(1));
        assert_eq!(o.for_device(0).faults, Faults::default());
    }

    #[test]
    fn corrupt_on_run_counts_from_one() {
        let o = Options::parse("fault=corrupt_on_run:7").unwrap();
        assert_eq!(o.faults.corrupt_on_run, Some(7));
        let e = Options::parse("fault=corrupt_on_run:0").unwrap_err();
        assert!(e.to_string().contains("counts runs from 1"), "{e}");
        let e = Options::parse("fault=corrupt_on_run:x").unwrap_err();
        assert!(e.to_string().contains("corrupt_on_run"), "{e}");
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(Options::parse("").unwrap(), Options::default());
        let o = Options::parse(
            " platform=a5sim; aic=0;aiv=3;arena_mb=8;timeout_ms=50;fault=fatal_on_run:2 ;",
        )
        .unwrap();
        assert_eq!(o.platform, Platform::A5Sim);
        assert_eq!(o.cores, [0, 3]);
        assert_eq!(o.arena_bytes, 8 << 20);
        assert_eq!(o.timeout, Some(Duration::from_millis(50)));
        assert_eq!(o.faults.fatal_on_run, Some(2));
    }

    #[test]
    fn the_race_check_is_off_unless_asked_for_and_the_last_word_wins() {
        assert!(!Options::parse("").unwrap().race_check);
        assert!(Options::parse("race_check=1").unwrap().race_check);
        assert!(
            !Options::parse("race_check=1;race_check=0")
                .unwrap()
                .race_check
        );
        assert!(
            Options::parse("race_check=0;;race_check=1")
                .unwrap()
                .race_check
        );
        let e = Options::parse("race_check=yes").unwrap_err().to_string();
        assert!(e.contains("`yes` is not 0 or 1"), "{e}");
    }

    #[test]
    fn open_and_close_delays() {
        let o = Options::parse("").unwrap();
        assert_eq!(
            (o.open_delay, o.close_delay),
            (Duration::ZERO, Duration::ZERO)
        );
        let o = Options::parse("open_ms=300; close_ms = 25").unwrap();
        assert_eq!(o.open_delay, Duration::from_millis(300));
        assert_eq!(o.close_delay, Duration::from_millis(25));
        let o = Options::parse("open_ms=600000;close_ms=0").unwrap();
        assert_eq!(o.open_delay, Duration::from_secs(600));
        assert_eq!(o.close_delay, Duration::ZERO);
        // Kept for every device: they are not faults.
        let o = Options::parse("open_ms=5;fault=fatal_on_run:1;fault_device=3")
            .unwrap()
            .for_device(0);
        assert_eq!(o.open_delay, Duration::from_millis(5));
        for (bad, says) in [
            (
                "open_ms=600001",
                "600001 ms is more than the maximum 600000",
            ),
            (
                "close_ms=18446744073709551615",
                "more than the maximum 600000",
            ),
            (
                "open_ms=-1",
                "option `open_ms`: `-1` is not a non-negative integer",
            ),
            (
                "close_ms=1s",
                "option `close_ms`: `1s` is not a non-negative integer",
            ),
            (
                "close_ms=",
                "option `close_ms`: `` is not a non-negative integer",
            ),
        ] {
            let e = Options::parse(bad).unwrap_err();
            assert!(matches!(e, RtError::Invalid(_)), "{bad}: {e:?}");
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
        let e = Options::parse("open_sec=1").unwrap_err().to_string();
        assert!(e.contains("open_ms, close_ms"), "{e}");
    }

    #[test]
    fn errors() {
        for bad in [
            "bogus=1",
            "aic",
            "aic=x",
            "platform=cpu",
            "arena_mb=0",
            "fault=explode",
            "fault=hang",
            "aic=0;aiv=0",
        ] {
            let e = Options::parse(bad).unwrap_err();
            assert!(matches!(e, RtError::Invalid(_)), "{bad}: {e:?}");
        }
        assert!(
            Options::parse("bogus=1")
                .unwrap_err()
                .to_string()
                .contains("bogus")
        );
    }
}
