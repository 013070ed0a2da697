//! The `cargo test -p scenes` target: one libtest-mimic trial per
//! `scene::case` of the current platform (`SCENE_PLATFORM`, default
//! `a2a3sim`).
//!
//! Listing is cheap (no compile), so `cargo nextest run` (which lists, then
//! runs one process per trial with `--exact`) works as well as `cargo test`.
//! Within one process the compile stage runs once per scene, shared by the
//! trials that need it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Failed, Trial};

use crate::cli::Layout;
use crate::golden::GoldenRegistry;
use crate::pipeline::{CompiledScenes, RunConfig, SelectedCase, Session, select_cases};
use crate::report::CaseStatus;
use crate::scene::{Scene, discover};

struct Shared {
    layout: Layout,
    registry: GoldenRegistry,
    session: OnceLock<Result<Session, String>>,
    compiled: Mutex<BTreeMap<String, Arc<OnceLock<CompiledScenes>>>>,
}

impl Shared {
    fn session(&self) -> Result<&Session, Failed> {
        self.session
            .get_or_init(|| {
                let config = RunConfig::from_env(&self.layout.root).map_err(|e| e.to_string())?;
                Session::new(config, self.registry.clone()).map_err(|e| e.to_string())
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
            CaseStatus::Passed | CaseStatus::Skipped => Ok(()),
            CaseStatus::Failed => Err(Failed::from(format!(
                "{} failed in {:?} stage:\n{}",
                report.name,
                report.failure_stage,
                report.message.unwrap_or_default()
            ))),
        }
    }
}

/// Builds the trials for every scene under `layout.scenes_dir`.
pub fn trials(layout: Layout, registry: GoldenRegistry) -> Vec<Trial> {
    let platform = std::env::var("SCENE_PLATFORM").unwrap_or_else(|_| "a2a3sim".to_string());
    let scenes = match discover(&layout.scenes_dir) {
        Ok(s) => s,
        Err(e) => {
            let msg = e.to_string();
            return vec![Trial::test("scenes::discover", move || Err(msg.into()))];
        }
    };
    let mut loaded: Vec<Arc<Scene>> = Vec::new();
    let mut trials = Vec::new();
    for s in scenes {
        match s {
            Ok(s) => loaded.push(Arc::new(s)),
            Err(e) => {
                let msg = e.to_string();
                let name = scene_dir_name(&msg);
                trials.push(Trial::test(
                    format!("{name}::load"),
                    move || Err(msg.into()),
                ));
            }
        }
    }
    let shared = Arc::new(Shared {
        layout,
        registry,
        session: OnceLock::new(),
        compiled: Mutex::new(BTreeMap::new()),
    });
    for sel in select_cases(&loaded, None, &platform, true) {
        let manual = sel.case().manual;
        let shared = Arc::clone(&shared);
        let id = sel.id();
        trials.push(Trial::test(id, move || shared.run(&sel)).with_ignored_flag(manual));
    }
    trials
}

fn scene_dir_name(message: &str) -> String {
    // Messages start with the manifest path: `/.../<scene>/scene.toml: ...`.
    message
        .split(": ")
        .next()
        .map(Path::new)
        .and_then(|p| p.parent())
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenes".to_string())
}

/// `main` of the test target.
pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials(layout, registry)).exit_code()
}
