//! The `cargo test -p scenes` target: one libtest-mimic trial per
//! `scene::case` of the current platform (`SCENE_PLATFORM`, default
//! `a2a3sim`), configured from the environment like the CLI.
//!
//! Listing is cheap (no compile), so `cargo nextest run` (which lists, then
//! runs one process per trial with `--exact`) works as well as `cargo test`.
//! Within one process the compile stage runs once per scene, shared by the
//! trials that need it.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Failed, Trial};
use scene_harness::compile::CompiledScenes;
use scene_harness::report::CaseStatus;
use scene_harness::scene::discover;
use scene_harness::{GoldenRegistry, RunConfig, Scene, SelectedCase, Session, select_cases};

use crate::Layout;
use crate::env::{Environment, Flags, resolve};

struct Shared {
    config: RunConfig,
    registry: GoldenRegistry,
    session: OnceLock<Result<Session, String>>,
    compiled: Mutex<BTreeMap<String, Arc<OnceLock<CompiledScenes>>>>,
}

impl Shared {
    fn session(&self) -> Result<&Session, Failed> {
        self.session
            .get_or_init(|| {
                Session::new(self.config.clone(), self.registry.clone()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| Failed::from(e.as_str()))
    }

    fn run(&self, sel: &SelectedCase) -> Result<(), Failed> {
        let session = self.session()?;
        let cell = {
            let mut map = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(map.entry(sel.scene.name.clone()).or_default())
        };
        let compiled = cell.get_or_init(|| session.compile(std::slice::from_ref(sel)));
        let report = session.run_case(sel, compiled);
        match report.status {
            CaseStatus::Passed => Ok(()),
            CaseStatus::Failed => {
                let stage = report
                    .failure_stage
                    .map_or_else(|| "an unknown".to_string(), |s| format!("the {s}"));
                Err(Failed::from(format!(
                    "{} failed in {stage} stage:\n{}",
                    report.name,
                    report.message.unwrap_or_default()
                )))
            }
        }
    }
}

/// A trial that fails at once with `message` (configuration or load errors
/// must fail the run, not vanish).
fn failing(name: String, message: String) -> Trial {
    Trial::test(name, move || Err(message.into()))
}

/// Builds the trials for every scene under `layout.scenes_dir` (or
/// `SCENE_SCENES_DIR`).
pub fn trials(layout: Layout, registry: GoldenRegistry, env: &Environment) -> Vec<Trial> {
    let layout = Layout {
        scenes_dir: env.path("SCENE_SCENES_DIR").unwrap_or(layout.scenes_dir),
        ..layout
    };
    let flags = Flags {
        uses_cards: true,
        ..Flags::default()
    };
    let config = match resolve(&layout, env, None, &flags) {
        Ok(c) => c,
        Err(e) => return vec![failing("scenes::config".into(), e.to_string())],
    };
    let scenes = match discover(&layout.scenes_dir) {
        Ok(s) => s,
        Err(e) => return vec![failing("scenes::discover".into(), e.to_string())],
    };
    let mut loaded: Vec<Arc<Scene>> = Vec::new();
    let mut trials = Vec::new();
    for s in scenes {
        match s {
            Ok(s) => loaded.push(Arc::new(s)),
            Err(e) => trials.push(failing(format!("{}::load", e.scene_name()), e.to_string())),
        }
    }
    let platform = config.platform.scenes();
    let shared = Arc::new(Shared {
        config,
        registry,
        session: OnceLock::new(),
        compiled: Mutex::new(BTreeMap::new()),
    });
    for sel in select_cases(&loaded, None, platform, true) {
        let manual = sel.case().manual;
        let shared = Arc::clone(&shared);
        let id = sel.id();
        trials.push(Trial::test(id, move || shared.run(&sel)).with_ignored_flag(manual));
    }
    trials
}

/// `main` of the test target.
pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    if let Some(code) = crate::serve_device_worker() {
        return code;
    }
    let args = Arguments::from_args();
    let env = Environment::capture();
    libtest_mimic::run(&args, trials(layout, registry, &env)).exit_code()
}
