//! Compile progress, shared by `scene compile` and `scene run`: a bar on
//! stderr when it is a terminal, else plain unit lines (`scene compile`
//! only; `scene run` prints its case lines and nothing per unit).

use std::io::IsTerminal;
use std::sync::Arc;

use scene_kernels::{Observer, UnitKind, UnitOutcome, UnitReport};

/// What a compile observer prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnitLines {
    /// Nothing per unit (`-q`, or `scene run` without a terminal).
    None,
    /// Units whose compiler ran or that failed; cached ones are counted
    /// in the summary only.
    Work,
    /// Every unit (`-v`).
    All,
    /// Every unit with the reason it was compiled or reused (`--explain`).
    Explain,
}

impl UnitLines {
    fn shows(self, outcome: UnitOutcome) -> bool {
        match self {
            UnitLines::None => false,
            // Counted in the interrupted summary; a line each is noise.
            UnitLines::Work | UnitLines::All if outcome == UnitOutcome::Cancelled => false,
            UnitLines::Work => !matches!(outcome, UnitOutcome::Cached | UnitOutcome::Reused),
            UnitLines::All | UnitLines::Explain => true,
        }
    }
}

/// `compiled`, `reused`, `cached`, `failed`: the variant name, so an
/// outcome added later prints without a change here.
pub(crate) fn outcome_word(outcome: UnitOutcome) -> String {
    format!("{outcome:?}").to_lowercase()
}

fn kind_label(kind: UnitKind) -> String {
    match kind {
        UnitKind::Incore { func_id, core } => format!("{core}, func_id {func_id}"),
        UnitKind::Orchestration => "orchestration".to_string(),
        UnitKind::Host => "host program".to_string(),
    }
}

pub(crate) fn unit_line(report: &UnitReport) -> String {
    format!(
        "{} {} ({}) {:.3} s",
        outcome_word(report.outcome),
        report.unit,
        kind_label(report.kind),
        report.duration.as_secs_f64()
    )
}

/// Why a unit was (or was not) compiled: the builder's miss reason when
/// the compiler ran, else what the outcome implies.
fn explanation(report: &UnitReport) -> String {
    if let Some(miss) = &report.miss {
        return miss.to_string();
    }
    match report.outcome {
        UnitOutcome::Cached if report.remote => {
            "remote hit: taken from the remote cache tier (verified, copied into the local cache)"
                .to_string()
        }
        UnitOutcome::Cached => "found in the persistent cache".to_string(),
        UnitOutcome::Reused => "already built by this process".to_string(),
        UnitOutcome::Failed => "failed before reaching the compiler (see below)".to_string(),
        UnitOutcome::Compiled => "compiled (no reason recorded)".to_string(),
        UnitOutcome::Cancelled => "not built: the run was interrupted".to_string(),
    }
}

/// `<unit line> [key <16 hex>]: <explanation>`, for `--explain`, plus
/// a note when the unit's headers were checked by the include scanner only.
pub(crate) fn explain_line(report: &UnitReport) -> String {
    let key = report
        .key
        .map(|k| k.to_hex()[..16].to_string())
        .unwrap_or_else(|| "-".to_string());
    let mut line = format!("{} [key {key}]: {}", unit_line(report), explanation(report));
    if let Some(why) = &report.deps_unchecked {
        line.push_str(&format!(
            " (headers checked by the include scanner only: {why})"
        ));
    }
    line
}

/// The bar `scene compile` and `scene run` show for `total` units: only
/// when stderr is a terminal and `enabled`.
pub(crate) fn bar(total: usize, enabled: bool) -> Option<indicatif::ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}

/// The per-unit observer: with a bar, it advances the bar and prints the
/// lines `lines` asks for above it; without one, it prints them on stdout.
pub(crate) fn observer(bar: Option<&indicatif::ProgressBar>, lines: UnitLines) -> Observer {
    let format = move |r: &UnitReport| {
        if lines == UnitLines::Explain {
            explain_line(r)
        } else {
            unit_line(r)
        }
    };
    match bar {
        Some(bar) => {
            let progress = bar.clone();
            Arc::new(move |r: &UnitReport| {
                // Failures stay on screen above the bar; details follow at the end.
                if lines.shows(r.outcome) && (lines != UnitLines::Work || is_failure(r)) {
                    progress.println(format(r));
                }
                progress.set_message(r.unit.clone());
                progress.inc(1);
            })
        }
        None => Arc::new(move |r: &UnitReport| {
            if lines.shows(r.outcome) {
                println!("{}", format(r));
            }
        }),
    }
}

fn is_failure(r: &UnitReport) -> bool {
    r.outcome == UnitOutcome::Failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_words_are_lowercase_variant_names() {
        assert_eq!(outcome_word(UnitOutcome::Compiled), "compiled");
        assert_eq!(outcome_word(UnitOutcome::Reused), "reused");
        assert_eq!(outcome_word(UnitOutcome::Failed), "failed");
        assert_eq!(outcome_word(UnitOutcome::Cached), "cached");
    }

    #[test]
    fn cached_units_print_only_when_verbose() {
        for cached in [UnitOutcome::Cached, UnitOutcome::Reused] {
            assert!(!UnitLines::Work.shows(cached));
            assert!(UnitLines::All.shows(cached));
            assert!(!UnitLines::None.shows(cached));
        }
        assert!(UnitLines::Work.shows(UnitOutcome::Compiled));
        assert!(UnitLines::Work.shows(UnitOutcome::Failed));
    }
}
