//! `scene replay DIR TASK` (issue 19): one task recorded by `scene run
//! --dump-args`, run again alone; see `scene_harness::replay`.
//!
//! Exit codes: 0 = the outputs match the recording bit for bit, 1 = they
//! differ (each differing output named), 2 = the replay could not run
//! (not a dump, unknown task id, the scene missing, the kernel no longer
//! compiling, a device error).

use std::path::Path;
use std::process::ExitCode;

use scene_harness::replay::{ReplayRequest, replay};

use crate::Layout;
use crate::args::ReplayArgs;
use crate::env::{Environment, Flags, resolve};

pub(crate) fn run(
    layout: &Layout,
    env: &Environment,
    cache_dir: Option<&Path>,
    args: &ReplayArgs,
) -> ExitCode {
    let fail = |m: String| {
        eprintln!("error: {m}");
        ExitCode::from(2)
    };
    if !args.dir.is_dir() {
        return fail(format!(
            "{}: no such directory (give a case's directory under the --dump-args root, e.g. target/scene-args/<scene>/<case>)",
            args.dir.display()
        ));
    }
    // The platform the task was recorded on (a bad manifest is reported
    // by the replay itself).
    let platform = scene_harness::args_dump::read_manifest(&args.dir)
        .ok()
        .and_then(|m| m.platform.parse().ok());
    let flags = Flags {
        platform,
        devices: args.device.clone(),
        runtime: args.runtime.clone(),
        case_timeout: args.case_timeout,
        in_process: args.in_process,
        uses_cards: true,
        ..Flags::default()
    };
    let mut config = match resolve(layout, env, cache_dir, &flags) {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    if let Err(e) = crate::paths::check_config_dirs(&mut config, true) {
        return fail(e.to_string());
    }
    let req = ReplayRequest {
        dir: args.dir.clone(),
        task: args.task.clone(),
        scene_dir: args.scene.clone(),
    };
    let result = replay(&config, &req);
    if let Ok(r) = &result
        && let Some(note) = &r.note
    {
        eprintln!("note: {note}");
    }
    match result {
        Ok(report) if report.matches() => {
            println!("{}", report.summary());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            println!("{}", report.summary());
            ExitCode::from(1)
        }
        Err(e) => fail(e.to_string()),
    }
}
