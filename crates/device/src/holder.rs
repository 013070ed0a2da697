//! The holder record of a card lock file: who holds the card, since when.
//!
//! Its own module because both the lock code (writes and reads it) and the
//! errors (a lock timeout names the holder) need it, and neither should
//! depend on the other for it.

use std::fmt;

/// Who holds a card, as recorded in its lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    pub pid: u32,
    /// Free-form label given to [`CardPool::acquire`](crate::CardPool::acquire), e.g. a case name.
    pub label: String,
    /// Unix time (seconds) the lease was acquired.
    pub acquired_unix: u64,
}

impl HolderInfo {
    pub(crate) fn render(&self) -> String {
        format!(
            "pid={}\nholder={}\nacquired={}\n",
            self.pid, self.label, self.acquired_unix
        )
    }

    pub(crate) fn parse(text: &str) -> Option<HolderInfo> {
        let mut pid = None;
        let mut label = String::new();
        let mut acquired_unix = 0;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", v)) => pid = v.trim().parse().ok(),
                Some(("holder", v)) => label = v.to_owned(),
                Some(("acquired", v)) => acquired_unix = v.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        Some(HolderInfo {
            pid: pid?,
            label,
            acquired_unix,
        })
    }
}

impl fmt::Display for HolderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.label.is_empty() {
            write!(f, "pid {}", self.pid)
        } else {
            write!(f, "pid {} ({})", self.pid, self.label)
        }
    }
}
