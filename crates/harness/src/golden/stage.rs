//! Where a case's fixtures and golden come from: native fixtures or
//! Python's `generate_inputs`, a registered Rust golden or Python's
//! `compute_golden`, through the golden cache when it is on.

use std::collections::BTreeMap;
use std::path::Path;

use scene_golden::{DType, FixtureSeed, Tensor, make_fixture};
use scene_kernels::cache::Cache;
use serde_json::Value as Json;

use crate::config::RunConfig;
use crate::golden::cache::{GoldenCache, GoldenInputs, why_recomputed};
use crate::golden::python::{PyError, PythonRunner};
use crate::golden::{GoldenOutputs, GoldenRegistry};
use crate::scene::expr::{Num, Value};
use crate::scene::ranks;
use crate::scene::{ArgDirection, Case, Scene};

/// Why a case has no input fixtures.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("case `{case}` resolves {resolved} tensors, the scene declares {declared}")]
    TensorCount {
        case: String,
        resolved: usize,
        declared: usize,
    },
    #[error("per-rank tensor `{tensor}`: {source}")]
    PerRank {
        tensor: String,
        #[source]
        source: scene_golden::TensorError,
    },
    /// Python's `generate_inputs` failed (or its worker, or its identity).
    #[error("{0}")]
    Python(#[from] PyError),
    #[error(
        "{who}: generate_inputs returned `{name}` = {value}, which is neither a tensor nor a scalar of the scene"
    )]
    UnknownScalar {
        who: String,
        name: String,
        value: Json,
    },
    #[error(
        "{who}: generate_inputs returned scalar `{name}` = {value}, but scene.toml gives {scene}"
    )]
    ScalarMismatch {
        who: String,
        name: String,
        value: Json,
        scene: f64,
    },
    #[error("{who}: generate_inputs returned no `{tensor}` ({direction} tensor)")]
    MissingInput {
        who: String,
        tensor: String,
        direction: ArgDirection,
    },
    #[error("{who}: no fixture for `{tensor}`")]
    NoFixture { who: String, tensor: String },
}

/// Why a golden has no code identity, so it cannot be cached.
#[derive(Debug, thiserror::Error)]
pub enum CodeIdentityError {
    #[error("{0}")]
    Python(#[from] PyError),
    #[error("the golden registry declares no code identity")]
    Undeclared,
}

/// How a case's golden was obtained.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoldenOutcome {
    /// Read from the golden cache (nothing computed).
    pub cached: bool,
    /// Why it was computed rather than read (`None` when cached).
    pub recomputed_because: Option<String>,
}

/// Fixtures and goldens of every case of a run: the Python worker and the
/// golden cache.
#[derive(Debug)]
pub struct GoldenStage {
    python: PythonRunner,
    cache: Option<GoldenCache>,
    /// The same directory without the remote tier: Python fixture bytes
    /// stay on this machine (any machine with the file's interpreter makes
    /// them again; a remote would carry a set's inputs, 600 MB for the
    /// original's a2a3 tests, besides its goldens).
    local: Option<GoldenCache>,
}

/// The case's fixtures, and whether they can be trusted to be the same
/// bytes on the next run (Python fixtures that were not are never cached).
#[derive(Debug)]
pub struct Fixtures {
    pub inputs: Vec<(String, Tensor)>,
    pub deterministic: bool,
}

impl GoldenStage {
    /// `kernel_cache`: the run's kernel cache, whose golden tier (and
    /// remote) the golden cache uses when it is the same directory.
    pub fn new(config: &RunConfig, kernel_cache: Option<&Cache>) -> Self {
        let cache = config
            .cache_dir
            .as_ref()
            .filter(|_| config.golden_cache)
            .map(|d| match kernel_cache.filter(|k| k.dir() == d.as_path()) {
                Some(k) => GoldenCache::of_kernel_cache(k),
                None => GoldenCache::in_dir(d),
            });
        Self {
            local: GoldenCache::local_of(config),
            python: PythonRunner::new(config.python_config()).with_cancel(config.cancel.clone()),
            cache,
        }
    }

    /// Stores goldens through `kernel_cache`'s golden tier from now on (a
    /// replaced builder's cache: one remote per run), if it is the
    /// directory the golden cache is in.
    pub fn use_kernel_cache(&mut self, kernel_cache: &Cache) {
        if let Some(cache) = &mut self.cache
            && cache.dir() == kernel_cache.dir()
        {
            *cache = GoldenCache::of_kernel_cache(kernel_cache);
        }
    }

