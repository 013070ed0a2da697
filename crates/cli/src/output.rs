//! What the CLI prints and writes: case lines and report files.

use std::io::{IsTerminal, Write};

use scene_harness::report::{CaseReport, CaseStatus};

/// `-q`, `-v` and `--color` (with `NO_COLOR`), global to every subcommand
/// (resolved by [`crate::hiargs`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Verbosity {
    pub(crate) quiet: bool,
    pub(crate) verbose: bool,
    /// `Some(on)` when decided (`--color always|never`, `NO_COLOR`);
    /// `None` = colour when the stream written to is a terminal.
    pub(crate) color: Option<bool>,
}

/// `PASS`, `FAIL`: the word a case line starts with.
pub(crate) fn status_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Passed => "PASS",
        CaseStatus::Failed => "FAIL",
    }
}

/// Where human-readable lines go: stdout, or stderr when stdout carries a
/// report (`--report-json -`, `--junit -`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn is_terminal(self) -> bool {
        match self {
            Stream::Stdout => std::io::stdout().is_terminal(),
            Stream::Stderr => std::io::stderr().is_terminal(),
        }
    }

    /// Prints `text` and a newline (a closed pipe is ignored).
    pub(crate) fn line(self, text: &str) {
        let _ = match self {
            Stream::Stdout => writeln!(std::io::stdout().lock(), "{text}"),
            Stream::Stderr => writeln!(std::io::stderr().lock(), "{text}"),
        };
    }
}

/// Prints one line per finished case (`PASS name (t s)`, then the message
/// indented); coloured per `--color` / `NO_COLOR` (by default on a
/// terminal); passing cases omitted when `quiet`.
pub(crate) struct CaseLines {
    color: bool,
    quiet: bool,
    stream: Stream,
}

impl CaseLines {
    pub(crate) fn new(verbosity: Verbosity, stream: Stream) -> Self {
        Self {
            color: verbosity.color.unwrap_or_else(|| stream.is_terminal()),
            quiet: verbosity.quiet,
            stream,
        }
    }

    /// The case line(s) of `r`, or none when `quiet` and it passed.
    pub(crate) fn text(&self, r: &CaseReport) -> Option<String> {
        if self.quiet && r.status == CaseStatus::Passed {
            return None;
        }
        let word = status_word(r.status);
        let word = match (self.color, r.status) {
            (false, _) => word.to_string(),
            (true, CaseStatus::Passed) => format!("\x1b[32m{word}\x1b[0m"),
            (true, CaseStatus::Failed) => format!("\x1b[31m{word}\x1b[0m"),
        };
        let mut text = format!("{word} {} ({:.3} s)", r.name, r.wall_s);
        if let Some(k) = &r.rounds {
            let d = &k.device_s;
            text.push_str(&format!(
                " [{} rounds, {} warmup: device min {:.6} / median {:.6} / max {:.6} s]",
                k.n, k.warmup, d.min, d.median, d.max
            ));
        }
        if let Some(m) = &r.message {
            for line in m.lines() {
                text.push_str("\n    ");
                text.push_str(line);
            }
        }
        Some(text)
    }

    pub(crate) fn print(&self, r: &CaseReport) {
        if let Some(text) = self.text(r) {
            self.stream.line(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(passed: bool) -> CaseReport {
        let mut r = CaseReport::new("s", "c");
        if !passed {
            r.fail(scene_harness::report::FailureStage::Compare, "off by one");
        }
        r
    }

    #[test]
    fn colour_follows_the_choice_and_quiet_hides_passes() {
        let always = Verbosity {
            color: Some(true),
            ..Verbosity::default()
        };
        let never = Verbosity {
            color: Some(false),
            ..Verbosity::default()
        };
        let on = CaseLines::new(always, Stream::Stderr).text(&report(true));
        assert!(on.unwrap().starts_with("\x1b[32mPASS\x1b[0m s::c ("));
        let off = CaseLines::new(never, Stream::Stderr).text(&report(false));
        let off = off.unwrap();
        assert!(off.starts_with("FAIL s::c ("), "{off}");
        assert!(off.ends_with("\n    off by one"), "{off}");
        let quiet = Verbosity {
            quiet: true,
            ..never
        };
        assert_eq!(
            CaseLines::new(quiet, Stream::Stdout).text(&report(true)),
            None
        );
        assert!(
            CaseLines::new(quiet, Stream::Stdout)
                .text(&report(false))
                .is_some()
        );
    }
}
