//! Writing a bundle: into a temp sibling, renamed into place at the end.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use scene_golden::{Tensor, npy};
use scene_kernels::ChipCallable;

use super::{
    BundleError, CallableEntry, IncoreEntry, MANIFEST_FILE, Manifest, RUNTIME_ABI, SCHEMA,
    SlotManifest, TensorEntry, safe_component, slot_binding, slot_key, tensor_file,
};
use crate::golden::GoldenOutputs;
use crate::report::FailureStage;
use crate::select::SelectedCase;

/// Writes a bundle into a temp sibling of its destination, then renames it
/// into place ([`BundleWriter::commit`]). Dropped uncommitted, it removes the
/// temp directory and leaves the destination untouched.
#[derive(Debug)]
pub struct BundleWriter {
    dest: PathBuf,
    tmp: PathBuf,
    manifest: Manifest,
    committed: bool,
    /// Flocked while this writer lives ([`OWNER_LOCK`] in `tmp`): a
    /// recycled pid cannot keep a dead writer's staging alive.
    _owner: std::fs::File,
}

/// In a staging directory while its writer lives; removed before commit.
const OWNER_LOCK: &str = ".owner.lock";

impl BundleWriter {
    /// Starts a bundle for `platform` to be placed at `dest`. Refuses a
    /// `dest` that exists and is anything but an empty directory or a
    /// bundle, so a typo in `--out` never replaces someone's data.
    pub fn create(dest: &Path, platform: &str) -> Result<BundleWriter, BundleError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BundleError::Io { path, source }
        };
        let dest = std::path::absolute(dest).map_err(io_err(dest))?;
        check_replaceable(&dest)?;
        let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
            return Err(BundleError::NotReplaceable { path: dest });
        };
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = parent.join(tmp_name);
        // Left over from a crashed run of a process with our pid: ours by name.
        remove_if_exists(&tmp)?;
        sweep_dead_staging(parent, name);
        std::fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        // Locked under another name first: an `OWNER_LOCK` a sweeper sees
        // is held unless its writer is gone.
        let staging = tmp.join(".owner.lock.new");
        let owner = std::fs::File::create(&staging).map_err(io_err(&staging))?;
        owner.lock().map_err(io_err(&staging))?;
        std::fs::rename(&staging, tmp.join(OWNER_LOCK)).map_err(io_err(&staging))?;
        Ok(BundleWriter {
            _owner: owner,
            dest,
            tmp,
            manifest: Manifest {
                schema: SCHEMA,
                platform: platform.to_string(),
                runtime_abi: RUNTIME_ABI,
                created_at: crate::report::unix_seconds(std::time::SystemTime::now()),
                producer: format!("scene {}", env!("CARGO_PKG_VERSION")),
                compile_logic: scene_kernels::COMPILE_LOGIC_TOKEN.to_string(),
                slots: BTreeMap::new(),
                failed: BTreeMap::new(),
            },
            committed: false,
        })
    }

    /// Stores one case.
    pub fn add_slot(
        &mut self,
        sel: &SelectedCase,
        callable: &ChipCallable,
        inputs: &[(String, Tensor)],
        scalars: &[u64],
        golden: &GoldenOutputs,
        hosts: &BTreeMap<usize, Vec<u8>>,
    ) -> Result<(), BundleError> {
        let id = sel.id();
        if self.manifest.slots.contains_key(&id) {
            return Err(BundleError::DuplicateSlot { slot: id });
        }
        let scene = &sel.scene;
        let case = sel.case();
        let dir = format!(
            "slots/{:04}-{}--{}",
            self.manifest.slots.len(),
            safe_component(&scene.name),
            safe_component(&case.name)
        );
        let slot_dir = self.tmp.join(&dir);
        let mut files = BTreeMap::new();
        let mut sizes = BTreeMap::new();
        let mut put = |name: String, bytes: &[u8]| -> Result<String, BundleError> {
            let path = slot_dir.join(&name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| BundleError::Io {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, bytes).map_err(|source| BundleError::Io {
                path: path.clone(),
                source,
            })?;
            files.insert(name.clone(), blake3::hash(bytes).to_hex().to_string());
            sizes.insert(name.clone(), bytes.len() as u64);
            Ok(name)
        };

        let orch = put("callable/orch.so".to_string(), &callable.orch_so)?;
        let mut incores = Vec::with_capacity(callable.incores.len());
        for k in &callable.incores {
            let file = put(
                format!("callable/incore-{}-{}.bin", k.func_id, k.core),
                &k.text,
            )?;
            incores.push(IncoreEntry {
                name: k.name.clone(),
                func_id: k.func_id,
                core: k.core.to_string(),
                file,
                kind: if k.kind.is_hosted() {
                    k.kind.to_string()
                } else {
                    String::new()
                },
            });
        }
        let mut host_files = BTreeMap::new();
        for (step, bytes) in hosts {
            host_files.insert(*step, put(format!("host/step{step}"), bytes)?);
        }
        let mut tensors = |group: &str, list: &[(String, Tensor)]| {
            list.iter()
                .enumerate()
                .map(|(i, (name, t))| {
                    let file = put(
                        format!("{group}/{}", tensor_file(i, name)),
                        &npy::to_npy_bytes(t),
                    )?;
                    let direction = scene
                        .tensors
                        .iter()
                        .find(|spec| spec.name == *name)
                        .map(|spec| spec.direction.to_string());
                    Ok(TensorEntry {
                        name: name.clone(),
                        dtype: t.dtype(),
                        shape: t.shape().to_vec(),
                        file,
                        direction,
                    })
                })
                .collect::<Result<Vec<_>, BundleError>>()
        };
        let inputs = tensors("inputs", inputs)?;
        let golden = tensors("golden", &golden.0)?;
        let tolerances = scene
            .tensors
            .iter()
            .enumerate()
            .filter(|(_, t)| t.direction.is_output())
            .map(|(i, t)| (t.name.clone(), scene.tolerance_for(case, i)))
            .collect();
        let mut slot = SlotManifest {
            dir,
            key: slot_key(callable, scene, case, scalars, &self.manifest.platform),
            platform: self.manifest.platform.clone(),
            runtime_abi: RUNTIME_ABI,
            callable: CallableEntry {
                label: callable.label.clone(),
                orch,
                orch_symbol: callable.orch_symbol.clone(),
                incores,
            },
            inputs,
            golden,
            scalars: scalars.to_vec(),
            tolerances,
            files,
            sizes,
            binding: None,
            hosts: host_files,
        };
        slot.binding = Some(slot_binding(&id, &slot));
        self.manifest.slots.insert(id, slot);
        Ok(())
    }

    /// Records that pass 1 could not store `sel` and why, so pass 2
    /// fails the case with this cause ([`super::SlotProblem::FailedInPass1`]).
    /// The message is kept to its first [`super::FAILURE_LINES`] lines.
    pub fn add_failure(&mut self, sel: &SelectedCase, stage: FailureStage, message: &str) {
        self.manifest.failed.insert(
            sel.id(),
            super::FailedCase {
                stage,
                message: super::kept_lines(message),
            },
        );
    }

    pub fn slots(&self) -> usize {
        self.manifest.slots.len()
    }

    /// Writes the manifest and moves the bundle into place. Returns the
    /// bundle's path.
    pub fn commit(mut self) -> Result<PathBuf, BundleError> {
        let manifest_path = self.tmp.join(MANIFEST_FILE);
        let mut text =
            serde_json::to_vec_pretty(&self.manifest).map_err(|e| BundleError::Malformed {
                path: manifest_path.clone(),
                message: e.to_string(),
            })?;
        text.push(b'\n');
        std::fs::write(&manifest_path, text).map_err(|source| BundleError::Io {
            path: manifest_path.clone(),
            source,
        })?;
        // Not part of the bundle; the open file keeps the lock, and the
        // pid in the name still marks the staging as live until the rename.
        remove_file_if_exists(&self.tmp.join(OWNER_LOCK))?;
        // Checked again: someone may have put data there since `create`.
        check_replaceable(&self.dest)?;
        scene_util::replace_dir(&self.tmp, &self.dest).map_err(|source| BundleError::Io {
            path: self.dest.clone(),
            source,
        })?;
        self.committed = true;
        Ok(self.dest.clone())
    }
}

