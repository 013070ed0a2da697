//! The original project's test files as scenes (issue 40): `scene run
//! <checkout>/tests/st/a2a3` runs its `test_*.py` files where they stand.
//!
//! A test file holds `SceneTestCase` classes (`@scene_test(level=2,
//! runtime=...)`, `CALLABLE`, `CASES`, `generate_args`, `compute_golden`,
//! maybe `compare_outputs`). Each collected class (`Test*`, with cases,
//! as the original's pytest collects) becomes a [`Scene`] and each entry
//! of `CASES` a [`Case`](crate::scene::Case), named as the original names them. Nothing is
//! written into the checkout.
//!
//! How: the files are imported by the Python worker, with our own
//! `simpler_setup` / `simpler` packages first on `sys.path`
//! ([`crate::golden::python::compat`]), and described (driver op
//! `describe`): the class's level, runtime, tolerances, kernels and
//! orchestration, its cases, and the arguments `generate_args` makes for
//! every case the run may select: their names, dtypes, shapes and scalar
//! values are the scene's tensors and scalars, resolved per case.
//! `build` turns that description into the model every later stage
//! already takes. The fixtures stage calls `generate_args` again
//! (seeded), the golden stage the class's `compute_golden` on a clone,
//! and the compare stage either allclose with the class's `RTOL` / `ATOL`
//! in Rust (the original's default `compare_outputs`) or, when the class
//! overrides it, its `compare_outputs` in the worker.
//!
//! A level-3 class's Python orchestration is recorded by the driver at
//! describe time and its tasks become level-3 steps (`build.rs`).
//!
//! What does not fit is not run, and each such class or method is
//! returned with its reason ([`Skipped`]): level-3 classes that drive the
//! original's `Worker` themselves (their own `test_run`) or whose tasks
//! our steps do not model, white-box classes (their
//! `_run_and_validate_*` overrides use the original's private
//! machinery), and a class's own `test_*` methods besides `test_run`
//! (its cases still run, as the original's `test_run` runs them). An
//! orchestration entry or config function of another name
//! (`function_name`, `config_name`) is called through our header's
//! `SCENE_SIMPLER_ENTRY` / `SCENE_SIMPLER_CONFIG`.

mod build;
mod cache;
mod find;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value as Json, json};

use crate::config::PythonConfig;
use crate::golden::python::{PyError, PythonRunner, compat};
use crate::scene::Scene;

pub use find::{FindError, find_test_files, is_test_path};

/// What [`load`] needs besides the files.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The run's platform: `generate_args` runs for its cases only.
    pub platform: String,
    /// Manual cases are selected too (`--include-manual`).
    pub include_manual: bool,
    /// `--simpler-root`: the checkout whose `simpler_setup.goldens` the
    /// files import; also their module root when they are under it.
    pub simpler_root: Option<PathBuf>,
    pub python: PythonConfig,
    /// Where our compatibility packages are written (a stable place, so
    /// the goldens that record them stay valid): the cache's `python/`.
    pub compat_base: PathBuf,
    /// Where descriptions are kept between runs (the golden cache's
    /// `describe/` records); `None` describes every file every time.
    pub describe_cache: Option<crate::golden::cache::GoldenCache>,
    pub cancel: scene_util::Cancel,
}

/// A class not run here, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// `<file>::<Class>`, or the file when none of it is run.
    pub id: String,
    pub reason: String,
}

/// A test file or class that could not be made into a scene.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadFailure {
    /// The scene it would have been (the class), else the file's stem.
    pub scene: String,
    pub message: String,
}

/// The scenes made from test files, the failures and the classes not run.
#[derive(Debug, Default)]
pub struct Loaded {
    pub scenes: Vec<Scene>,
    pub failures: Vec<LoadFailure>,
    pub skipped: Vec<Skipped>,
}

