//! The versions of an interpreter that Python cache keys record, and the
//! part of a key they make: read from its distribution metadata (one short
//! `python -c`, no numpy or torch import), so a run served wholly by the
//! caches starts no worker.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{DRIVER, PyError, PythonRunner, Versions, WorkerFor, provision};
use crate::scene::Scene;

impl PythonRunner {
    /// The versions of `scene`'s interpreter, as the cache keys record
    /// them: from its distribution metadata (one short `python -c`, no
    /// worker: a run served wholly by the caches imports neither numpy nor
    /// torch), memoised per interpreter. The worker's own `hello` answers
    /// when the metadata does not (no numpy distribution: the worker's
    /// start then says what is wrong).
    pub fn versions(&self, scene: &Scene) -> Result<Versions, PyError> {
        self.versions_for(&WorkerFor::scene(scene))
    }

    /// [`Self::versions`] of the interpreter `who` runs on.
    pub(super) fn versions_for(&self, who: &WorkerFor<'_>) -> Result<Versions, PyError> {
        let interp = self.interpreter_for(who)?;
        if let Some(v) = self.lock_versions().get(&interp.python).cloned() {
            return Ok(v);
        }
        if self.cancel.is_cancelled() {
            return Err(PyError::Interrupted);
        }
        let v = match provision::metadata_versions(&interp.python, &self.cancel) {
            Ok(md) if md.numpy.is_some() => Versions {
                python: md.python,
                numpy: md.numpy.unwrap_or_default(),
                torch: md.torch,
                packages: md.packages,
            },
            _ => self.with_worker_for(who, |w| Ok(w.versions.clone()))?,
        };
        self.lock_versions()
            .insert(interp.python.clone(), v.clone());
        Ok(v)
    }

    /// Adds what a Python cache key takes from `scene`'s interpreter to
    /// `h`: the driver, the [`Self::versions`] and, for a managed
    /// environment, every pinned version (`requirements.lock`).
    pub fn hash_environment(
        &self,
        scene: &Scene,
        h: &mut scene_util::FieldHasher,
    ) -> Result<(), PyError> {
        self.hash_environment_for(&WorkerFor::scene(scene), h)
    }

    pub(super) fn hash_environment_for(
        &self,
        who: &WorkerFor<'_>,
        h: &mut scene_util::FieldHasher,
    ) -> Result<(), PyError> {
        let v = self.versions_for(who)?;
        h.field("driver", DRIVER.as_bytes())
            .field("python", v.python.as_bytes())
            .field("numpy", v.numpy.as_bytes())
            .field("torch", v.torch.as_deref().unwrap_or("").as_bytes())
            .field("packages", v.packages.join("\n").as_bytes());
        // Only for managed environments: keys of interpreters used as they
        // are stay what they were.
        if let Some(env) = self.interpreter_for(who)?.env {
            h.field("lock", env.lock.as_bytes());
        }
        Ok(())
    }

    fn lock_versions(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Versions>> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner())
    }
}