    pub fn python(&self) -> &PythonRunner {
        &self.python
    }

    /// The case's input fixtures, one per tensor in signature order.
    pub fn fixtures(&self, scene: &Scene, case: &Case) -> Result<Fixtures, FixtureError> {
        match &scene.python.fixtures {
            None => Ok(Fixtures {
                inputs: build_fixtures(scene, case)?,
                deterministic: true,
            }),
            Some(file) => self.python_fixtures(scene, case, file),
        }
    }

    fn python_fixtures(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
    ) -> Result<Fixtures, FixtureError> {
        let seed = python_seed(scene, case);
        // Bytes a run before made (and found deterministic) serve while
        // the files they were made of are unchanged: no worker starts.
        let bytes_key = match &self.local {
            Some(local) => {
                let key = self.fixture_bytes_key(scene, case, file, seed)?;
                if let Some(inputs) = cached_fixtures(local, &key, scene, case) {
                    return Ok(Fixtures {
                        inputs,
                        deterministic: true,
                    });
                }
                Some(key)
            }
            None => None,
        };
        let inputs = self.python_inputs_once(scene, case, file, seed)?;
        let Some(cache) = &self.cache else {
            return Ok(Fixtures {
                inputs,
                deterministic: true,
            });
        };
        let digest = tensors_digest(&inputs);
        // What generate_inputs was made of, as it ran: an edit the scan of
        // imports cannot see is a new key, not "non-deterministic".
        let imported = self.python.take_imported(scene, case);
        let made_of = imported
            .as_ref()
            .map(|i| {
                format!(
                    "{}\n{}",
                    python_files(&scenes_root(scene), &i.files),
                    i.opaque.join("\n")
                )
            })
            .unwrap_or_default();
        let key = self.fixture_key(scene, case, file, seed, &made_of)?;
        let deterministic = match cache.fixture_digest(&key) {
            Some(recorded) => recorded == digest,
            None => {
                // First time: generate again and compare.
                let again = self.python_inputs_once(scene, case, file, seed)?;
                let same = tensors_digest(&again) == digest;
                if same {
                    cache.record_fixture_digest(&key, &digest);
                }
                same
            }
        };
        if deterministic
            && let (Some(key), Some(imported), Some(local)) = (&bytes_key, &imported, &self.local)
            && imported.opaque.is_empty()
        {
            let files = python_files(&scenes_root(scene), &imported.files);
            let tensors: Vec<(&str, &Tensor)> =
                inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
            if let Ok(_lock) = local.lock(key) {
                let _ = local.put_recorded(key, &tensors, &[(PYTHON_FILES, files)]);
            }
        }
        if !deterministic {
            eprintln!(
                "warning: {}::{}: generate_inputs in {} gave different bytes for the same seed; \
                 seed numpy / torch from the seed the harness sets (or use no other randomness); \
                 this case's golden is not cached",
                scene.name,
                case.name,
                file.display()
            );
        }
        Ok(Fixtures {
            inputs,
            deterministic,
        })
    }

    /// What decides Python fixtures besides the case: the file and its
    /// local imports, the driver, the versions, and the files
    /// `generate_inputs` was loaded from or read (`made_of`).
    fn fixture_key(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        seed: u64,
        made_of: &str,
    ) -> Result<String, PyError> {
        let code = self.python_code(scene, file)?;
        let mut h = scene_util::FieldHasher::new("scene-python-fixtures");
        h.field("code", code.as_bytes())
            .field("made_of", made_of.as_bytes())
            .field("scene", scene.name.as_bytes())
            .field("case", case.name.as_bytes())
            .field("params", &canonical(&case.params))
            .field("seed", &seed.to_le_bytes());
        derived_field(&mut h, case);
        for (t, r) in scene.tensors.iter().zip(&case.tensors) {
            h.field(
                "tensor",
                format!("{}:{}:{:?}", t.name, r.dtype, r.shape).as_bytes(),
            );
        }
        Ok(h.finalize().to_hex().to_string())
    }