/// Describes `files` and builds their scenes. Scene names are the class
/// names; two classes of one name (the same test in two runtime
/// directories) are told apart by the directories that differ.
pub fn load(files: &[PathBuf], opts: &LoadOptions) -> Loaded {
    let mut loaded = Loaded::default();
    let compat_dir = match compat::materialise(&opts.compat_base) {
        Ok(d) => d,
        Err(e) => {
            loaded.failures.push(LoadFailure {
                scene: "test files".into(),
                message: format!(
                    "writing the simpler_setup compatibility packages under {}: {e}",
                    opts.compat_base.display()
                ),
            });
            return loaded;
        }
    };
    let runner = PythonRunner::new(opts.python.clone()).with_cancel(opts.cancel.clone());
    let records = opts.describe_cache.as_ref().map(cache::DescribeCache::new);
    // The interpreter digest of each requirement set (`None`: unknown, so
    // nothing recorded for it is used).
    let mut envs: HashMap<Vec<String>, Option<String>> = HashMap::new();
    let mut described = Vec::new();
    let mut contexts: Vec<FileContext> = files
        .iter()
        .map(|f| FileContext::new(f, opts.simpler_root.as_deref(), &compat_dir))
        .collect();
    one_requirement_set(&mut contexts);
    for ctx in contexts {
        let file = &ctx.file;
        let request = json!({
            "platform": opts.platform,
            "include_manual": opts.include_manual,
            "seed": 0,
            "files": [ctx.request()],
        });
        let key = records.as_ref().and_then(|_| {
            envs.entry(ctx.requirements.clone())
                .or_insert_with(|| runner.describe_environment(&ctx.requirements).ok())
                .as_deref()
                .map(|env| cache::DescribeCache::key(env, &request))
        });
        if let (Some(records), Some(key)) = (&records, &key)
            && let Some(reply) = records.get(key)
        {
            described.push((ctx, reply));
            continue;
        }
        match runner.describe(&ctx.requirements, request) {
            Ok(reply) => {
                if let (Some(records), Some(key)) = (&records, &key) {
                    records.put(key, &reply);
                }
                described.push((ctx, reply))
            }
            Err(e) => loaded.failures.push(LoadFailure {
                scene: ctx.stem(),
                message: describe_error(file, &e),
            }),
        }
    }
    let mut classes = Vec::new();
    for (ctx, reply) in &described {
        let Some(entry) = reply.pointer("/tests/0") else {
            continue;
        };
        if let Some(reason) = entry.get("not_run").and_then(Json::as_str) {
            loaded.skipped.push(Skipped {
                id: ctx.file.display().to_string(),
                reason: reason.to_owned(),
            });
            continue;
        }
        if let Some(err) = entry.get("error").and_then(Json::as_str) {
            let mut message = format!("{}: does not import: {err}", ctx.file.display());
            if let Some(tb) = entry.get("traceback").and_then(Json::as_str) {
                message.push('\n');
                message.push_str(tb.trim_end());
            }
            loaded.failures.push(LoadFailure {
                scene: ctx.stem(),
                message,
            });
            continue;
        }
        let list = entry.get("classes").and_then(Json::as_array);
        for class in list.into_iter().flatten() {
            match serde_json::from_value::<build::ClassDesc>(class.clone()) {
                Ok(desc) => classes.push((ctx, desc)),
                Err(e) => loaded.failures.push(LoadFailure {
                    scene: ctx.stem(),
                    message: format!(
                        "{}: the worker's description of a class is malformed: {e}",
                        ctx.file.display()
                    ),
                }),
            }
        }
    }
    let names = scene_names(
        &classes
            .iter()
            .map(|(ctx, d)| (ctx.file.as_path(), d.name.as_str()))
            .collect::<Vec<_>>(),
    );
    for ((ctx, desc), name) in classes.iter().zip(names) {
        let id = format!("{}::{}", ctx.file.display(), desc.name);
        if let Some(reason) = build::not_run_because(desc) {
            loaded.skipped.push(Skipped { id, reason });
            continue;
        }
        let built = match build::scene(ctx, desc, &name) {
            Err(build::Unbuilt::NotRun(reason)) => {
                loaded.skipped.push(Skipped { id, reason });
                continue;
            }
            built => built,
        };
        for method in build::white_box_methods(desc) {
            loaded.skipped.push(Skipped {
                id: format!("{id}::{method}"),
                reason: "white-box: a test method of its own, driving the original's private \
                         machinery (the class's cases run)"
                    .into(),
            });
        }
        match built {
            Ok(scene) => loaded.scenes.push(scene),
            Err(message) => loaded.failures.push(LoadFailure {
                scene: name,
                message: format!("{id}: {message}"),
            }),
        }
    }
    loaded
}

