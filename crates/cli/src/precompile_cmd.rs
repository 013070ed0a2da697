//! `scene precompile`: pass 1 of a two-pass run. The CPU stages of every
//! selected case (compile, fixtures, goldens), exactly as `scene run` runs
//! them ([`CpuStages`]), stored as a bundle that `scene run --from`
//! executes with nothing but cards.
//!
//! It never builds a `Session`: a session owns a card pool, and pass 1 must
//! run on machines with no card, never touch a card lock and never load the
//! runtime library.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use scene_harness::bundle::BundleWriter;
use scene_harness::report::FailureStage;
use scene_harness::{CpuStages, GoldenRegistry};

use crate::args::{PrecompileArgs, cpu_flags};
use crate::env::{Environment, Flags};
use crate::prologue::{Prologue, prologue};
use crate::{Layout, Verbosity};

/// Runs `scene precompile`. Exit 0 when every selected case was stored,
/// 1 when any failed (the others are still stored), 2 when no bundle could
/// be written at all, 3 when a tool it needs is missing, 130/143 when
/// interrupted (then no bundle is written: the staging directory is
/// removed and `--out` keeps what it held).
pub(crate) fn run(
    layout: &Layout,
    env: &Environment,
    cache_dir: Option<&Path>,
    registry: GoldenRegistry,
    verbosity: Verbosity,
    args: &PrecompileArgs,
    cancel: &scene_util::Cancel,
) -> ExitCode {
    let started = Instant::now();
    if let Err(e) = crate::paths::check_dir("--out", &args.out) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let flags = Flags {
        max_case_bytes: args.max_case_bytes,
        no_golden_cache: args.no_golden_cache,
        no_provision: args.no_provision,
        ..cpu_flags(&args.selection, args.compile_workers)
    };
    let Prologue {
        cases,
        load_errors,
        mut config,
    } = match prologue(
        layout,
        env,
        cache_dir,
        Some(&registry),
        &args.selection,
        &flags,
        args.no_tests,
    ) {
        Ok(p) => p,
        Err(code) => return code,
    };
    config.cancel = cancel.clone();
    // Checked before compiling: a bad `--out` should fail in a second.
    let mut writer = match BundleWriter::create(&args.out, config.platform.name()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: --out: {e}");
            return ExitCode::from(2);
        }
    };
    let cpu = match CpuStages::new(config, registry) {
        Ok(c) => c,
        Err(e) => return crate::setup::fail(&crate::setup::message(&e)),
    };
    if let Err(e) = cpu.check_python(&cases) {
        return crate::setup::fail(&e.to_string());
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
            Ok(p) => writer
                .add_slot(c, &p.callable, &p.inputs, &p.scalars, &p.golden)
                .map_err(|e| format!("storing: {e}")),
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
    if let Some((what, code)) = crate::signals::interrupted(cancel) {
        // Dropping the writer removes its staging directory.
        drop(writer);
        println!(
            "{what}: precompiled {done} of {} cases ({slots} stored, {failed} failed, {} not run); no bundle written, {} left as it was",
            cases.len(),
            cases.len() - done,
            args.out.display(),
        );
        return code;
    }
    let path = match writer.commit() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: writing the bundle: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "precompiled {} cases into {}: {slots} stored, {failed} failed in {:.2} s",
        cases.len(),
        path.display(),
        started.elapsed().as_secs_f64()
    );
    ExitCode::from(if failed == 0 { 0 } else { 1 })
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
