//! A level-3 session: one device per rank, a communication domain over
//! them, every rank's run on its own thread at the same time.
//!
//! Open and stage every rank (register, upload), create the domain, run
//! the ranks concurrently (a rank that waits for a peer cannot block the
//! peer: each has its own thread and its own emulated cores), destroy the
//! domain, then download and close. The runtime makes every rank of a
//! failed group fail: the failed rank with its own error, the others with
//! the group's first message; the session's error is a card failure
//! (timeout, fatal) if any, else that message.

use std::time::{Duration, Instant};

use crate::job::{self, DeviceJob, GroupJob, SessionError, SessionOutput};
use crate::runtime::{DeviceSession, Runtime};

/// Runs `job` as the rank group `group` (see [`GroupJob`]).
pub(crate) fn run_group(
    runtime: &Runtime,
    job: &DeviceJob<'_>,
    group: &GroupJob,
) -> Result<SessionOutput, SessionError> {
    let ranks = group.ranks as usize;
    let setup = |message: String| SessionError {
        what: "setting up the rank group".into(),
        status: None,
        message,
        device_fatal: false,
    };
    if ranks == 0 || !job.args.len().is_multiple_of(ranks) {
        return Err(setup(format!(
            "{} arguments do not split into {ranks} ranks",
            job.args.len()
        )));
    }
    if group.cards.len() != ranks {
        return Err(setup(format!(
            "{ranks} ranks but {} cards held ({:?})",
            group.cards.len(),
            group.cards
        )));
    }
    let per_rank = job.args.len() / ranks;
    let rank_args: Vec<_> = job.args.chunks(per_rank).collect();
    let names: Vec<Vec<Option<String>>> = rank_args
        .iter()
        .map(|a| {
            a.iter()
                .map(|x| match x {
                    job::JobArg::Tensor(t) => Some(t.name.to_owned()),
                    job::JobArg::Scalar(_) => None,
                })
                .collect()
        })
        .collect();
    let started = Instant::now();
    let mut devices: Vec<DeviceSession<'_>> = Vec::with_capacity(ranks);
    for (rank, &card) in group.cards.iter().enumerate() {
        devices.push(runtime.open(card, job.options).map_err(|e| {
            SessionError::new(
                format!("opening card {card} (rank {rank})"),
                e,
                &names[rank],
            )
        })?);
    }
    let mut staged = Vec::with_capacity(ranks);
    for (rank, device) in devices.iter().enumerate() {
        staged.push(
            job::stage(device, &job.callable, rank_args[rank], &names[rank])
                .map_err(|e| in_rank(e, rank))?,
        );
    }
    let refs: Vec<&DeviceSession<'_>> = devices.iter().collect();
    let comm = runtime
        .comm_create(&refs, group.window_size, &group.comm_options)
        .map_err(|e| SessionError::new("creating the communication domain", e, &[]))?;
    let results: Vec<(Result<(), SessionError>, Duration)> = std::thread::scope(|s| {
        let threads: Vec<_> = devices
            .iter_mut()
            .zip(&staged)
            .zip(&names)
            .enumerate()
            .map(|(rank, ((device, st), names))| {
                let device: &mut DeviceSession<'_> = device;
                std::thread::Builder::new()
                    .name(format!("scene-rank{rank}"))
                    .spawn_scoped(s, move || {
                        let t = Instant::now();
                        let r = device
                            .run_described(st.handle, &st.args, &st.descs)
                            .map_err(|e| SessionError::new(format!("rank {rank}: run"), e, names));
                        (r, t.elapsed())
                    })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| match t {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    (Err(setup("a rank thread panicked".into())), Duration::ZERO)
                }),
                Err(e) => (
                    Err(setup(format!("cannot start a rank thread: {e}"))),
                    Duration::ZERO,
                ),
            })
            .collect()
    });
    let _ = comm.destroy();
    let times: Vec<Duration> = results.iter().map(|(_, t)| *t).collect();
    let mut errors: Vec<SessionError> = results.into_iter().filter_map(|(r, _)| r.err()).collect();
    // A card's failure first (a timeout or a fatal device: the harness
    // retires the card), then the group's communication message (it names
    // the first cause), then the rest; lowest rank first within each.
    errors.sort_by_key(|e| {
        if e.device_fatal || e.is_timeout() {
            0
        } else if e.status == Some(scene_abi::SCENE_RT_E_COMM) {
            1
        } else {
            2
        }
    });
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut outputs = Vec::new();
    for (rank, (device, st)) in devices.iter().zip(staged).enumerate() {
        outputs.extend(job::collect(device, st, &names[rank]).map_err(|e| in_rank(e, rank))?);
    }
    drop(devices);
    Ok(SessionOutput {
        outputs,
        session: started.elapsed(),
        ranks: times,
    })
}

fn in_rank(mut e: SessionError, rank: usize) -> SessionError {
    e.what = format!("rank {rank}: {}", e.what);
    e
}