fn describe_error(file: &Path, e: &PyError) -> String {
    format!("{}: could not be described: {e}", file.display())
}

/// The scene name of each class: the class name, unless another class of
/// the set has it too; then `<Class>@<dirs>`, the directories (from the
/// files' common ancestor) that tell them apart, joined with `.`.
fn scene_names(classes: &[(&Path, &str)]) -> Vec<String> {
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (_, class)) in classes.iter().enumerate() {
        by_name.entry(class).or_default().push(i);
    }
    let mut names: Vec<String> = classes.iter().map(|(_, c)| (*c).to_owned()).collect();
    for (class, idx) in by_name {
        if idx.len() < 2 {
            continue;
        }
        let dirs: Vec<Vec<String>> = idx
            .iter()
            .map(|&i| {
                classes[i]
                    .0
                    .parent()
                    .into_iter()
                    .flat_map(|p| p.components())
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect()
            })
            .collect();
        let common = (0..)
            .take_while(|&k| dirs.iter().all(|d| d.len() > k && d[k] == dirs[0][k]))
            .count();
        for (&i, d) in idx.iter().zip(&dirs) {
            let tail = d[common.min(d.len())..].join(".");
            names[i] = if tail.is_empty() {
                format!("{class}@{i}")
            } else {
                format!("{class}@{tail}")
            };
        }
    }
    names
}

/// One test file: where it is, how it is imported and what its
/// interpreter needs.
#[derive(Clone, Debug)]
pub(crate) struct FileContext {
    pub(crate) file: PathBuf,
    pub(crate) module: Option<String>,
    pub(crate) sys_path: Vec<PathBuf>,
    pub(crate) simpler_root: Option<PathBuf>,
    pub(crate) requirements: Vec<String>,
    /// `requirements` come from a `requirements.txt`.
    declared: bool,
}

impl FileContext {
    fn new(file: &Path, simpler_root: Option<&Path>, compat_dir: &Path) -> Self {
        let root = checkout_root(file, simpler_root);
        let module = root.as_deref().and_then(|r| module_name(file, r));
        let mut sys_path = vec![compat_dir.to_path_buf()];
        sys_path.extend(root.clone());
        if let Some(dir) = file.parent() {
            sys_path.push(dir.to_path_buf());
        }
        let (requirements, declared) = requirements(file);
        FileContext {
            file: file.to_path_buf(),
            module,
            sys_path,
            simpler_root: simpler_root.map(Path::to_path_buf).or_else(|| root.clone()),
            requirements,
            declared,
        }
    }

    fn stem(&self) -> String {
        self.file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "test file".into())
    }

    fn request(&self) -> Json {
        json!({
            "file": self.file,
            "module": self.module,
            "sys_path": self.sys_path,
            "simpler_root": self.simpler_root,
        })
    }

    pub(crate) fn origin(
        &self,
        class: &str,
        judge: crate::scene::OriginJudge,
    ) -> Arc<crate::scene::TestOrigin> {
        Arc::new(crate::scene::TestOrigin {
            file: self.file.clone(),
            class: class.to_owned(),
            module: self.module.clone(),
            sys_path: self.sys_path.clone(),
            simpler_root: self.simpler_root.clone(),
            judge,
        })
    }
}

