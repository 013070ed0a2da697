//! Case dumps: the tensors of one case as NumPy `.npy` files, so anyone can
//! reopen a run with numpy.
//!
//! Layout, per case:
//!
//! ```text
//! <dir>/<scene>/<case>/
//!     inputs/<tensor>.npy    what was uploaded (`in` and `inout` tensors)
//!     outputs/<tensor>.npy   what the device produced (`out` and `inout`)
//!     golden/<tensor>.npy    what the golden expected
//!     meta.json              shapes, dtypes, tolerances, params, verdict
//! ```
//!
//! Files are `.npy` v1.0 as [`scene_golden::npy`] writes them: f16 is
//! `<f2`; NumPy has no bfloat16, so bf16 is stored as its raw bits, `<u2`,
//! and `meta.json` says so for each such tensor (in numpy:
//! `(a.astype(np.uint32) << 16).view(np.float32)`).
//!
//! A case directory is written into `<case>.tmp-<pid>` next to it and then
//! renamed over any previous dump, so a reader sees either the old dump or
//! the complete new one.

use std::io;
use std::path::{Path, PathBuf};

use scene_golden::{Tensor, npy};
use serde_json::{Value, json};

use crate::config::DumpPolicy;
use crate::golden::GoldenOutputs;
use crate::scene::{ArgDirection, Case, Scene};

/// Version tag of the `meta.json` layout.
pub const META_FORMAT: &str = "scene-dump/1";

/// How to turn a bf16 dump (`<u2` raw bits) into float32 with numpy.
pub const BF16_NOTE: &str = "bf16 stored as raw bits (<u2); in numpy: \
     (a.astype(np.uint32) << 16).view(np.float32)";

