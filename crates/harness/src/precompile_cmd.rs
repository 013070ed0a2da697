//! `scene precompile`: pass 1 of a two-pass run. Everything that needs no
//! card (compile, fixtures, goldens) for every selected case, stored as a
//! bundle ([`crate::bundle`]) that `scene run --from` executes with nothing
//! but cards.
//!
//! Like `scene compile`, it builds with [`compile_builder`] (same toolchain,
//! specs and kernel cache as `scene run`) and never builds a `Session`: a
//! session owns a card pool, and pass 1 must run on machines with no card,
//! never touch a card lock and never load the runtime library.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use scene_kernels::CallableSpec;

use crate::bundle::BundleWriter;
use crate::cli::{Layout, Prologue, Selection, parse_workers, prologue};
use crate::golden::GoldenRegistry;
use crate::pipeline::{
    RunConfig, SelectedCase, build_fixtures, callable_spec, compile_builder, compute_golden,
    distinct_scenes, scalar_bits,
};

#[derive(Debug, Args)]
pub struct PrecompileArgs {
    #[command(flatten)]
    pub(crate) selection: Selection,
    /// Bundle directory to write (replaced atomically if it is a bundle already).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Bound on live compiler/linker processes across all selected scenes [default: available parallelism].
    #[arg(long, env = "SCENE_COMPILE_WORKERS", value_name = "N", value_parser = parse_workers)]
    pub(crate) compile_workers: Option<NonZeroUsize>,
    /// Print only failures and the summary.
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

/// Runs `scene precompile`. Exit 0 when every selected case was stored,
/// 1 when any failed (the others are still stored), 2 when no bundle could
/// be written at all.
pub(crate) fn run(layout: &Layout, registry: GoldenRegistry, args: &PrecompileArgs) -> ExitCode {
    let started = Instant::now();
    let Prologue {
        cases,
        load_errors,
        config,
    } = match prologue(layout, &args.selection, args.compile_workers) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // Checked before compiling: a bad `--out` should fail in a second.
    let mut writer = match BundleWriter::create(&args.out, &config.platform) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: --out: {e}");
            return ExitCode::from(2);
        }
    };
    let builder = match compile_builder(&config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let golden_pool = match scene_golden::reference::try_golden_pool(config.golden_threads) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: golden thread pool: {e}");
            return ExitCode::from(1);
        }
    };

    // One plan for every scene, on one worker budget.
    let used = distinct_scenes(&cases);
    let specs: Vec<CallableSpec> = used
        .iter()
        .map(|s| callable_spec(s, &config.root, &config.abi_include_dir))
        .collect();
    let built = builder.build_all(&specs);

    let mut failed = load_errors;
    for c in &cases {
        let callable = used
            .iter()
            .position(|s| s.name == c.scene.name)
            .and_then(|i| built.callables.get(i));
        let stored = match callable {
            Some(Ok(callable)) => {
                store_case(&mut writer, &config, &registry, &golden_pool, c, callable)
            }
            Some(Err(e)) => Err(format!("compile: {e}")),
            None => Err("compile: scene was not part of the compile plan".to_string()),
        };
        match stored {
            Ok(()) => {
                if !args.quiet {
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

/// Fixtures, scalars and golden of one case, stored with its callable.
fn store_case(
    writer: &mut BundleWriter,
    config: &RunConfig,
    registry: &GoldenRegistry,
    golden_pool: &rayon::ThreadPool,
    sel: &SelectedCase,
    callable: &scene_kernels::ChipCallable,
) -> Result<(), String> {
    let scene = &sel.scene;
    let case = sel.case();
    let inputs = build_fixtures(scene, case).map_err(|e| format!("fixtures: {e}"))?;
    let scalars = scalar_bits(scene, case).map_err(|e| format!("fixtures: {e}"))?;
    let golden = compute_golden(
        registry,
        golden_pool,
        config.golden_threads,
        scene,
        case,
        &inputs,
    )?;
    for spec in scene.tensors.iter().filter(|t| t.direction.is_output()) {
        if golden.get(&spec.name).is_none() {
            return Err(format!(
                "golden `{}` returned no value for output tensor `{}`",
                scene.golden, spec.name
            ));
        }
    }
    writer
        .add_slot(sel, callable, &inputs, &scalars, &golden)
        .map_err(|e| format!("storing: {e}"))
}