/// The checkout a test file is in: `--simpler-root` when the file is under
/// it, else the nearest ancestor with the original's `simpler_setup/` or a
/// `pyproject.toml`.
fn checkout_root(file: &Path, simpler_root: Option<&Path>) -> Option<PathBuf> {
    if let Some(root) = simpler_root
        && let Ok(root) = root.canonicalize()
        && file.starts_with(&root)
    {
        return Some(root);
    }
    file.ancestors()
        .skip(1)
        .find(|d| d.join("simpler_setup").is_dir() || d.join("pyproject.toml").is_file())
        .map(Path::to_path_buf)
}

/// `tests.st.a2a3.x.test_x` for `<root>/tests/st/a2a3/x/test_x.py`, when
/// every part is a Python identifier.
fn module_name(file: &Path, root: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?.with_extension("");
    let parts: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    let ident = |p: &&str| {
        let mut chars = p.chars();
        chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
    };
    (!parts.is_empty() && parts.iter().all(ident)).then(|| parts.join("."))
}

/// What a test file's interpreter needs, and whether a file says so: a
/// `requirements.txt` beside it (`true`), else torch and / or pytest when
/// it (or a module beside it that it imports relatively, `from .main
/// import run` as the original's worker examples do) imports them (the
/// original's files build their tensors with torch; a few use pytest's
/// markers), else the default (numpy).
fn requirements(file: &Path) -> (Vec<String>, bool) {
    if let Some(dir) = file.parent()
        && let Ok(text) = std::fs::read_to_string(dir.join("requirements.txt"))
    {
        let reqs: Vec<String> = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        if !reqs.is_empty() {
            return (reqs, true);
        }
    }
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut texts = vec![text.clone()];
    if let Some(dir) = file.parent() {
        for name in sibling_imports(&text) {
            if let Ok(t) = std::fs::read_to_string(dir.join(format!("{name}.py"))) {
                texts.push(t);
            }
        }
    }
    let imports = |module: &str| {
        texts.iter().flat_map(|t| t.lines()).any(|l| {
            let l = l.trim_start();
            [format!("import {module}"), format!("from {module}")]
                .iter()
                .any(|p| {
                    l.strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with([' ', '.', '\n']) || rest.is_empty())
                })
        })
    };
    let mut reqs = Vec::new();
    for module in ["torch", "pytest"] {
        if imports(module) {
            reqs.push(module.to_owned());
        }
    }
    if !reqs.is_empty() {
        reqs.insert(0, "numpy".into());
    }
    (reqs, false)
}

/// The modules beside a file that it imports relatively: `from .main
/// import run` and `from . import main, util` give `main` (and `util`).
fn sibling_imports(text: &str) -> Vec<String> {
    let ident = |w: &str| {
        !w.is_empty()
            && !w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
    };
    let mut out = Vec::new();
    for l in text.lines().map(str::trim_start) {
        let Some(rest) = l.strip_prefix("from .") else {
            continue;
        };
        if let Some(names) = rest.strip_prefix(" import ") {
            out.extend(
                names
                    .split([',', '#'])
                    .take_while(|n| !n.contains('('))
                    .filter_map(|n| n.split_whitespace().next())
                    .filter(|n| ident(n))
                    .map(str::to_owned),
            );
        } else if let Some(name) = rest.split_whitespace().next()
            && ident(name)
        {
            out.push(name.to_owned());
        }
    }
    out
}

