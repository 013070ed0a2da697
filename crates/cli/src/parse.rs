//! Value syntax shared by flags and environment variables: a value means
//! the same, within the same bounds, whether it came from `--case-timeout`
//! or `SCENE_COMM_TIMEOUT`. Clap calls these as value parsers; the
//! resolution ([`crate::hiargs`]) calls them on variables.

use std::num::NonZeroUsize;
use std::time::Duration;

/// A value that does not parse. The caller names the flag or variable.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("`{value}` is not a number of {unit}")]
    NotADuration { value: String, unit: &'static str },
    #[error("`{value}` is not a non-negative number of {unit}")]
    NegativeDuration { value: String, unit: &'static str },
    #[error("`{value}` {unit} is out of range (at most {max} {unit})")]
    DurationOutOfRange {
        value: String,
        unit: &'static str,
        max: f64,
    },
    #[error("`{value}` is not a positive number of seconds")]
    NotPositive { value: String },
    #[error("`{0}` is not a number")]
    NotACount(String),
    #[error("must be at least 1")]
    ZeroCount,
    #[error("`{0}` is too many threads (at most {MAX_GOLDEN_THREADS})")]
    TooManyThreads(String),
    #[error("--rounds counts runs from 1")]
    ZeroRounds,
    #[error("`{value}` is more {what} than allowed (at most {MAX_RUNS})")]
    TooManyRuns { value: String, what: &'static str },
    #[error("`{value}` is not a round count: {source}")]
    NotARoundCount {
        value: String,
        source: std::num::ParseIntError,
    },
    #[error("`{value}`: unknown size suffix `{suffix}`")]
    UnknownSizeSuffix { value: String, suffix: char },
    #[error("`{0}` is not a number of bytes")]
    NotBytes(String),
    #[error("`{0}` is too large")]
    TooManyBytes(String),
    #[error("`{0}` is not one of 1, true, yes, 0, false, no")]
    NotABool(String),
    #[error("`{0}` is not one of fail, warn, pass")]
    NotNoTests(String),
}

/// The longest duration a flag or variable accepts, in seconds (about 31
/// years): far beyond any useful timeout, and safe to add to any clock
/// reading.
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// The unit a duration is written in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Unit {
    Seconds,
    Days,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Days => "days",
        }
    }

    fn seconds(self) -> f64 {
        match self {
            Unit::Seconds => 1.0,
            Unit::Days => 86400.0,
        }
    }
}

/// The one duration syntax: a non-negative, finite decimal number of
/// `unit`s (`2`, `0.5`, `1e3`), at most [`MAX_SECONDS`] long.
pub(crate) fn parse_duration(s: &str, unit: Unit) -> Result<Duration, ValueError> {
    let name = unit.name();
    let v: f64 = s.trim().parse().map_err(|_| ValueError::NotADuration {
        value: s.to_owned(),
        unit: name,
    })?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(ValueError::NegativeDuration {
            value: s.to_owned(),
            unit: name,
        });
    }
    let seconds = v * unit.seconds();
    if seconds > MAX_SECONDS {
        return Err(ValueError::DurationOutOfRange {
            value: s.to_owned(),
            unit: name,
            max: MAX_SECONDS / unit.seconds(),
        });
    }
    // In range and finite: the conversion cannot fail; mapped all the same.
    Duration::try_from_secs_f64(seconds).map_err(|_| ValueError::DurationOutOfRange {
        value: s.to_owned(),
        unit: name,
        max: MAX_SECONDS / unit.seconds(),
    })
}

/// Seconds (`--case-timeout`, `--lock-timeout`; `0` = no limit where the
/// flag says so).
pub(crate) fn parse_seconds(s: &str) -> Result<Duration, ValueError> {
    parse_duration(s, Unit::Seconds)
}

/// Seconds, more than zero: a timeout that has no "no limit" value
/// (`SCENE_COMM_TIMEOUT`, `SCENE_GOLDEN_TIMEOUT`, `SCENE_CACHE_REMOTE_TIMEOUT`).
pub(crate) fn parse_positive_seconds(s: &str) -> Result<Duration, ValueError> {
    let d = parse_seconds(s)?;
    // The number, not the duration: `1e-10` was accepted (it rounds to 0 ns).
    match s.trim().parse::<f64>().is_ok_and(|v| v > 0.0) {
        true => Ok(d),
        false => Err(ValueError::NotPositive {
            value: s.to_owned(),
        }),
    }
}

/// Days (`--max-age`).
pub(crate) fn parse_days(s: &str) -> Result<Duration, ValueError> {
    parse_duration(s, Unit::Days)
}

/// The most `--rounds`, and the most `--warmup`, one run accepts. Every
/// run of a session gets its own output room (a span per output in the job,
/// the outputs read back per run), so the count is an allocation size:
/// `--warmup 4294967295` asked for 68 GB of spans and aborted.
pub(crate) const MAX_RUNS: u32 = 10_000;

/// `--rounds`: a count from 1, at most [`MAX_RUNS`].
pub(crate) fn parse_rounds(s: &str) -> Result<u32, ValueError> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err(ValueError::ZeroRounds),
        Ok(n) if n > MAX_RUNS => Err(ValueError::TooManyRuns {
            value: s.to_owned(),
            what: "rounds",
        }),
        Ok(n) => Ok(n),
        Err(source) => Err(ValueError::NotARoundCount {
            value: s.to_owned(),
            source,
        }),
    }
}

/// `--warmup`: a count from 0, at most [`MAX_RUNS`].
pub(crate) fn parse_warmup(s: &str) -> Result<u32, ValueError> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > MAX_RUNS => Err(ValueError::TooManyRuns {
            value: s.to_owned(),
            what: "warmup runs",
        }),
        Ok(n) => Ok(n),
        Err(source) => Err(ValueError::NotARoundCount {
            value: s.to_owned(),
            source,
        }),
    }
}

