//! Mixed tasks (orchestration ABI v4, `scene_orch_submit_mixed`): which
//! core threads form a cluster, which cluster a mixed block can run on,
//! and the cross-core flags the kernels of one block share
//! (`SceneClusterCtx`, `scene_cluster_signal` / `scene_cluster_wait`).
//!
//! Geometry: cluster `c` is cube thread `c` and vector threads `2c` and
//! `2c + 1` (those of them the device has), the original's
//! `{i, block_dim + i, 2 * block_dim + i}` numbering read per core type.
//! A mixed block needs, in one cluster and all idle at once, the cube
//! thread if it runs a cube kernel and one vector thread per vector
//! kernel; the scheduler (`sched.rs`) hands every kernel of the block to
//! its thread in one step, so they start together and may wait for each
//! other.
//!
//! `unsafe` (allowed per item): `Send`/`Sync` for the block (its contexts
//! point at itself), and reading a kernel's `SceneClusterCtx` pointer.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use scene_abi::*;

use super::lock;
use crate::hooks::PipeStates;

/// The name of a slot in messages and records.
pub fn slot_name(slot: u32) -> &'static str {
    match slot {
        SCENE_SLOT_AIC => "aic",
        SCENE_SLOT_AIV0 => "aiv0",
        SCENE_SLOT_AIV1 => "aiv1",
        _ => "unknown",
    }
}

/// What one block of a mixed task needs of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) aic: bool,
    /// Vector kernels: 0, 1 or 2.
    pub(super) aiv: u32,
}

impl Shape {
    pub(super) fn of_mask(mask: u32) -> Shape {
        Shape {
            aic: mask & (1 << SCENE_SLOT_AIC) != 0,
            aiv: ((mask >> SCENE_SLOT_AIV0) & 1) + ((mask >> SCENE_SLOT_AIV1) & 1),
        }
    }
}

/// Clusters of a device with `cores` threads per core type.
pub(super) fn clusters(cores: [u32; 2]) -> u32 {
    cores[SCENE_CORE_AIC as usize].max(cores[SCENE_CORE_AIV as usize].div_ceil(2))
}

/// The cluster a core thread belongs to.
pub(super) fn cluster_of(core: usize, lane: u32) -> u32 {
    if core == SCENE_CORE_AIC as usize {
        lane
    } else {
        lane / 2
    }
}

/// The vector threads of cluster `c` the device has.
pub(super) fn vector_lanes(cores: [u32; 2], c: u32) -> impl Iterator<Item = u32> {
    (2 * c..2 * c + 2).filter(move |&l| l < cores[SCENE_CORE_AIV as usize])
}

/// Whether cluster `c` has the threads `shape` needs (busy or not).
pub(super) fn can_serve(cores: [u32; 2], c: u32, shape: Shape) -> bool {
    (!shape.aic || c < cores[SCENE_CORE_AIC as usize])
        && vector_lanes(cores, c).count() as u32 >= shape.aiv
}

/// Whether any cluster of the device can run a block of `shape`.
pub(super) fn fits(cores: [u32; 2], shape: Shape) -> bool {
    (0..clusters(cores)).any(|c| can_serve(cores, c, shape))
}

/// How often a waiting kernel looks whether the run was abandoned.
const WAIT_SLICE: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct FlagState {
    /// Per slot, per flag: signals not yet taken.
    flags: [[u32; SCENE_CLUSTER_FLAGS as usize]; SCENE_SLOTS as usize],
    /// Slots whose kernel returned.
    returned: u32,
    /// Per slot: the flag its kernel is waiting for, if it is.
    awaiting: [Option<u32>; SCENE_SLOTS as usize],
    /// The first deadlock seen, for the run's error.
    error: Option<String>,
}

/// One block of a mixed task while it runs: the contexts its kernels get
/// and their flags. Shared by the block's kernels (each holds an `Arc`).
#[derive(Debug)]
pub(super) struct ClusterBlock {
    /// One per slot; `block` points at this value.
    ctxs: [SceneClusterCtx; SCENE_SLOTS as usize],
    mask: u32,
    /// func_id per slot, task and block: for messages.
    func_ids: [u32; SCENE_SLOTS as usize],
    task: usize,
    block: u32,
    state: Mutex<FlagState>,
    cv: Condvar,
    /// PTO-ISA's `TPUSH`/`TPOP` pipe states of this block (`hooks.rs`).
    pipes: PipeStates,
    /// `Shared::abandoned`: the run was given up at its deadline.
    abandoned: Arc<AtomicBool>,
}