/// Errors writing a dump.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("cannot use {what} name `{name}` as a file name in a dump")]
    BadName { what: &'static str, name: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The case's verdict as recorded in `meta.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    Passed,
    /// Failed, with the failure message (the mismatch report).
    Failed(&'a str),
}

/// Everything one case dump holds.
#[derive(Clone, Copy, Debug)]
pub struct CaseDump<'a> {
    pub scene: &'a Scene,
    pub case: &'a Case,
    pub platform: &'a str,
    /// Tensors uploaded to the device, by name.
    pub inputs: &'a [(String, Tensor)],
    /// Tensors read back from the device, by name.
    pub outputs: &'a [(String, Tensor)],
    pub golden: &'a GoldenOutputs,
    pub verdict: Verdict<'a>,
}

/// Writes `dump` to `<dir>/<scene>/<case>/`, replacing any previous dump of
/// that case, and returns that directory.
pub fn write_case_dump(dir: &Path, dump: &CaseDump<'_>) -> Result<PathBuf, DumpError> {
    let scene_dir = dir.join(file_name("scene", &dump.scene.name)?);
    let case_name = file_name("case", &dump.case.name)?;
    let final_dir = scene_dir.join(case_name);
    let pid = std::process::id();
    let tmp = scene_dir.join(format!("{case_name}.tmp-{pid}"));
    remove_dir(&tmp)?;
    let written = write_tree(&tmp, dump);
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    scene_util::replace_dir(&tmp, &final_dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        io_at(&final_dir)(e)
    })?;
    Ok(final_dir)
}

fn write_tree(root: &Path, dump: &CaseDump<'_>) -> Result<(), DumpError> {
    let groups: [(&str, &[(String, Tensor)]); 3] = [
        ("inputs", dump.inputs),
        ("outputs", dump.outputs),
        ("golden", &dump.golden.0),
    ];
    for (group, tensors) in groups {
        let dir = root.join(group);
        std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        for (name, tensor) in tensors {
            let path = dir.join(format!("{}.npy", file_name("tensor", name)?));
            npy::write_npy(&path, tensor).map_err(io_at(&path))?;
        }
    }
    let meta = meta_json(dump);
    let path = root.join("meta.json");
    let mut text = serde_json::to_string_pretty(&meta).map_err(|e| DumpError::Io {
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    text.push('\n');
    std::fs::write(&path, text).map_err(io_at(&path))
}

/// The `meta.json` document of a dump.
pub fn meta_json(dump: &CaseDump<'_>) -> Value {
    let scene = dump.scene;
    let mut names: Vec<&str> = Vec::new();
    let groups = [
        ("inputs", dump.inputs),
        ("outputs", dump.outputs),
        ("golden", dump.golden.0.as_slice()),
    ];
    for (_, tensors) in groups {
        for (name, _) in tensors {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let tensors: Vec<Value> = names
        .iter()
        .map(|&name| {
            let files: Vec<String> = groups
                .iter()
                .filter(|(_, ts)| ts.iter().any(|(n, _)| n == name))
                .map(|(group, _)| format!("{group}/{name}.npy"))
                .collect();
            // Any copy gives dtype and shape; they agree unless the device
            // or golden got them wrong, which the verdict reports.
            let tensor = groups
                .iter()
                .find_map(|(_, ts)| ts.iter().find(|(n, _)| n == name).map(|(_, t)| t));
            let index = scene.tensors.iter().position(|t| t.name == name);
            let spec = index.map(|i| &scene.tensors[i]);
            let mut v = json!({
                "name": name,
                "direction": spec.map(|s| s.direction.to_string()),
                "dtype": tensor.map(|t| t.dtype().to_string()),
                "shape": tensor.map(|t| t.shape().to_vec()),
                "npy_descr": tensor.map(|t| npy::descr(t.dtype())),
                "files": files,
            });
            if let Some(i) = index.filter(|&i| scene.tensors[i].direction.is_output()) {
                let tol = scene.tolerance_for(dump.case, i);
                v["tolerance"] = json!({
                    "rtol": tol.rtol,
                    "atol": tol.atol,
                    "equal_nan": tol.equal_nan,
                });
                if let Some(c) = scene.comparison_for(dump.case, i) {
                    v["comparison"] = json!(c.describe(&tol));
                }
            }
            if tensor.is_some_and(|t| t.dtype() == scene_golden::DType::BF16) {
                v["note"] = json!(BF16_NOTE);
            }
            v
        })
        .collect();
    let (verdict, message) = match dump.verdict {
        Verdict::Passed => ("passed", None),
        Verdict::Failed(m) => ("failed", Some(m)),
    };
    json!({
        "format": META_FORMAT,
        "scene": scene.name,
        "case": dump.case.name,
        "platform": dump.platform,
        "params": dump.case.params,
        "case_seed": dump.case.seed,
        "verdict": verdict,
        "message": message,
        "tensors": tensors,
    })
}

/// What the dump sink did with one case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkOutcome {
    /// The case's dump directory, when one was written.
    pub dir: Option<PathBuf>,
    /// A note for the case's message: where a failing case's dump went
    /// (`dump written to PATH`), or why a dump could not be written.
    pub note: Option<String>,
}

/// The dump sink, run after a case's verdict: dumps the case into
/// `policy.every_case` when set, else into `policy.failures` when the case
/// failed (`failure` is its message). It never changes the verdict; it
/// returns the dump's directory and a note for the report (see
/// [`SinkOutcome`]). `fixtures` are all the case's tensors in declaration
/// order, `outputs` the device's output tensors in declaration order.
pub fn sink(
    policy: &DumpPolicy,
    platform: &str,
    case: (&Scene, &Case),
    fixtures: &[(String, Tensor)],
    outputs: &[Tensor],
    golden: &GoldenOutputs,
    failure: Option<&str>,
) -> SinkOutcome {
    let (scene, case) = case;
    let dir = match (&policy.every_case, failure) {
        (Some(d), _) => d.as_path(),
        (None, Some(_)) => policy.failures.as_path(),
        (None, None) => return SinkOutcome::default(),
    };
    let inputs: Vec<(String, Tensor)> = fixtures
        .iter()
        .zip(&scene.tensors)
        .filter(|(_, spec)| spec.direction != ArgDirection::Out)
        .map(|(named, _)| named.clone())
        .collect();
    let outputs: Vec<(String, Tensor)> = scene
        .tensors
        .iter()
        .filter(|t| t.direction.is_output())
        .zip(outputs)
        .map(|(spec, t)| (spec.name.clone(), t.clone()))
        .collect();
    let dump = CaseDump {
        scene,
        case,
        platform,
        inputs: &inputs,
        outputs: &outputs,
        golden,
        verdict: match failure {
            Some(message) => Verdict::Failed(message),
            None => Verdict::Passed,
        },
    };
    match write_case_dump(dir, &dump) {
        Ok(path) => SinkOutcome {
            note: failure
                .is_some()
                .then(|| format!("dump written to {}", path.display())),
            dir: Some(path),
        },
        Err(e) => SinkOutcome {
            dir: None,
            note: Some(format!("dump not written: {e}")),
        },
    }
}

/// `name` if it is a single, ordinary path component.
fn file_name<'n>(what: &'static str, name: &'n str) -> Result<&'n str, DumpError> {
    scene_util::check_file_name(name).map_err(|_| DumpError::BadName {
        what,
        name: name.to_string(),
    })
}

fn remove_dir(p: &Path) -> Result<(), DumpError> {
    scene_util::remove_dir_if_exists(p).map_err(io_at(p))
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> DumpError + '_ {
    move |source| DumpError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scene_golden::DType;

    const SCENE: &str = r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"
rtol = 0.5

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "inout", "out"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "x"
dtype = "bf16"
shape = ["N"]
init = { kind = "uniform", low = -1.0, high = 1.0 }

[[tensors]]
name = "acc"
dtype = "f16"
shape = ["N"]

[[tensors]]
name = "y"
dtype = "f32"
shape = [2, "N"]
atol = 0.25

[[cases]]
name = "small"
params = { N = 3 }
"#;

    fn scene(tmp: &Path) -> Scene {
        let dir = tmp.join("demo");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("orch.c"), "").unwrap();
        std::fs::write(dir.join("k.c"), "").unwrap();
        std::fs::write(dir.join("scene.toml"), SCENE).unwrap();
        Scene::load(&dir).unwrap()
    }

    fn t(dtype: DType, shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(dtype, shape, v).unwrap()
    }

    fn config(tmp: &Path) -> DumpPolicy {
        DumpPolicy {
            every_case: None,
            failures: tmp.join("failures"),
        }
    }

    #[test]
    fn writes_npy_and_meta_and_replaces_previous_dump() {
        let tmp = tempfile::tempdir().unwrap();
        let scene = scene(tmp.path());
        let case = &scene.cases[0];
        let x = t(DType::BF16, &[3], &[1.0, -0.5, 2.0]);
        let acc = t(DType::F16, &[3], &[0.25, 0.5, 0.75]);
        let y = t(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let inputs = vec![
            ("x".to_string(), x.clone()),
            ("acc".to_string(), acc.clone()),
        ];
        let outputs = vec![
            ("acc".to_string(), acc.clone()),
            ("y".to_string(), y.clone()),
        ];
        let golden = GoldenOutputs::new().with("acc", acc.clone()).with("y", y);
        let out = tmp.path().join("dumps");
        let mut dump = CaseDump {
            scene: &scene,
            case,
            platform: "a5sim",
            inputs: &inputs,
            outputs: &outputs,
            golden: &golden,
            verdict: Verdict::Failed("tensor `y` mismatch"),
        };
        let dir = write_case_dump(&out, &dump).unwrap();
        assert_eq!(dir, out.join("demo").join("small"));
        let x_path = dir.join("inputs/x.npy");
        assert_eq!(npy::read_npy_as(&x_path, DType::BF16).unwrap(), x);
        assert!(matches!(
            npy::read_npy(&x_path),
            Err(npy::NpyError::NeedsHint)
        ));
        let acc_bytes = std::fs::read(dir.join("outputs/acc.npy")).unwrap();
        assert!(String::from_utf8_lossy(&acc_bytes).contains("'descr': '<f2'"));
        assert_eq!(
            npy::read_npy(&dir.join("golden/y.npy")).unwrap().shape(),
            [2, 3]
        );

        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["format"], META_FORMAT);
        assert_eq!(meta["platform"], "a5sim");
        assert_eq!(meta["verdict"], "failed");
        assert_eq!(meta["message"], "tensor `y` mismatch");
        assert_eq!(meta["params"]["N"], 3);
        let tensors = meta["tensors"].as_array().unwrap();
        let names: Vec<&str> = tensors
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["x", "acc", "y"]);
        assert_eq!(tensors[0]["dtype"], "bf16");
        assert_eq!(tensors[0]["npy_descr"], "<u2");
        assert_eq!(tensors[0]["note"], BF16_NOTE);
        assert!(tensors[0].get("tolerance").is_none(), "inputs have none");
        assert_eq!(tensors[1]["direction"], "inout");
        assert_eq!(
            tensors[1]["files"],
            json!(["inputs/acc.npy", "outputs/acc.npy", "golden/acc.npy"])
        );
        assert_eq!(tensors[2]["shape"], json!([2, 3]));
        assert_eq!(
            tensors[2]["tolerance"],
            json!({"rtol": 0.5, "atol": 0.25, "equal_nan": false})
        );

        // A second dump replaces the first completely and leaves no temp dirs.
        dump.inputs = &inputs[..1];
        dump.verdict = Verdict::Passed;
        assert_eq!(write_case_dump(&out, &dump).unwrap(), dir);
        assert!(!dir.join("inputs/acc.npy").exists());
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["verdict"], "passed");
        assert_eq!(meta["message"], Value::Null);
        let left: Vec<String> = std::fs::read_dir(out.join("demo"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["small"]);
    }

    #[test]
    fn rejects_names_that_are_not_file_names() {
        let tmp = tempfile::tempdir().unwrap();
        let scene = scene(tmp.path());
        let mut case = scene.cases[0].clone();
        case.name = "../escape".to_string();
        let golden = GoldenOutputs::new();
        let dump = CaseDump {
            scene: &scene,
            case: &case,
            platform: "a2a3sim",
            inputs: &[],
            outputs: &[],
            golden: &golden,
            verdict: Verdict::Passed,
        };
        let err = write_case_dump(tmp.path(), &dump).unwrap_err();
        assert!(
            matches!(err, DumpError::BadName { what: "case", .. }),
            "{err}"
        );
        assert!(!tmp.path().join("escape").exists());

        let inputs = vec![("a/b".to_string(), Tensor::zeros(DType::F32, &[1]))];
        let dump = CaseDump {
            case: &scene.cases[0],
            inputs: &inputs,
            ..dump
        };
        let err = write_case_dump(tmp.path(), &dump).unwrap_err();
        assert!(err.to_string().contains("`a/b`"), "{err}");
        // The half-written temp dir is gone and no case dir appeared.
        let left: Vec<_> = std::fs::read_dir(tmp.path().join("demo"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "only the scene's own files: {left:?}");
    }

    #[test]
    fn unwritable_dir_is_an_io_error_naming_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let scene = scene(tmp.path());
        let blocker = tmp.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let golden = GoldenOutputs::new();
        let dump = CaseDump {
            scene: &scene,
            case: &scene.cases[0],
            platform: "a2a3sim",
            inputs: &[],
            outputs: &[],
            golden: &golden,
            verdict: Verdict::Passed,
        };
        let err = write_case_dump(&blocker, &dump).unwrap_err();
        assert!(matches!(err, DumpError::Io { .. }));
        assert!(
            err.to_string().contains(&*blocker.to_string_lossy()),
            "{err}"
        );
    }

    #[test]
    fn sink_dumps_failures_and_explicit_requests_only() {
        let tmp = tempfile::tempdir().unwrap();
        let scene = scene(tmp.path());
        let case = &scene.cases[0];
        let fixtures = vec![
            ("x".to_string(), t(DType::BF16, &[3], &[1.0, 2.0, 3.0])),
            ("acc".to_string(), t(DType::F16, &[3], &[0.0; 3])),
            ("y".to_string(), t(DType::F32, &[2, 3], &[0.0; 6])),
        ];
        let outputs = vec![fixtures[1].1.clone(), fixtures[2].1.clone()];
        let golden = GoldenOutputs::new();
        let mut cfg = config(tmp.path());

        // Passing, no --dump: nothing written, nothing said.
        let note = sink(
            &cfg,
            "a2a3sim",
            (&scene, case),
            &fixtures,
            &outputs,
            &golden,
            None,
        );
        assert_eq!(note, SinkOutcome::default());
        assert!(!cfg.failures.exists());

        // Failing: dumped to the failure root, path in the message.
        let note = sink(
            &cfg,
            "a2a3sim",
            (&scene, case),
            &fixtures,
            &outputs,
            &golden,
            Some("tensor `y` mismatch"),
        );
        let expect = cfg.failures.join("demo/small");
        assert_eq!(
            note.note,
            Some(format!("dump written to {}", expect.display()))
        );
        assert_eq!(note.dir.as_deref(), Some(expect.as_path()));
        // `out` tensors are not inputs; `inout` ones are.
        assert!(expect.join("inputs/acc.npy").exists());
        assert!(!expect.join("inputs/y.npy").exists());
        assert!(expect.join("outputs/y.npy").exists());

        // --dump: passing cases too, silently.
        cfg.every_case = Some(tmp.path().join("explicit"));
        let note = sink(
            &cfg,
            "a2a3sim",
            (&scene, case),
            &fixtures,
            &outputs,
            &golden,
            None,
        );
        assert!(note.note.is_none(), "{note:?}");
        let explicit = tmp.path().join("explicit/demo/small");
        assert_eq!(note.dir.as_deref(), Some(explicit.as_path()));
        assert!(explicit.join("meta.json").exists());
    }
}