/// The requirements of files that do not declare theirs, made one set (as
/// the original runs every file in one environment): one managed
/// environment and one worker for a checkout, not one with torch and
/// another with torch and pytest.
fn one_requirement_set(contexts: &mut [FileContext]) {
    let mut union: Vec<String> = Vec::new();
    for ctx in contexts.iter().filter(|c| !c.declared) {
        for r in &ctx.requirements {
            if !union.contains(r) {
                union.push(r.clone());
            }
        }
    }
    let order = |r: &String| ["numpy", "torch", "pytest"].iter().position(|k| k == r);
    union.sort_by_key(order);
    for ctx in contexts.iter_mut().filter(|c| !c.declared) {
        ctx.requirements = union.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_one_name_are_told_apart_by_their_directories() {
        let a = Path::new("/c/tests/st/a2a3/tensormap_and_ringbuffer/pd/test_pd.py");
        let b = Path::new("/c/tests/st/a2a3/host_build_graph/pd/test_pd.py");
        let c = Path::new("/c/tests/st/a2a3/host_build_graph/x/test_x.py");
        let names = scene_names(&[(a, "TestPd"), (b, "TestPd"), (c, "TestX")]);
        assert_eq!(
            names,
            [
                "TestPd@tensormap_and_ringbuffer.pd",
                "TestPd@host_build_graph.pd",
                "TestX"
            ]
        );
    }

    #[test]
    fn module_names_are_dotted_paths_of_identifiers() {
        let root = Path::new("/c");
        assert_eq!(
            module_name(Path::new("/c/tests/st/a/test_x.py"), root).as_deref(),
            Some("tests.st.a.test_x")
        );
        assert_eq!(
            module_name(Path::new("/c/tests/st-1/test_x.py"), root),
            None
        );
        assert_eq!(module_name(Path::new("/d/test_x.py"), root), None);
    }

    #[test]
    fn torch_importing_files_need_torch() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("test_t.py");
        std::fs::write(&f, "import ctypes\nimport torch\n").unwrap();
        assert_eq!(
            requirements(&f),
            (vec!["numpy".into(), "torch".into()], false)
        );
        std::fs::write(
            &f,
            "import numpy as np\n# import torch? no\nimport torchvision\n",
        )
        .unwrap();
        assert!(requirements(&f).0.is_empty());
        std::fs::write(&f, "import pytest\nfrom torch.nn import functional\n").unwrap();
        assert_eq!(requirements(&f).0, ["numpy", "torch", "pytest"]);
        std::fs::write(
            dir.path().join("requirements.txt"),
            "numpy>=1.20  # ours\n\n",
        )
        .unwrap();
        assert_eq!(requirements(&f), (vec!["numpy>=1.20".into()], true));
    }

    #[test]
    fn a_module_beside_the_file_that_it_imports_counts() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("test_x.py");
        std::fs::write(&f, "import pytest\n\nfrom .main import run\n").unwrap();
        std::fs::write(dir.path().join("main.py"), "import torch\n").unwrap();
        assert_eq!(requirements(&f).0, ["numpy", "torch", "pytest"]);
        std::fs::write(&f, "from . import helpers, main  # both\n").unwrap();
        assert_eq!(requirements(&f).0, ["numpy", "torch"]);
        // Not a sibling: a package's module.
        std::fs::write(&f, "from .pkg.main import run\n").unwrap();
        assert!(requirements(&f).0.is_empty());
        assert_eq!(
            sibling_imports("from .a import b\nfrom .. import c\n"),
            ["a"]
        );
    }

    #[test]
    fn files_without_their_own_requirements_share_one_set() {
        let dir = tempfile::tempdir().unwrap();
        let compat = dir.path().join("compat");
        let mut contexts = Vec::new();
        for (sub, text) in [
            ("a", "import pytest\n"),
            ("b", "import torch\n"),
            ("c", "import numpy\n"),
            ("d", "import torch\n"),
        ] {
            let d = dir.path().join(sub);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("test_x.py"), text).unwrap();
            if sub == "d" {
                std::fs::write(d.join("requirements.txt"), "numpy\ntorch==2.0\n").unwrap();
            }
            contexts.push(FileContext::new(&d.join("test_x.py"), None, &compat));
        }
        one_requirement_set(&mut contexts);
        let sets: Vec<&[String]> = contexts.iter().map(|c| c.requirements.as_slice()).collect();
        assert_eq!(sets[0], ["numpy", "torch", "pytest"]);
        assert_eq!(sets[1], sets[0]);
        assert_eq!(sets[2], sets[0]);
        assert_eq!(sets[3], ["numpy", "torch==2.0"]);
    }
}
