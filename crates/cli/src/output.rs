//! What the CLI prints and writes: case lines and report files.

use std::io::IsTerminal;

use scene_harness::report::{CaseReport, CaseStatus};

/// `PASS`, `FAIL`: the word a case line starts with.
pub(crate) fn status_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Passed => "PASS",
        CaseStatus::Failed => "FAIL",
    }
}

/// Prints one line per finished case (`PASS name (t s)`, then the message
/// indented); coloured on a terminal; passing cases omitted when `quiet`.
pub(crate) struct CaseLines {
    color: bool,
    quiet: bool,
}

impl CaseLines {
    pub(crate) fn new(quiet: bool) -> Self {
        Self {
            color: std::io::stdout().is_terminal(),
            quiet,
        }
    }

    pub(crate) fn print(&self, r: &CaseReport) {
        if self.quiet && r.status == CaseStatus::Passed {
            return;
        }
        let word = status_word(r.status);
        let word = match (self.color, r.status) {
            (false, _) => word.to_string(),
            (true, CaseStatus::Passed) => format!("\x1b[32m{word}\x1b[0m"),
            (true, CaseStatus::Failed) => format!("\x1b[31m{word}\x1b[0m"),
        };
        println!("{word} {} ({:.3} s)", r.name, r.wall_s);
        if let Some(m) = &r.message {
            for line in m.lines() {
                println!("    {line}");
            }
        }
    }
}
