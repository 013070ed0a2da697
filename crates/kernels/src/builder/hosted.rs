//! Hosted incores in the builder (issue 29): the hosted compiler's probe,
//! and compiling from a precompiled preamble (see `crate::preamble`).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::Builder;
use crate::cache::{Lookup, Tier};
use crate::compile;
use crate::deps::{self, Deps};
use crate::error::CompileError;
use crate::key::{EntryKind, KeyInputs, UnitKey};
use crate::preamble::{self, Preamble};
use crate::unit::IncoreUnit;

impl Builder {
    /// A hosted incore's shared object, compiled from its precompiled
    /// preamble when it has one (returned with the bytes).
    pub(super) fn build_hosted(
        &self,
        unit: &IncoreUnit,
        key: UnitKey,
        dep_file: Option<&Path>,
    ) -> Result<(Vec<u8>, Option<Arc<BuiltPreamble>>), CompileError> {
        self.hosted_probe
            .get_or_init(|| self.probe_hosted().map_err(Arc::new))
            .clone()
            .map_err(CompileError::Shared)?;
        let out = self.scratch_file(key, "so");
        let tc = self.hosted(unit);
        let compile = |pch: Option<(&BuiltPreamble, &Path)>| {
            let pch = pch.map(|(built, copy)| compile::PchUse {
                header: &built.header,
                copy,
            });
            compile::compile_hosted(&tc, &self.root, unit, pch, &out, dep_file, &self.cancel)
        };
        let Some((slot, copy)) = self.preamble_of(unit, key) else {
            return Ok((compile(None)?, None));
        };
        let Some(built) = slot.get(self, unit, None) else {
            return Ok((compile(None)?, None));
        };
        match compile(Some((&built, &copy))) {
            Ok(bytes) => Ok((bytes, Some(built))),
            // clang checks the mtimes of the headers a PCH was built from:
            // a cached one is refused after a touch or in another
            // checkout of the same files. Rebuilt here, once.
            Err(e) if !built.fresh && refuses_pch(&e) => match slot.get(self, unit, Some(&built)) {
                Some(rebuilt) => {
                    let bytes = compile(Some((&rebuilt, &copy)))?;
                    Ok((bytes, Some(rebuilt)))
                }
                None => Ok((compile(None)?, None)),
            },
            Err(e) => Err(e),
        }
    }