/// `1`, `true`, `yes` or `0`, `false`, `no` (any case).
pub(crate) fn parse_bool(s: &str) -> Result<bool, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(ValueError::NotABool(s.to_owned())),
    }
}

/// A positive count (`--compile-workers`, `SCENE_GOLDEN_THREADS`, ...).
pub(crate) fn parse_count(s: &str) -> Result<NonZeroUsize, ValueError> {
    match s.trim().parse::<usize>() {
        Ok(n) => NonZeroUsize::new(n).ok_or(ValueError::ZeroCount),
        Err(_) => Err(ValueError::NotACount(s.to_owned())),
    }
}

/// Most threads `--golden-threads` / `SCENE_GOLDEN_THREADS` may ask for:
/// more is a typo, not a machine.
pub const MAX_GOLDEN_THREADS: usize = 1024;

/// A thread count: positive and at most [`MAX_GOLDEN_THREADS`].
pub(crate) fn parse_threads(s: &str) -> Result<NonZeroUsize, ValueError> {
    let n = parse_count(s)?;
    if n.get() > MAX_GOLDEN_THREADS {
        return Err(ValueError::TooManyThreads(s.to_owned()));
    }
    Ok(n)
}

/// A number of bytes, with an optional suffix K, M, G, T (powers of 1024)
/// or B (`--max-size`, `--max-case-bytes`, `SCENE_MAX_CASE_BYTES`).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'B' => 0,
                _ => {
                    return Err(ValueError::UnknownSizeSuffix {
                        value: s.to_owned(),
                        suffix: c,
                    });
                }
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| ValueError::NotBytes(s.to_owned()))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| ValueError::TooManyBytes(s.to_owned()))
}

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
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "fail" => Ok(Self::Fail),
            "warn" => Ok(Self::Warn),
            "pass" => Ok(Self::Pass),
            _ => Err(ValueError::NotNoTests(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_days_parse() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("5G"), Ok(5 << 30));
        assert_eq!(parse_bytes("2k"), Ok(2048));
        assert!(parse_bytes("5X").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        assert_eq!(parse_days("1"), Ok(Duration::from_secs(86400)));
        assert!(parse_days("-2").is_err());
        assert!(parse_days("soon").is_err());
    }

    #[test]
    fn durations_out_of_range_are_errors_not_panics() {
        for bad in [
            "1e20",
            "-1",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e9000",
            "1000000001",
        ] {
            let e = parse_seconds(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(
            parse_seconds("1e20")
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert_eq!(parse_seconds("1e9"), Ok(Duration::from_secs(1_000_000_000)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(
            parse_days("1e15")
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(parse_days("11574").is_ok());
    }

    /// What each of the three former parsers accepted is still accepted:
    /// the flags' `[0, 1e9]` seconds, `SCENE_COMM_TIMEOUT`'s `(0, 1e9)` and
    /// `SCENE_GOLDEN_TIMEOUT`'s `(0, 1e9]`; only zero is refused where a
    /// timeout has no "no limit".
    #[test]
    fn one_duration_syntax_for_flags_and_variables() {
        for ok in ["0.001", "2", " 2.5 ", "1e3", "999999999.5", "1e9"] {
            assert!(parse_seconds(ok).is_ok(), "{ok}");
            assert!(parse_positive_seconds(ok).is_ok(), "{ok}");
        }
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["0", "0.0", "-1", "nan", "inf", "soon", "1e10", ""] {
            let e = parse_positive_seconds(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
        }
    }

    /// Issue 27, cause 9: `--rounds 2 --warmup 4294967295` was accepted and
    /// the job's per-run output room (68 GB) aborted the process.
    #[test]
    fn huge_warmup_and_rounds_are_refused_before_allocating() {
        for (parse, flag) in [
            (
                parse_warmup as fn(&str) -> Result<u32, ValueError>,
                "warmup",
            ),
            (parse_rounds, "rounds"),
        ] {
            for big in ["4294967295", "10001"] {
                let e = parse(big).unwrap_err();
                assert!(matches!(e, ValueError::TooManyRuns { .. }), "{flag}: {e}");
                let msg = e.to_string();
                assert!(msg.contains(&format!("`{big}`")), "{msg}");
                assert!(msg.contains("at most 10000"), "{msg}");
            }
        }
    }

    #[test]
    fn counts_threads_rounds_and_switches() {
        assert_eq!(parse_count("3").map(NonZeroUsize::get), Ok(3));
        assert_eq!(parse_count("0"), Err(ValueError::ZeroCount));
        assert!(parse_threads("1025").is_err());
        assert_eq!(parse_threads("1024").map(NonZeroUsize::get), Ok(1024));
        assert_eq!(parse_rounds("0"), Err(ValueError::ZeroRounds));
        assert!(parse_rounds("x").unwrap_err().to_string().contains("`x`"));
        assert_eq!(parse_rounds("10000"), Ok(MAX_RUNS));
        assert_eq!(parse_warmup("0"), Ok(0));
        assert_eq!(parse_warmup("10000"), Ok(MAX_RUNS));
        assert!(parse_warmup("-1").is_err());
        assert_eq!(parse_bool("Yes"), Ok(true));
        assert_eq!(parse_bool("0"), Ok(false));
        assert!(parse_bool("perhaps").is_err());
        assert_eq!("warn".parse::<NoTests>(), Ok(NoTests::Warn));
        assert!("maybe".parse::<NoTests>().is_err());
    }
}