    /// Where the bytes of a case's Python fixtures are kept: its
    /// [`Self::fixture_key`] before the files it was made of are known
    /// (those are recorded in the entry and checked on every hit).
    fn fixture_bytes_key(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        seed: u64,
    ) -> Result<String, PyError> {
        let mut h = scene_util::FieldHasher::new("scene-python-fixture-bytes");
        h.field(
            "fixture",
            self.fixture_key(scene, case, file, seed, "")?.as_bytes(),
        );
        // Tensors generate_inputs leaves out take their scene.toml init.
        for t in &scene.tensors {
            h.field(
                "init",
                format!("{}:{:?}:{}:{:?}", t.name, t.init, t.seed, t.direction).as_bytes(),
            );
        }
        Ok(h.finalize().to_hex().to_string())
    }

    /// One call of `generate_inputs`, checked and completed: tensors it
    /// did not return take their `scene.toml` init (outputs only: every
    /// input must come from it), scalars it returned must equal the
    /// scene's.
    fn python_inputs_once(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        seed: u64,
    ) -> Result<Vec<(String, Tensor)>, FixtureError> {
        let who = || format!("{} ({}::{})", file.display(), scene.name, case.name);
        let py = self.python.generate_inputs(scene, case, file, seed)?;
        for (name, value) in &py.scalars {
            let Some((_, v)) = scene
                .scalars
                .iter()
                .zip(&case.scalars)
                .find(|(s, _)| &s.name == name)
            else {
                return Err(FixtureError::UnknownScalar {
                    who: who(),
                    name: name.clone(),
                    value: value.clone(),
                });
            };
            if !same_scalar(value, *v) {
                return Err(FixtureError::ScalarMismatch {
                    who: who(),
                    name: name.clone(),
                    value: value.clone(),
                    scene: v.as_f64(),
                });
            }
        }
        let native = build_fixtures(scene, case);
        let mut returned = py
            .tensors
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>();
        let mut inputs = Vec::with_capacity(scene.tensors.len());
        let mut native = native.ok().map(Vec::into_iter);
        for t in &scene.tensors {
            let fallback = native.as_mut().and_then(Iterator::next);
            match returned.remove(&t.name) {
                Some(tensor) => inputs.push((t.name.clone(), tensor)),
                None if matches!(t.direction, ArgDirection::In | ArgDirection::Inout) => {
                    return Err(FixtureError::MissingInput {
                        who: who(),
                        tensor: t.name.clone(),
                        direction: t.direction,
                    });
                }
                None => match fallback {
                    Some(f) => inputs.push(f),
                    None => {
                        return Err(FixtureError::NoFixture {
                            who: who(),
                            tensor: t.name.clone(),
                        });
                    }
                },
            }
        }
        Ok(inputs)
    }

    /// The Python code identity of `file` in `scene`: its file and local
    /// imports (as scanned), the driver, the interpreter's versions and
    /// installed distributions and, for a managed
    /// environment, every pinned version (`requirements.lock`).
    fn python_code(&self, scene: &Scene, file: &Path) -> Result<String, PyError> {
        let root = scene.dir.parent().unwrap_or(&scene.dir);
        let files = self.python.code_identity(file, root)?;
        let mut h = scene_util::FieldHasher::new("scene-python-code");
        h.field("files", files.as_bytes());
        self.python.hash_environment(scene, &mut h)?;
        Ok(h.finalize().to_hex().to_string())
    }

    /// The golden's code identity, or why it has none.
    fn code_identity(
        &self,
        registry: &GoldenRegistry,
        scene: &Scene,
    ) -> Result<String, CodeIdentityError> {
        match &scene.python.golden {
            Some(file) => Ok(self.python_code(scene, file)?),
            None => {
                let Some(id) = registry.code_identity() else {
                    return Err(CodeIdentityError::Undeclared);
                };
                let mut h = scene_util::FieldHasher::new("scene-rust-golden-code");
                h.field("registry", id.as_bytes())
                    .field("function", scene.golden.as_bytes());
                Ok(h.finalize().to_hex().to_string())
            }
        }
    }

