//! `scene compile`: the compile stage alone, as a warm-up.
//!
//! Builds every callable the selection would run with the same specs
//! (`callable_spec`) and the same toolchain `scene run` and the test target
//! use, so a later run finds the same unit keys. All units of all selected
//! scenes go through one `Builder::build_all`, i.e. one deduplicated plan on
//! one global budget of `--compile-workers` tool processes.
//!
//! It deliberately builds a `Builder` directly instead of a `Session`: a
//! session owns a card pool, and a warm-up must never touch a card lock or
//! load the runtime library (it can run while every card is busy).

use std::collections::HashMap;
use std::time::Instant;

use scene_harness::compile::{compile_builder, scene_host_units, scene_specs};
use scene_harness::distinct_scenes;
use scene_kernels::{BuildOutput, CallableSpec, HostUnit, UnitOutcome, plan_outline_with_hosts};

use crate::Layout;
use crate::error::CliError;
use crate::hiargs::CompileSetup;
use crate::output::Verbosity;
use crate::progress::{self, UnitLines};
use crate::prologue::{Prologue, prologue, unless_interrupted};

/// How a finished callable counts in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallableOutcome {
    /// Every unit came from an earlier build; no compiler ran for it.
    Cached,
    /// At least one unit was compiled, and all succeeded.
    Compiled,
    Failed,
    /// The run was interrupted before every unit of it was built (and
    /// none of them failed on its own).
    NotStarted,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    cached: usize,
    compiled: usize,
    failed: usize,
    not_started: usize,
}

impl Tally {
    fn add(&mut self, outcome: CallableOutcome) {
        match outcome {
            CallableOutcome::Cached => self.cached += 1,
            CallableOutcome::Compiled => self.compiled += 1,
            CallableOutcome::Failed => self.failed += 1,
            CallableOutcome::NotStarted => self.not_started += 1,
        }
    }

    fn total(&self) -> usize {
        self.cached + self.compiled + self.failed + self.not_started
    }

    /// `interrupted (SIGINT): compiled 6 callables: 2 cached, 1 compiled,
    /// 0 failed, 3 not started in 1.23 s`.
    fn interrupted_line(&self, what: &str, seconds: f64) -> String {
        format!(
            "{what}: compiled {} callables: {} cached, {} compiled, {} failed, {} not started in {seconds:.2} s",
            self.total(),
            self.cached,
            self.compiled,
            self.failed,
            self.not_started
        )
    }

    fn summary_line(&self, seconds: f64) -> String {
        format!(
            "compiled {} callables: {} cached, {} compiled, {} failed in {seconds:.2} s",
            self.total(),
            self.cached,
            self.compiled,
            self.failed
        )
    }
}

/// The outcome of each of the units every callable uses (with the host
/// programs of its scene's steps: `hosts`, whose labels are the specs'),
/// matched by plan position (the builder reports units in plan order).
fn callable_outcomes(
    specs: &[CallableSpec],
    hosts: &[HostUnit],
    out: &BuildOutput,
) -> Vec<CallableOutcome> {
    let outline = plan_outline_with_hosts(specs, hosts);
    let by_index = out.units.len() == outline.units.len();
    // Fallback in case a future builder reports fewer units (e.g. skips):
    // match by the `<scene>/<name>` the plan and the report share.
    let by_name: HashMap<&str, UnitOutcome> = out
        .units
        .iter()
        .map(|u| (u.unit.as_str(), u.outcome))
        .collect();
    let outcome_of = |idx: usize| -> Option<UnitOutcome> {
        if by_index {
            out.units.get(idx).map(|u| u.outcome)
        } else {
            let name = outline.units.get(idx)?.display.as_str();
            by_name.get(name).copied()
        }
    };
    out.callables
        .iter()
        .enumerate()
        .map(|(i, result)| {
            if let Err(e) = result {
                let cancelled = !e.failures.is_empty()
                    && e.failures
                        .iter()
                        .all(|f| f.error().is_some_and(|e| e.is_cancelled()));
                return if cancelled {
                    CallableOutcome::NotStarted
                } else {
                    CallableOutcome::Failed
                };
            }
            let mut units = outline
                .callables
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or_default();
            let label = specs.get(i).map(|s| s.label.as_str());
            for (j, host) in hosts.iter().enumerate() {
                if Some(host.label.as_str()) != label {
                    continue;
                }
                match out.hosts.get(j) {
                    Some(Err(e)) if e.is_cancelled() => return CallableOutcome::NotStarted,
                    Some(Err(_)) => return CallableOutcome::Failed,
                    _ => units.extend(outline.hosts.get(j).copied()),
                }
            }
            // A unit with no report is counted as compiled: claiming "cached"
            // must mean no compiler ran.
            let any_compiled = units.iter().any(|&idx| !is_cached(outcome_of(idx)));
            if any_compiled {
                CallableOutcome::Compiled
            } else {
                CallableOutcome::Cached
            }
        })
        .collect()
}

