//! `scene replay DIR TASK` (issue 19): one task recorded by `scene run
//! --dump-args`, run again alone; see `scene_harness::replay`.
//!
//! Exit codes: 0 = the outputs match the recording bit for bit, 1 = they
//! differ (each differing output named), 2 = the replay could not run
//! (not a dump, unknown task id, the scene missing, the kernel no longer
//! compiling, a device error).

use scene_harness::replay::replay;

use crate::error::CliError;
use crate::hiargs::ReplaySetup;

pub(crate) fn run(setup: &ReplaySetup) -> Result<(), CliError> {
    let result = replay(&setup.config, &setup.request);
    if let Ok(r) = &result
        && let Some(note) = &r.note
    {
        eprintln!("note: {note}");
    }
    let report = result?;
    println!("{}", report.summary());
    CliError::unless(!report.matches())
}