    /// The case's golden: from the cache when it holds one for exactly
    /// these inputs, else computed by `compute` (and stored). A Python
    /// golden without a code identity fails as `E` (its Python is broken
    /// too); a Rust one is then computed, uncached.
    pub fn golden<E, F>(
        &self,
        registry: &GoldenRegistry,
        scene: &Scene,
        case: &Case,
        inputs: &[(String, Tensor)],
        deterministic: bool,
        compute: F,
    ) -> Result<(GoldenOutputs, GoldenOutcome), E>
    where
        E: From<CodeIdentityError>,
        F: FnOnce() -> Result<GoldenOutputs, E>,
    {
        let uncached = |compute: F, why: String| {
            compute().map(|g| {
                (
                    g,
                    GoldenOutcome {
                        cached: false,
                        recomputed_because: Some(why),
                    },
                )
            })
        };
        let Some(cache) = &self.cache else {
            return uncached(compute, "the golden cache is off".into());
        };
        if !deterministic {
            return uncached(compute, "the fixtures are not deterministic".into());
        }
        let code = match self.code_identity(registry, scene) {
            Ok(c) => c,
            Err(why) if scene.python.golden.is_some() => return Err(why.into()),
            Err(why) => return uncached(compute, why.to_string()),
        };
        let expected: Vec<(&str, DType, &[usize])> = scene
            .tensors
            .iter()
            .zip(&case.tensors)
            .filter(|(t, _)| t.direction.is_output())
            .map(|(t, r)| (t.name.as_str(), r.dtype, r.shape.as_slice()))
            .collect();
        let gi = GoldenInputs {
            code,
            inputs: tensors_digest(inputs),
            params: params_digest(scene, case),
            outputs: outputs_digest(&expected),
        };
        let key = gi.key();
        let id = format!("{}::{}", scene.name, case.name);
        let _lock = match cache.lock(&key) {
            Ok(l) => l,
            Err(e) => return uncached(compute, format!("cannot lock the golden cache entry: {e}")),
        };
        let root = scenes_root(scene);
        let python = scene.python.golden.is_some();
        let miss = match cache.get_recorded(&key, &expected) {
            Ok((g, recorded)) => {
                let stale = if python {
                    stale_python_files(&root, recorded.get(PYTHON_FILES).map(String::as_str))
                } else {
                    None
                };
                match stale {
                    None => {
                        cache.record_inputs(&id, &gi);
                        return Ok((
                            g,
                            GoldenOutcome {
                                cached: true,
                                recomputed_because: None,
                            },
                        ));
                    }
                    Some(why) => Err(why),
                }
            }
            Err(miss) => Ok(miss),
        };
        let mut why = match miss {
            Ok(miss) => why_recomputed(cache.last_inputs(&id).as_ref(), &gi, &miss),
            Err(stale) => stale,
        };
        let golden = compute()?;
        let mut extra = Vec::new();
        if python {
            match self.python.take_imported(scene, case) {
                None => {
                    cache.remove(&key);
                    why.push_str("; not cached: the worker did not say which files it imported");
                    return Ok((
                        golden,
                        GoldenOutcome {
                            cached: false,
                            recomputed_because: Some(why),
                        },
                    ));
                }
                Some(imported) if !imported.opaque.is_empty() => {
                    cache.remove(&key);
                    why.push_str("; not cached: ");
                    why.push_str(&imported.opaque.join("; "));
                    return Ok((
                        golden,
                        GoldenOutcome {
                            cached: false,
                            recomputed_because: Some(why),
                        },
                    ));
                }
                Some(imported) => extra.push((PYTHON_FILES, python_files(&root, &imported.files))),
            }
        }
        // Stored only when it is exactly the outputs the case declares.
        let outputs: Option<Vec<(&str, &Tensor)>> = expected
            .iter()
            .map(|&(name, dtype, shape)| {
                golden
                    .get(name)
                    .filter(|t| t.dtype() == dtype && t.shape() == shape)
                    .map(|t| (name, t))
            })
            .collect();
        if let Some(outputs) = outputs {
            if let Err(e) = cache.put_recorded(&key, &outputs, &extra) {
                eprintln!(
                    "warning: {id}: cannot store its golden in {}: {e}",
                    cache.root().display()
                );
            } else {
                cache.record_inputs(&id, &gi);
            }
        }
        Ok((
            golden,
            GoldenOutcome {
                cached: false,
                recomputed_because: Some(why),
            },
        ))
    }
}

