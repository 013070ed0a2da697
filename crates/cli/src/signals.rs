//! SIGINT and SIGTERM for `scene run`, `compile` and `precompile`.
//!
//! The handler is installed once, at the command's entry, through
//! `signal-hook` (its self-pipe; no `unsafe` here). A thread waits for the
//! signals and turns the first one into [`Cancel::cancel`]: the engine
//! stops starting work, its child processes (compilers, device workers,
//! the Python worker, each in a process group of its own) are terminated,
//! and the command unwinds normally, so temp dirs go, card locks are
//! released and a partial summary is printed; it then exits 128 + the
//! signal (130, 143). Children still alive [`KILL_GRACE`] after the signal
//! (one that ignores `SIGTERM`) get `SIGKILL`. A second signal, as in
//! cargo, kills the children and
//! exits at once: the kernel cache stays whole (entries are only ever
//! published by rename), at worst leaving staging directories that the
//! cache's leftover sweep removes.

use std::io::Write;
use std::time::Duration;

use scene_util::Cancel;
use scene_util::cancel::{SIGINT, SIGTERM, exit_status_for, signal_name};

use crate::error::CliError;

/// How long children may take to end after `SIGTERM` before they are
/// killed.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(10);

/// Starts the signal thread for `cancel`. Without it (the handler could
/// not be installed) the signals keep their default action, after one
/// warning.
pub(crate) fn install(cancel: &Cancel) {
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: cannot handle SIGINT/SIGTERM ({e}); an interrupt stops at once");
            return;
        }
    };
    let cancel = cancel.clone();
    let spawned = std::thread::Builder::new()
        .name("scene-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if cancel.cancel(signal) {
                    // Not `eprintln!`: a closed stderr must not end this
                    // thread (the second signal would go unheard).
                    let _ = writeln!(
                        std::io::stderr(),
                        "interrupted ({}): stopping and cleaning up (again to exit at once)",
                        signal_name(signal)
                    );
                    let cancel = cancel.clone();
                    // A timeout, not a synchronisation: whatever ignored
                    // SIGTERM is killed so the run can unwind.
                    let _ = std::thread::Builder::new()
                        .name("scene-kill-grace".into())
                        .spawn(move || {
                            std::thread::sleep(KILL_GRACE);
                            cancel.kill_all();
                        });
                } else {
                    cancel.kill_all();
                    signal_hook::low_level::exit(i32::from(exit_status_for(signal)));
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: cannot handle SIGINT/SIGTERM ({e}); an interrupt stops at once");
        // The handlers are in place but nobody listens: make a signal end
        // the process at once, as without them.
        for signal in [SIGINT, SIGTERM] {
            let now = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
            let _ = signal_hook::flag::register_conditional_shutdown(
                signal,
                i32::from(exit_status_for(signal)),
                now,
            );
        }
    }
}

/// `interrupted (SIGINT)` and the error that exits 130 / 143, when
/// `cancel` was cancelled.
pub(crate) fn interrupted(cancel: &Cancel) -> Option<(String, CliError)> {
    let signal = cancel.signal()?;
    Some((
        format!("interrupted ({})", signal_name(signal)),
        CliError::Interrupted(signal),
    ))
}