    /// The hosted compiler's probe ([`compile::probe_hosted`]), run once
    /// per compiler, flags and probe: its success is remembered in the
    /// cache's `tools/` beside `--version` outputs (a PTO probe costs
    /// ~2 s of `zig c++`, which every process that compiles one hosted
    /// kernel would otherwise pay again).
    fn probe_hosted(&self) -> Result<(), CompileError> {
        let tc = self.isolated();
        let text = compile::hosted_probe_text(tc);
        let passed = self.cache.as_ref().filter(|c| c.is_enabled()).map(|cache| {
            let id = self.keys.tool(&tc.hosted_cxx, tc.search_path.as_deref());
            let mut h = blake3::Hasher::new();
            for part in [
                &id.path,
                &id.digest,
                &id.version,
                &tc.hosted_flags.join("\0"),
                &text,
            ] {
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            cache
                .dir()
                .join("tools")
                .join(format!("hosted-probe-{}.ok", h.finalize().to_hex()))
        });
        if passed.as_ref().is_some_and(|p| p.is_file()) {
            return Ok(());
        }
        compile::probe_hosted(tc, &text, self.scratch_dir(), &self.cancel)?;
        if let Some(passed) = passed {
            // Best effort: without it the next process probes again.
            let _ = std::fs::create_dir_all(passed.parent().unwrap_or(&self.root))
                .and_then(|()| scene_util::write_atomically(&passed, b"ok\n"));
        }
        Ok(())
    }

    /// The slot of `unit`'s precompiled preamble and the source's copy
    /// with that preamble blanked, when the toolchain uses preambles and
    /// the source opens with one.
    fn preamble_of(&self, unit: &IncoreUnit, key: UnitKey) -> Option<(Arc<PreambleSlot>, PathBuf)> {
        // The unit's own flags (a PCH is refused with others).
        let tc = self.hosted(unit);
        if !tc.hosted_pch || tc.include_roots.is_empty() {
            return None;
        }
        // Unreadable or not UTF-8: the plain compile says what is wrong.
        let text = std::fs::read_to_string(self.root.join(&unit.source)).ok()?;
        let in_root = |name: &str| tc.include_roots.iter().any(|r| r.join(name).is_file());
        let found = preamble::find(&text, in_root)?;
        let inputs = self
            .keys
            .preamble_inputs(self.schema, &tc, &self.root, unit, &found.text)
            .ok()?;
        let pkey = inputs.key();
        // The copy sits alone in its directory: `#include "x"` looks
        // beside the file first, and must find nothing there.
        let dir = self.scratch_file(key, "src");
        std::fs::create_dir(&dir).ok()?;
        let copy = dir.join(unit.source.file_name()?);
        let presumed = unit.source.to_string_lossy();
        std::fs::write(&copy, preamble::blanked(&text, found.lines, &presumed)).ok()?;
        let slot = self
            .preambles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(pkey)
            .or_insert_with(|| {
                Arc::new(PreambleSlot {
                    key: pkey,
                    preamble: found,
                    inputs,
                    built: Mutex::new(None),
                })
            })
            .clone();
        Some((slot, copy))
    }

    /// Writes the preamble into a fresh scratch directory and gets its
    /// PCH beside it: from the support-object tier (verified, its
    /// recorded headers unchanged) unless `reuse` is false, else compiled
    /// (and published, replacing what was there).
    ///
    /// clang refuses a PCH whose input files are gone or changed since, by
    /// path, size and mtime. So the PCH is compiled from a copy of the
    /// preamble at a path that outlives this builder
    /// ([`Builder::preamble_home`], named by its key, never rewritten
    /// while its content is right), and clang is told not to record mtimes
    /// (`-fno-pch-timestamp`): our dependency digests check content, and a
    /// checkout's mtimes differ from one clone to the next.
    fn obtain_preamble(
        &self,
        slot: &PreambleSlot,
        unit: &IncoreUnit,
        reuse: bool,
    ) -> Result<BuiltPreamble, CompileError> {
        let dir = self.scratch_file(slot.key, "pch");
        let work_err = |source| CompileError::WorkDir {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir(&dir).map_err(work_err)?;
        let header = dir.join("preamble.hpp");
        std::fs::write(&header, &slot.preamble.text).map_err(work_err)?;
        // The key's lock first: `cache prune` keeps the lasting header of
        // a preamble whose lock is held, so it cannot vanish between its
        // write and the PCH's publication.
        let cache = self.cache.as_ref().filter(|c| c.is_enabled());
        let guard = cache.and_then(|c| c.lock(&slot.key));
        let home = self.preamble_home();
        let lasting = home.join(format!("{}.hpp", slot.key.to_hex()));
        let text = slot.preamble.text.as_bytes();
        if std::fs::read(&lasting).ok().as_deref() != Some(text) {
            std::fs::create_dir_all(home)
                .and_then(|()| scene_util::write_atomically(&lasting, text))
                .map_err(|source| CompileError::WorkDir {
                    path: lasting.clone(),
                    source,
                })?;
        }
        let display = format!("preamble of {}", unit.source.display());
        if let (Some(cache), Some(_)) = (cache, &guard) {
            match cache.lookup_in(Tier::Objects, &slot.key) {
                Lookup::Hit { artifact, manifest } if reuse && self.stale(&manifest).is_none() => {
                    if std::fs::write(compile::pch_file(&header), &artifact).is_ok() {
                        cache.hit(&slot.key, &manifest);
                        return Ok(BuiltPreamble {
                            header,
                            deps: manifest.deps,
                            fresh: false,
                        });
                    }
                }
                Lookup::Hit { .. } => cache.remove_stale_in(Tier::Objects, &slot.key),
                Lookup::Damaged(damage) => {
                    cache.remove_damaged_in(Tier::Objects, &slot.key, &display, &damage);
                }
                Lookup::Miss => {}
            }
        }
        let tc = self.hosted(unit);
        let dep_file = tc.dep_file.then(|| dir.join("preamble.d"));
        let started = SystemTime::now();
        let clang = self
            .keys
            .tool(&tc.hosted_cxx, tc.search_path.as_deref())
            .version
            .contains("clang");
        compile::compile_preamble(
            &tc,
            &self.root,
            unit,
            (&lasting, clang),
            &compile::pch_file(&header),
            dep_file.as_deref(),
            &self.cancel,
        )?;
        let seconds = started.elapsed().unwrap_or_default().as_secs_f64();
        let deps = dep_file.and_then(|file| {
            deps::record(
                &self.keys,
                &self.root,
                &file,
                started,
                &self.own_dirs(),
                &[],
            )
            .ok()
        });
        // Without its headers' digests a cached PCH could not be checked.
        if let (Some(cache), Some(_), Some(deps)) = (cache, &guard, &deps)
            && let Ok(bytes) = std::fs::read(compile::pch_file(&header))
            && cache.publish_with_deps(
                &slot.key,
                EntryKind::Preamble,
                &bytes,
                &slot.inputs,
                Some(deps.clone()),
                &display,
                seconds,
            )
        {
            self.published.store(true, Ordering::Relaxed);
        }
        drop(guard);
        Ok(BuiltPreamble {
            header,
            deps,
            fresh: true,
        })
    }
}

/// One precompiled preamble of a builder: its directives, its key's
/// inputs, and what became of it (`None` inside: not tried yet; `Some(None)`:
/// it does not compile on its own, so its units compile without it).
pub(super) struct PreambleSlot {
    key: UnitKey,
    preamble: Preamble,
    inputs: KeyInputs,
    built: Mutex<Option<Option<Arc<BuiltPreamble>>>>,
}

/// A preamble header in scratch with its PCH beside it.
#[derive(Debug)]
pub(super) struct BuiltPreamble {
    header: PathBuf,
    /// The headers it was built from (recorded into each unit's deps).
    pub(super) deps: Option<Deps>,
    /// Compiled by this builder (not from the cache), so its compiler
    /// accepts it.
    fresh: bool,
}

impl PreambleSlot {
    /// The built preamble, obtained once; `refused`: the one a compile
    /// refused, replaced by a fresh build unless another unit already did.
    fn get(
        &self,
        builder: &Builder,
        unit: &IncoreUnit,
        refused: Option<&Arc<BuiltPreamble>>,
    ) -> Option<Arc<BuiltPreamble>> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        let current = built.clone().flatten();
        let rebuild = match (refused, &current) {
            (Some(refused), Some(current)) => Arc::ptr_eq(refused, current),
            _ => false,
        };
        if built.is_none() || rebuild {
            let result = builder.obtain_preamble(self, unit, !rebuild);
            *built = Some(result.ok().map(Arc::new));
        }
        built.clone().flatten()
    }
}

/// Whether a compile failed because its compiler refused the PCH.
fn refuses_pch(error: &CompileError) -> bool {
    error
        .stderr()
        .is_some_and(|e| e.contains("precompiled") || e.contains("PCH file"))
}
