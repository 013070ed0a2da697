//! `scene precompile`: pass 1 of a two-pass run. The CPU stages of every
//! selected case (compile, fixtures, goldens), exactly as `scene run` runs
//! them ([`CpuStages`]), stored as a bundle that `scene run --from`
//! executes with nothing but cards.
//!
//! It never builds a `Session`: a session owns a card pool, and pass 1 must
//! run on machines with no card, never touch a card lock and never load the
//! runtime library.

use std::time::Instant;

use scene_harness::bundle::BundleWriter;
use scene_harness::report::FailureStage;
use scene_harness::{CpuStages, GoldenRegistry};

use crate::Layout;
use crate::error::{CliError, UsageError};
use crate::hiargs::PrecompileSetup;
use crate::output::Verbosity;
use crate::prologue::{Prologue, prologue};

/// Runs `scene precompile`. Exit 0 when every selected case was stored,
/// 1 when any failed (the others are still stored), 2 when no bundle could
/// be written at all, 3 when a tool it needs is missing, 130/143 when
/// interrupted (then no bundle is written: the staging directory is
/// removed and `--out` keeps what it held).
pub(crate) fn run(
    layout: &Layout,
    registry: GoldenRegistry,
    verbosity: Verbosity,
    setup: &PrecompileSetup,
) -> Result<(), CliError> {
    let started = Instant::now();
    let Prologue {
        cases,
        load_errors,
        config,
    } = prologue(layout, &setup.engine, Some(&registry))?;
    let cancel = config.cancel.clone();
    // Checked before compiling: a bad `--out` should fail in a second.
    let mut writer =
        BundleWriter::create(&setup.out, config.platform.name()).map_err(UsageError::Out)?;
    let cpu = CpuStages::new(config, registry)?;
    match cpu.check_python(&cases) {
        Ok(()) => {}
        // The interrupt's (see `scene run`): nothing below starts, and the
        // command ends interrupted.
        Err(_) if cancel.is_cancelled() => {}
        Err(e) => return Err(CliError::Python(e.into())),
    }

    // One plan for every scene, on one worker budget.
    let compiled = cpu.compile(&cases);
    let mut failed = load_errors.len();
    for e in &load_errors {
        println!("FAIL {}::load", e.scene);
        for line in e.message.lines() {
            println!("    {line}");
        }
    }
    let mut done = 0;
    for c in &cases {
        if cancel.is_cancelled() {
            break;
        }
        let prepared = cpu.prepare(c, &compiled);
        // A failure while cancelling is the cancellation's.
        if prepared.is_err() && cancel.is_cancelled() {
            break;
        }
        done += 1;
        let stored = match prepared {
            // The C host functions (level-3 `[[steps]]`) `prepare` built:
            // the bundle carries them, so pass 2 needs no compiler.
            Ok(p) => cpu
                .host_executables(c)
                .map_err(|e| e.to_string())
                .and_then(|exes| {
                    exes.into_iter()
                        .map(|(step, exe)| {
                            std::fs::read(&exe)
                                .map(|bytes| (step, bytes))
                                .map_err(|e| format!("storing {}: {e}", exe.display()))
                        })
                        .collect()
                })
                .and_then(|hosts| {
                    writer
                        .add_slot(c, &p.callable, &p.inputs, &p.scalars, &p.golden, &hosts)
                        .map_err(|e| format!("storing: {e}"))
                }),
            Err(report) => {
                // Kept in the bundle: pass 2 fails the case with this
                // cause rather than rebuilding it.
                let stage = report.failure_stage.unwrap_or(FailureStage::Compile);
                let message = report.message.as_deref().unwrap_or("failed");
                writer.add_failure(c, stage, message);
                Err(failure_text(&report))
            }
        };
        match stored {
            Ok(()) => {
                if !verbosity.quiet {
                    println!("ok {}", c.id());
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}", c.id());
                for line in e.lines() {
                    println!("    {line}");
                }
            }
        }
    }
    let slots = writer.slots();
    if let Some((what, interrupted)) = crate::signals::interrupted(&cancel) {
        // Dropping the writer removes its staging directory (before the
        // line that says so).
        drop(writer);
        println!(
            "{what}: precompiled {done} of {} cases ({slots} stored, {failed} failed, {} not run); no bundle written, {} left as it was",
            cases.len(),
            cases.len() - done,
            setup.out.display(),
        );
        return Err(interrupted);
    }
    let path = writer.commit().map_err(CliError::WriteBundle)?;
    println!(
        "precompiled {} cases into {}: {slots} stored, {failed} failed in {:.2} s",
        cases.len(),
        path.display(),
        started.elapsed().as_secs_f64()
    );
    CliError::unless(failed > 0)
}

/// A failed preparation as precompile words it: `compile: ...`,
/// `fixtures: ...`, or the golden's own message.
fn failure_text(report: &scene_harness::CaseReport) -> String {
    let message = report.message.as_deref().unwrap_or("failed");
    match report.failure_stage {
        Some(stage @ (FailureStage::Compile | FailureStage::Fixtures)) => {
            format!("{stage}: {message}")
        }
        _ => message.to_string(),
    }
}