/// The fixtures kept under `key` in the scene's tensor order, when the
/// entry holds exactly the case's tensors and every file they were made
/// of is unchanged.
fn cached_fixtures(
    cache: &GoldenCache,
    key: &str,
    scene: &Scene,
    case: &Case,
) -> Option<Vec<(String, Tensor)>> {
    let expected: Vec<(&str, DType, &[usize])> = scene
        .tensors
        .iter()
        .zip(&case.tensors)
        .map(|(t, r)| (t.name.as_str(), r.dtype, r.shape.as_slice()))
        .collect();
    let _lock = cache.lock(key).ok()?;
    let (got, recorded) = cache.get_recorded(key, &expected).ok()?;
    if stale_python_files(
        &scenes_root(scene),
        recorded.get(PYTHON_FILES).map(String::as_str),
    )
    .is_some()
    {
        return None;
    }
    let mut by_name: std::collections::HashMap<String, Tensor> = got.0.into_iter().collect();
    scene
        .tensors
        .iter()
        .map(|t| by_name.remove(&t.name).map(|v| (t.name.clone(), v)))
        .collect()
}

/// The manifest field of a Python golden's entry that lists the files it
/// was made of, with their digests.
const PYTHON_FILES: &str = "python_files";

/// Where relative paths of recorded files start: the scenes root, real
/// (the worker reports real paths).
fn scenes_root(scene: &Scene) -> std::path::PathBuf {
    let root = scene.dir.parent().unwrap_or(&scene.dir);
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// blake3 (hex) of the file at `path`, or `absent` when there is none (a
/// golden may read a file only when it exists).
pub(crate) fn file_digest(path: &Path) -> String {
    let digest = std::fs::File::open(path).and_then(|f| {
        let mut h = blake3::Hasher::new();
        h.update_reader(f)?;
        Ok(h.finalize().to_hex().to_string())
    });
    match digest {
        Ok(hex) => hex,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "absent".to_string(),
        Err(e) => format!("unreadable: {e}"),
    }
}

/// `files` as the manifest records them: JSON `[[path, digest], ...]`,
/// paths relative to `root` when under it (so entries of a remote cache
/// serve checkouts in other places).
fn python_files(root: &Path, files: &[std::path::PathBuf]) -> String {
    let rows: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let shown = f.strip_prefix(root).unwrap_or(f);
            (shown.to_string_lossy().into_owned(), file_digest(f))
        })
        .collect();
    serde_json::to_string(&rows).unwrap_or_default()
}

/// Why an entry's recorded files no longer describe the golden, or `None`
/// when every one is unchanged.
fn stale_python_files(root: &Path, recorded: Option<&str>) -> Option<String> {
    let Some(text) = recorded else {
        return Some("golden code unknown: the entry records no imported files".into());
    };
    let Ok(rows) = serde_json::from_str::<Vec<(String, String)>>(text) else {
        return Some("golden code unknown: the entry's record of imported files is damaged".into());
    };
    rows.into_iter().find_map(|(path, digest)| {
        let full = root.join(&path);
        (file_digest(&full) != digest).then(|| {
            format!("golden code changed: `{path}` differs from when the golden was computed")
        })
    })
}

/// The seed Python fixtures of a case start from (numpy, `random`, torch),
/// in `0..2^32`: derived from the scene, the case and its seed.
pub fn python_seed(scene: &Scene, case: &Case) -> u64 {
    let mut h = scene_util::FieldHasher::new("scene-python-fixture-seed v1");
    h.field("scene", scene.name.as_bytes())
        .field("case", case.name.as_bytes())
        .field("seed", &case.seed.to_le_bytes());
    let b = h.finalize();
    u64::from(u32::from_le_bytes([
        b.as_bytes()[0],
        b.as_bytes()[1],
        b.as_bytes()[2],
        b.as_bytes()[3],
    ]))
}

fn same_scalar(value: &Json, v: Num) -> bool {
    match (value.as_i64(), v) {
        (Some(i), Num::Int(j)) => i == j,
        _ => value
            .as_f64()
            .is_some_and(|f| f == v.as_f64() || (f as f32) == (v.as_f64() as f32)),
    }
}

fn canonical<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn tensors_digest(tensors: &[(String, Tensor)]) -> String {
    let mut h = scene_util::FieldHasher::new("scene-golden-inputs");
    for (name, t) in tensors {
        h.field("name", name.as_bytes())
            .field("tensor", t.digest().as_bytes());
    }
    h.finalize().to_hex().to_string()
}

