//! What a build reports: per-unit progress and per-callable results.

use std::sync::Arc;
use std::time::Duration;

use crate::cache::MissReason;
use crate::error::BuildError;
use crate::key::UnitKey;
use crate::unit::{ChipCallable, CoreType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitKind {
    Incore {
        func_id: u32,
        core: CoreType,
    },
    Orchestration,
    /// A host program's executable ([`crate::HostUnit`]).
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitOutcome {
    /// The compiler ran; [`UnitReport::miss`] says why.
    Compiled,
    /// Taken from an earlier build of the same `Builder` (in-process memo).
    Reused,
    /// Taken from the persistent cache (verified before use).
    Cached,
    Failed,
    /// Not built: the run was cancelled before or while its tools ran
    /// ([`crate::BuildOptions::cancel`]).
    Cancelled,
}

/// One compiled (or reused, or failed) unit. A unit shared by several
/// callables is reported once, under the first name it was seen with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitReport {
    /// `<label>/<name>`, e.g. `vector_example/add`.
    pub unit: String,
    pub kind: UnitKind,
    pub outcome: UnitOutcome,
    /// Compile time for `Compiled`, lookup time for `Cached`.
    pub duration: Duration,
    /// The unit's content key, when it could be computed.
    pub key: Option<UnitKey>,
    /// Why the compiler had to run: set for `Compiled` (and for `Failed`
    /// units that reached the compiler), `None` otherwise. Render it with
    /// `Display` (e.g. for `scene compile --explain`).
    pub miss: Option<MissReason>,
    /// A `Cached` unit that came from the remote tier (verified, then
    /// copied into the local one): a "remote hit".
    pub remote: bool,
    /// Why the compiler's own dependency list could not back this unit
    /// (the key's include scanner was the only check of its headers);
    /// `None` when it did (see [`crate::deps`]). For `--explain`.
    pub deps_unchecked: Option<String>,
}

/// Called as each unit finishes, from the thread that called `build_all`.
pub type Observer = Arc<dyn Fn(&UnitReport) + Send + Sync>;

#[derive(Debug)]
pub struct BuildOutput {
    /// In the order of the specs given.
    pub callables: Vec<Result<Arc<ChipCallable>, BuildError>>,
    /// In plan order (specs in order, orchestration first, then incores,
    /// then the host programs), independent of which worker finished first.
    pub units: Vec<UnitReport>,
    /// Parallel to the host programs given to
    /// [`crate::Builder::build_all_with_hosts`]: each one's executable.
    pub hosts: Vec<Result<Arc<Vec<u8>>, Arc<crate::error::CompileError>>>,
}

impl BuildOutput {
    pub fn count(&self, outcome: UnitOutcome) -> usize {
        self.units.iter().filter(|u| u.outcome == outcome).count()
    }
}
