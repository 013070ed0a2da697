//! The bound on live tool processes (compilers, linkers, `--version`
//! probes) of one builder, whoever starts them.

use std::sync::{Condvar, Mutex, PoisonError};

/// A counting semaphore over tool-process slots.
#[derive(Debug)]
pub(crate) struct Budget {
    free: Mutex<usize>,
    freed: Condvar,
}

/// One slot of a [`Budget`], given back on drop.
pub(crate) struct BudgetSlot<'a>(&'a Budget);

impl Budget {
    pub(crate) fn new(slots: usize) -> Self {
        Self {
            free: Mutex::new(slots),
            freed: Condvar::new(),
        }
    }

    pub(crate) fn take(&self) -> BudgetSlot<'_> {
        // The count stays consistent even if a holder panicked.
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        BudgetSlot(self)
    }
}

impl Drop for BudgetSlot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}
