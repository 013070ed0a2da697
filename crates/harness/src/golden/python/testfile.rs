//! The requests of scenes made from the original project's test files
//! (issue 40, [`crate::testfiles`]): `describe` (a file's classes, cases
//! and the arguments `generate_args` makes), `compare_case` (a class's
//! own `compare_outputs` on every output of a case) and `replay_case` (a
//! level-3 class's own `test_run(self, st_worker)` again, with the
//! device's outputs in its buffers). Fixtures and goldens
//! go through the usual `inputs` / `golden` requests, which carry the
//! class and case ([`with_origin`]).

use std::path::PathBuf;

use scene_golden::{Tensor, npy};
use serde_json::{Value as Json, json};

use super::{PyError, PyVerdict, PythonRunner, WorkerFor, sys_path, whose};
use crate::scene::{Case, Scene};

impl PythonRunner {
    /// Describes test files of the original (issue 40,
    /// [`crate::testfiles`]): `request` is a `describe` request of the
    /// driver (one file), run in the shared worker of `requirements`
    /// that later serves the scenes made from them.
    pub fn describe(&self, requirements: &[String], mut request: Json) -> Result<Json, PyError> {
        let name = request
            .pointer("/files/0/file")
            .and_then(Json::as_str)
            .unwrap_or("test files")
            .to_owned();
        let who = WorkerFor::test_files(requirements, &name);
        if let Some(obj) = request.as_object_mut() {
            obj.insert("op".into(), json!("describe"));
        }
        let reply = self.with_worker_for(&who, |w| w.request(&request, self.config.timeout))?;
        Self::check_reply(reply, &name)
    }

    /// What a description depends on besides the request and the files it
    /// records: the driver and the versions of the interpreter of
    /// `requirements` (and its managed environment's pins), as a digest.
    /// Asks no worker ([`Self::versions`]).
    pub fn describe_environment(&self, requirements: &[String]) -> Result<String, PyError> {
        let who = WorkerFor::test_files(requirements, "test files");
        let mut h = scene_util::FieldHasher::new("scene-simpler-describe-env");
        self.hash_environment_for(&who, &mut h)?;
        Ok(h.finalize().to_hex().to_string())
    }

    /// The class's `compare_outputs` on a case made from a test file of
    /// the original: every output at once (`name`, actual, expected), with
    /// the inputs as the device got them. An `AssertionError` is a failed
    /// verdict.
    pub fn compare_case(
        &self,
        scene: &Scene,
        case: &Case,
        inputs: &[(&str, &Tensor)],
        outputs: &[(&str, &Tensor, &Tensor)],
    ) -> Result<PyVerdict, PyError> {
        let Some(origin) = &scene.origin else {
            return Err(PyError::Failed(format!(
                "{}::{}: compare_outputs needs a test file",
                scene.name, case.name
            )));
        };
        let who = whose(scene, case, &origin.file);
        let dir = self.request_dir()?;
        let write = |what: String, t: &Tensor| -> Result<PathBuf, PyError> {
            let path = dir.0.join(format!("{what}.npy"));
            npy::write_npy(&path, t)
                .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
            Ok(path)
        };
        let mut ins = Vec::new();
        for (i, (name, t)) in inputs.iter().enumerate() {
            let path = write(format!("ci{i}"), t)?;
            ins.push(json!({"name": name, "dtype": t.dtype().name(), "path": path}));
        }
        let mut outs = Vec::new();
        for (i, (name, actual, expected)) in outputs.iter().enumerate() {
            let a = write(format!("ca{i}"), actual)?;
            let e = write(format!("ce{i}"), expected)?;
            outs.push(
                json!({"name": name, "dtype": actual.dtype().name(), "actual": a, "expected": e}),
            );
        }
        let mut req = json!({
            "op": "compare_case",
            "file": origin.file,
            "sys_path": sys_path(scene),
            "seed": crate::golden::stage::python_seed(scene, case),
            "inputs": ins,
            "outputs": outs,
        });
        with_origin(&mut req, scene, Some(case));
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        super::verdict(&Self::check_reply(reply, &who)?, &who, "compare_case")
    }

    /// A level-3 class's own `test_run(self, st_worker)` replayed on a
    /// case with the device's outputs (`name`, actual) in its buffers:
    /// an `AssertionError` is a failed verdict.
    pub fn replay_case(
        &self,
        scene: &Scene,
        case: &Case,
        outputs: &[(&str, &Tensor)],
    ) -> Result<PyVerdict, PyError> {
        let Some(origin) = &scene.origin else {
            return Err(PyError::Failed(format!(
                "{}::{}: test_run needs a test file",
                scene.name, case.name
            )));
        };
        let who = whose(scene, case, &origin.file);
        let dir = self.request_dir()?;
        let mut outs = Vec::new();
        for (i, (name, actual)) in outputs.iter().enumerate() {
            let path = dir.0.join(format!("ra{i}.npy"));
            npy::write_npy(&path, actual)
                .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
            outs.push(json!({"name": name, "dtype": actual.dtype().name(), "actual": path}));
        }
        let mut req = json!({
            "op": "replay_case",
            "file": origin.file,
            "sys_path": sys_path(scene),
            "seed": crate::golden::stage::python_seed(scene, case),
            "outputs": outs,
        });
        with_origin(&mut req, scene, Some(case));
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        super::verdict(&Self::check_reply(reply, &who)?, &who, "replay_case")
    }
}

/// A request about a scene made from a test file of the original names
/// its file, module, class and case (`"simpler"`): the driver calls the
/// class's own methods.
pub(super) fn with_origin(req: &mut Json, scene: &Scene, case: Option<&Case>) {
    let Some(origin) = &scene.origin else {
        return;
    };
    if let Some(obj) = req.as_object_mut() {
        obj.insert(
            "simpler".into(),
            origin_json(origin, case.map(|c| c.name.as_str())),
        );
    }
}

fn origin_json(origin: &crate::scene::TestOrigin, case: Option<&str>) -> Json {
    json!({
        "file": origin.file,
        "module": origin.module,
        "class": origin.class,
        "case": case,
        "sys_path": origin.sys_path,
        "simpler_root": origin.simpler_root,
    })
}