impl Drop for BundleWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Removes `<name>.tmp-<pid>` staging directories beside the bundle whose
/// process is gone (killed, e.g. by a second Ctrl-C or `SIGKILL`, before it
/// could remove its own): those whose [`OWNER_LOCK`] nobody holds, or
/// (without one: an older version's, or one mid-commit) whose pid is not
/// alive. Best effort: a live writer's is always kept.
fn sweep_dead_staging(parent: &Path, name: &std::ffi::OsStr) {
    let Some(prefix) = name.to_str().map(|n| format!("{n}.tmp-")) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dead = match open_no_follow(&entry.path().join(OWNER_LOCK)) {
            // Held while removing.
            Ok(lock) => match lock.try_lock() {
                Ok(()) => {
                    let _ = std::fs::remove_dir_all(entry.path());
                    continue;
                }
                Err(_) => false,
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                !scene_util::cancel::process_alive(pid)
            }
            Err(_) => false,
        };
        if dead {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `dest` may be replaced if it does not exist, is an empty directory, or
/// is a bundle (holds a manifest).
fn check_replaceable(dest: &Path) -> Result<(), BundleError> {
    let refuse = || BundleError::NotReplaceable {
        path: dest.to_path_buf(),
    };
    let meta = match std::fs::symlink_metadata(dest) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BundleError::Io {
                path: dest.to_path_buf(),
                source,
            });
        }
    };
    if !meta.is_dir() {
        return Err(refuse());
    }
    if dest.join(MANIFEST_FILE).is_file() {
        return Ok(());
    }
    let mut entries = std::fs::read_dir(dest).map_err(|source| BundleError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    if entries.next().is_some() {
        return Err(refuse());
    }
    Ok(())
}