/// Whether a unit's artifact came from an earlier build (this process's
/// memo or the persistent cache), i.e. no compiler ran for it.
fn is_cached(outcome: Option<UnitOutcome>) -> bool {
    matches!(outcome, Some(UnitOutcome::Reused | UnitOutcome::Cached))
}

/// Runs `scene compile`. Exit 0 when every selected callable built.
pub(crate) fn run(
    layout: &Layout,
    verbosity: Verbosity,
    setup: &CompileSetup,
) -> Result<(), CliError> {
    let started = Instant::now();
    let Prologue {
        cases,
        load_errors,
        config,
    } = prologue(layout, &setup.engine, None)?;
    let scenes = distinct_scenes(&cases);
    let builder = compile_builder(&config)?;
    let specs = scene_specs(&config, &scenes);
    // The C host steps' programs are units of the same plan.
    let hosts = scene_host_units(&config, &scenes);

    let total_units = plan_outline_with_hosts(&specs, &hosts).units.len();
    // `--explain` prints every unit with its reason; `-q` nothing per
    // unit; else a bar on a terminal or, without one, a line per unit the
    // compiler ran for (every unit with `-v`): a warm build prints its
    // summary line alone.
    let (bar, lines) = if setup.explain {
        (None, UnitLines::Explain)
    } else if verbosity.quiet {
        (None, UnitLines::None)
    } else if verbosity.verbose {
        (progress::bar(total_units, true), UnitLines::All)
    } else {
        (progress::bar(total_units, true), UnitLines::Work)
    };
    let builder = builder.with_observer(progress::observer(bar.as_ref(), lines));
    let out = builder.build_all_with_hosts(&specs, &hosts);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }

    let outcomes = callable_outcomes(&specs, &hosts, &out);
    let mut tally = Tally::default();
    for ((scene, result), outcome) in scenes.iter().zip(&out.callables).zip(&outcomes) {
        tally.add(*outcome);
        if *outcome == CallableOutcome::NotStarted {
            continue;
        }
        // A host program that does not build fails its scene.
        let host_failures: Vec<String> = hosts
            .iter()
            .zip(&out.hosts)
            .filter(|(host, _)| host.label == scene.name)
            .filter_map(|(host, result)| {
                let e = result.as_ref().err()?;
                Some(format!("host program `{}`: {e}", host.name))
            })
            .collect();
        match result {
            Ok(_) if !host_failures.is_empty() => {
                println!("FAIL {}", scene.name);
                for line in host_failures.iter().flat_map(|f| f.lines()) {
                    println!("    {line}");
                }
            }
            Ok(callable) => {
                // A callable served whole from the cache is counted in the
                // summary; its line only with `-v` (or `--explain`).
                let show = match outcome {
                    CallableOutcome::Cached => verbosity.verbose || setup.explain,
                    _ => !verbosity.quiet,
                };
                if show {
                    println!(
                        "ok {} ({} incores, digest {})",
                        scene.name,
                        callable.incores.len(),
                        callable.digest()
                    );
                }
            }
            Err(e) => {
                // BuildError names the scene, each failing kernel and the
                // compiler's own diagnostics.
                println!("FAIL {}", scene.name);
                for line in e.to_string().lines() {
                    println!("    {line}");
                }
            }
        }
    }
    // Malformed scenes never became callables but are still failures.
    for e in &load_errors {
        println!("FAIL {}", e.scene);
        for line in e.message.lines() {
            println!("    {line}");
        }
        tally.add(CallableOutcome::Failed);
    }
    let seconds = started.elapsed().as_secs_f64();
    unless_interrupted(&config.cancel, |what| {
        println!("{}", tally.interrupted_line(what, seconds));
    })?;
    println!("{}", tally.summary_line(seconds));
    CliError::unless(tally.failed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_has_the_documented_shape() {
        let t = Tally {
            cached: 2,
            compiled: 3,
            failed: 1,
            not_started: 0,
        };
        assert_eq!(
            t.summary_line(1.234),
            "compiled 6 callables: 2 cached, 3 compiled, 1 failed in 1.23 s"
        );
        let cut = Tally {
            not_started: 4,
            ..t
        };
        assert_eq!(
            cut.interrupted_line("interrupted (SIGINT)", 1.234),
            "interrupted (SIGINT): compiled 10 callables: 2 cached, 3 compiled, 1 failed, 4 not started in 1.23 s"
        );
    }
}