#[allow(unsafe_code)]
// SAFETY: the raw pointers inside are the contexts' `block`, which point
// at the value itself (alive while any `Arc` of it is), and function
// pointers; everything mutable is behind `state`'s mutex.
unsafe impl Send for ClusterBlock {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`: shared access only reads immutable fields or
// goes through the mutex.
unsafe impl Sync for ClusterBlock {}

impl ClusterBlock {
    /// The shared state of block `block` of task `task`, whose slots in
    /// `mask` run the kernels `func_ids` (per slot).
    pub(super) fn new(
        abandoned: &Arc<AtomicBool>,
        task: usize,
        block: u32,
        mask: u32,
        func_ids: [u32; SCENE_SLOTS as usize],
    ) -> Arc<ClusterBlock> {
        Arc::new_cyclic(|me: &std::sync::Weak<ClusterBlock>| {
            let ctx = |slot: u32| SceneClusterCtx {
                slot,
                slot_mask: mask,
                block: me.as_ptr().cast_mut().cast::<c_void>(),
                signal: op_signal,
                wait: op_wait,
            };
            ClusterBlock {
                ctxs: [ctx(0), ctx(1), ctx(2)],
                mask,
                func_ids,
                task,
                block,
                state: Mutex::new(FlagState::default()),
                cv: Condvar::new(),
                pipes: PipeStates::default(),
                abandoned: Arc::clone(abandoned),
            }
        })
    }

    /// The pipe states its hosted kernels share.
    pub(super) fn pipes(&self) -> &PipeStates {
        &self.pipes
    }

    /// The context the kernel in `slot` gets.
    pub(super) fn ctx(&self, slot: u32) -> *const SceneClusterCtx {
        &self.ctxs[slot as usize]
    }

    /// The kernel in `slot` returned: a kernel waiting for it to signal
    /// may now be waiting for nobody. Returns the block's deadlock, if one
    /// was found.
    pub(super) fn returned(&self, slot: u32) -> Option<String> {
        let mut st = lock(&self.state);
        st.returned |= 1 << slot;
        self.cv.notify_all();
        st.error.clone()
    }

    fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    fn signal(&self, to: u32, flag: u32) -> i32 {
        if to >= SCENE_SLOTS || self.mask & (1 << to) == 0 || flag >= SCENE_CLUSTER_FLAGS {
            return SCENE_RT_E_INVALID;
        }
        let mut st = lock(&self.state);
        st.flags[to as usize][flag as usize] += 1;
        self.cv.notify_all();
        SCENE_RT_OK
    }

    fn wait(&self, slot: u32, flag: u32) -> i32 {
        if flag >= SCENE_CLUSTER_FLAGS {
            return SCENE_RT_E_INVALID;
        }
        let mut st = lock(&self.state);
        st.awaiting[slot as usize] = Some(flag);
        let status = loop {
            let f = &mut st.flags[slot as usize][flag as usize];
            if *f > 0 {
                *f -= 1;
                break SCENE_RT_OK;
            }
            if st.error.is_none() && self.stuck(&st) {
                let msg = format!(
                    "cross-core flag deadlock: the {} kernel (func_id {}) of block {} of task {} waits for its flag {flag}, and no kernel of the block is left to signal it (each has returned or waits itself; scene_cluster_wait needs a scene_cluster_signal of that flag to that slot)",
                    slot_name(slot),
                    self.func_ids[slot as usize],
                    self.block,
                    self.task
                );
                st.error = Some(msg);
                self.cv.notify_all();
            }
            if st.error.is_some() {
                break SCENE_RT_E_INVALID;
            }
            if self.abandoned() {
                break SCENE_RT_E_TIMEOUT;
            }
            st = self
                .cv
                .wait_timeout(st, WAIT_SLICE)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        st.awaiting[slot as usize] = None;
        status
    }

    /// Every kernel of the block has returned or waits for a flag nobody
    /// signalled: none can signal any more.
    fn stuck(&self, st: &FlagState) -> bool {
        (0..SCENE_SLOTS)
            .filter(|&s| self.mask & (1 << s) != 0)
            .all(|s| {
                st.returned & (1 << s) != 0
                    || st.awaiting[s as usize]
                        .is_some_and(|f| st.flags[s as usize][f as usize] == 0)
            })
    }
}

/// The block and slot behind a kernel's context.
fn resolve<'a>(ctx: *const SceneClusterCtx) -> Option<(&'a ClusterBlock, u32)> {
    #[allow(unsafe_code)]
    // SAFETY: kernels get `ctx` from `ClusterBlock::ctx`, whose `block` is
    // the `ClusterBlock` itself; the core thread running the kernel holds
    // an `Arc` of it for the whole call, and kernels may only use the
    // context during their call (scene_kernel.h).
    unsafe {
        let c = ctx.as_ref()?;
        let block = c.block.cast::<ClusterBlock>().cast_const().as_ref()?;
        (c.slot < SCENE_SLOTS).then_some((block, c.slot))
    }
}

extern "C" fn op_signal(ctx: *const SceneClusterCtx, to: u32, flag: u32) -> i32 {
    match resolve(ctx) {
        Some((block, _)) => block.signal(to, flag),
        None => SCENE_RT_E_INVALID,
    }
}

extern "C" fn op_wait(ctx: *const SceneClusterCtx, flag: u32) -> i32 {
    match resolve(ctx) {
        Some((block, slot)) => block.wait(slot, flag),
        None => SCENE_RT_E_INVALID,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_pair_one_cube_with_two_vector_threads() {
        let full = Shape { aic: true, aiv: 2 };
        let vec2 = Shape { aic: false, aiv: 2 };
        // 2 aic + 4 aiv: two whole clusters.
        assert_eq!(clusters([2, 4]), 2);
        assert!(can_serve([2, 4], 1, full));
        // 2 aic + 2 aiv: cluster 1 has no vector thread.
        assert!(can_serve([2, 2], 0, full));
        assert!(!can_serve([2, 2], 1, Shape { aic: true, aiv: 1 }));
        assert_eq!(vector_lanes([2, 3], 1).collect::<Vec<_>>(), vec![2]);
        // One vector thread cannot take a block of two vector kernels.
        assert!(!fits([4, 1], vec2));
        assert!(fits([0, 2], vec2));
        assert!(!fits([0, 2], full));
        assert_eq!(cluster_of(SCENE_CORE_AIV as usize, 3), 1);
        assert_eq!(Shape::of_mask(0b101), Shape { aic: true, aiv: 1 });
    }
}