/// Opens a regular file only: a symlink or FIFO planted as a lock file is
/// refused (`InvalidInput`), never followed or blocked on.
fn open_no_follow(path: &Path) -> io::Result<std::fs::File> {
    if !std::fs::symlink_metadata(path)?.is_file() {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    std::fs::File::open(path)
}

fn remove_file_if_exists(path: &Path) -> Result<(), BundleError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(BundleError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn remove_if_exists(path: &Path) -> Result<(), BundleError> {
    scene_util::remove_dir_if_exists(path).map_err(|source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn killed_runs_bundle_tmp_dirs_are_swept_even_when_their_pid_was_recycled() {
        let parent = tempfile::tempdir().expect("tmp");
        let name = std::ffi::OsStr::new("bundle");
        // A live process that is not the writer: the dead writer's pid,
        // recycled. Its staging's lock is not held.
        let mut other = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep");
        let recycled = parent.path().join(format!("bundle.tmp-{}", other.id()));
        std::fs::create_dir(&recycled).expect("mkdir");
        std::fs::write(recycled.join(OWNER_LOCK), "").expect("lock file");
        // A live writer's: lock held (another open file description).
        let live = parent.path().join("bundle.tmp-1");
        std::fs::create_dir(&live).expect("mkdir");
        let held = std::fs::File::create(live.join(OWNER_LOCK)).expect("lock file");
        held.lock().expect("lock");

        sweep_dead_staging(parent.path(), name);
        let _ = other.kill();
        let _ = other.wait();
        assert!(!recycled.exists(), "an unheld staging dir is swept");
        assert!(live.is_dir(), "a held one is kept");
        drop(held);
        sweep_dead_staging(parent.path(), name);
        assert!(!live.exists(), "once its writer is gone it goes too");
    }

    #[test]
    fn a_committed_bundle_holds_no_owner_lock() {
        let parent = tempfile::tempdir().expect("tmp");
        let dest = parent.path().join("b");
        let w = BundleWriter::create(&dest, "sim").expect("writer");
        assert!(w.tmp.join(OWNER_LOCK).is_file());
        w.commit().expect("commit");
        assert!(!dest.join(OWNER_LOCK).exists());
        assert!(dest.join(MANIFEST_FILE).is_file());
    }
}