fn params_digest(scene: &Scene, case: &Case) -> String {
    let mut h = scene_util::FieldHasher::new("scene-golden-params");
    h.field("params", &canonical(&case.params));
    derived_field(&mut h, case);
    for (s, v) in scene.scalars.iter().zip(&case.scalars) {
        let v = match v {
            Num::Int(i) => format!("i{i}"),
            Num::Float(f) => format!("f{}", f.to_bits()),
        };
        h.field("scalar", format!("{}:{}:{v}", s.name, s.dtype).as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// The `[derived]` values of a case, which goldens read like params (Rust
/// `ctx.value`, Python's `params`): a changed `[derived]` expression must
/// not hit a golden computed with the old value. Only when there are any,
/// so the keys of scenes without `[derived]` stay as they were.
fn derived_field(h: &mut scene_util::FieldHasher, case: &Case) {
    let derived: BTreeMap<&String, &Value> = case
        .values
        .iter()
        .filter(|(k, _)| !case.params.contains_key(*k))
        .collect();
    if !derived.is_empty() {
        h.field("derived", &canonical(&derived));
    }
}

fn outputs_digest(expected: &[(&str, DType, &[usize])]) -> String {
    let mut h = scene_util::FieldHasher::new("scene-golden-outputs");
    for (name, dtype, shape) in expected {
        h.field("output", format!("{name}:{dtype}:{shape:?}").as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// The case's input fixtures, one per tensor in signature order.
pub fn build_fixtures(scene: &Scene, case: &Case) -> Result<Vec<(String, Tensor)>, FixtureError> {
    if case.tensors.len() != scene.tensors.len() {
        return Err(FixtureError::TensorCount {
            case: case.name.clone(),
            resolved: case.tensors.len(),
            declared: scene.tensors.len(),
        });
    }
    // Tensors are seeded apart, so they are drawn side by side (the same
    // bytes: benchmark_bgemm's two 33 M-element inputs in half the time).
    use rayon::prelude::*;
    scene
        .tensors
        .par_iter()
        .zip(case.tensors.par_iter())
        .map(|(t, r)| {
            fn seed<'s>(
                scene: &'s Scene,
                case: &'s Case,
                seed: u64,
                tensor: &'s str,
            ) -> FixtureSeed<'s> {
                FixtureSeed {
                    scene: &scene.name,
                    case: &case.name,
                    tensor,
                    seed: seed ^ case.seed.rotate_left(32),
                }
            }
            let tensor = match case.group {
                // Slice r of a per-rank tensor is seeded per rank.
                Some(g) if t.per_rank => {
                    let shape = ranks::slice_shape(&r.shape);
                    let mut bytes = Vec::new();
                    for k in 0..g.ranks {
                        let name = ranks::slice_fixture_name(&t.name, k);
                        let slice = make_fixture(
                            r.dtype,
                            &shape,
                            &r.init,
                            &seed(scene, case, t.seed, &name),
                        );
                        bytes.extend_from_slice(slice.bytes());
                    }
                    Tensor::from_bytes(r.dtype, &r.shape, bytes).map_err(|source| {
                        FixtureError::PerRank {
                            tensor: t.name.clone(),
                            source,
                        }
                    })?
                }
                _ => make_fixture(
                    r.dtype,
                    &r.shape,
                    &r.init,
                    &seed(scene, case, t.seed, &t.name),
                ),
            };
            Ok((t.name.clone(), tensor))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(derived: &str) -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("demo");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("orch.c"), "").unwrap();
        std::fs::write(dir.join("k.c"), "").unwrap();
        let text = format!(
            r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "out"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

{derived}

[[tensors]]
name = "x"
dtype = "f32"
shape = ["N"]

[[tensors]]
name = "y"
dtype = "f32"
shape = ["N"]

[[cases]]
name = "c"
params = {{ N = 8, lens = [3, 9] }}
"#
        );
        std::fs::write(dir.join("scene.toml"), text).unwrap();
        Scene::load(&dir).unwrap()
    }

    /// A `[derived]` value only a golden reads (no shape, no scalar) is in
    /// the golden key: `max` -> `min` must not hit the old golden.
    #[test]
    fn derived_values_are_in_the_golden_params_key() {
        let max = load("[derived]\nlongest = \"max(get(lens, [N]))\"");
        let min = load("[derived]\nlongest = \"min(get(lens, [N]))\"");
        let none = load("");
        let key = |s: &Scene| params_digest(s, &s.cases[0]);
        assert_ne!(key(&max), key(&min));
        // Without `[derived]` the key is what it was before derived values
        // were hashed: the params and the scalars only.
        let mut h = scene_util::FieldHasher::new("scene-golden-params");
        h.field("params", &canonical(&none.cases[0].params));
        assert_eq!(key(&none), h.finalize().to_hex().to_string());
    }
}
