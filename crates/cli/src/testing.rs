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
use scene_harness::report::{CaseStatus, FailureStage};
use scene_harness::scene::discover;
use scene_harness::{
    GoldenRegistry, RunConfig, Scene, SelectedCase, Session, SetupError, select_cases,
};
use scene_util::Cancel;

use crate::Layout;
use crate::env::Environment;
use crate::hiargs::{EngineConfig, no_tests, with_scenes_dir};
use crate::lowargs::Flags;
use crate::parse::NoTests;

struct Shared {
    config: RunConfig,
    registry: GoldenRegistry,
    session: OnceLock<Result<Session, SetupError>>,
    compiled: Mutex<BTreeMap<String, Arc<OnceLock<CompiledScenes>>>>,
}

impl Shared {
    fn session(&self) -> Result<&Session, Failed> {
        self.session
            .get_or_init(|| Session::new(self.config.clone(), self.registry.clone()))
            .as_ref()
            .map_err(|e| Failed::from(e.to_string()))
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
            CaseStatus::Failed => Err(Failed::from(failure_sentence(
                &report.name,
                report.failure_stage,
                report.message.as_deref(),
            ))),
        }
    }
}

/// `vector_example::small failed comparing outputs: <message>`: what a
/// failing trial says, as a sentence (a multi-line message continues on
/// the following lines).
pub(crate) fn failure_sentence(
    name: &str,
    stage: Option<FailureStage>,
    message: Option<&str>,
) -> String {
    let doing = stage.map_or("", |s| s.doing());
    let message = message.map(str::trim_end).unwrap_or("no message");
    let failed = if doing.is_empty() {
        format!("{name} failed")
    } else {
        format!("{name} failed {doing}")
    };
    if message.contains('\n') {
        format!("{failed}:\n{message}")
    } else {
        format!("{failed}: {message}")
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
    let layout = with_scenes_dir(layout, None, env);
    let engine = match EngineConfig::resolve(
        &layout,
        env,
        None,
        &Flags::test_target(),
        &Cancel::default(),
    ) {
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
    let no_tests = match no_tests(env, None) {
        Ok(n) => n,
        Err(e) => return vec![failing("scenes::config".into(), e.to_string())],
    };
    let platform_name = engine.platform().to_string();
    let platform = engine.platform().scenes();
    let selected = select_cases(&loaded, &[], platform, true);
    // Level-3 trials hold a group of cards: with no pool given, the pool
    // is sized for the largest group.
    let config = engine.for_cases(&selected);
    let shared = Arc::new(Shared {
        config,
        registry,
        session: OnceLock::new(),
        compiled: Mutex::new(BTreeMap::new()),
    });
    // No case for the platform (a platform no scene lists, an empty scenes
    // directory) must not pass green by running nothing.
    if selected.is_empty() {
        let what = format!(
            "no scene case runs on platform {platform_name} (scenes dir {})",
            layout.scenes_dir.display()
        );
        match no_tests {
            NoTests::Fail => trials.push(failing(
                NO_SCENES_TRIAL.into(),
                format!("{what}; set SCENE_NO_TESTS=warn or =pass to allow this"),
            )),
            NoTests::Warn => eprintln!("warning: {what}"),
            NoTests::Pass => {}
        }
    }
    for sel in selected {
        let manual = sel.case().manual.on(platform.as_str());
        let shared = Arc::clone(&shared);
        let id = sel.id();
        trials.push(Trial::test(id, move || shared.run(&sel)).with_ignored_flag(manual));
    }
    trials
}

/// The failing trial that stands for an empty selection (`SCENE_NO_TESTS`
/// unset or `fail`).
pub const NO_SCENES_TRIAL: &str = "no_scenes_for_platform";

/// `main` of the test target.
pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    if let Some(code) = crate::serve_device_worker() {
        return code;
    }
    let args = Arguments::from_args();
    let env = Environment::capture();
    // Found at run time like the CLI does (`SCENE_ROOT`, the current
    // directory up, the executable up), so an archived test binary run in
    // another checkout (`cargo nextest run --archive-file ...
    // --workspace-remap DIR`) uses that checkout's scenes.
    let cwd = std::env::current_dir().ok();
    let layout = crate::hiargs::layout(
        layout,
        None,
        None,
        &env,
        cwd.as_deref(),
        crate::locate::exe_dir().as_deref(),
    );
    libtest_mimic::run(&args, trials(layout, registry, &env)).exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        Environment::from_pairs(pairs)
    }

    fn names(trials: &[Trial]) -> Vec<String> {
        trials.iter().map(|t| t.name().to_string()).collect()
    }

    #[test]
    fn no_case_for_the_platform_is_a_failing_trial() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout {
            root: tmp.path().to_path_buf(),
            scenes_dir: tmp.path().to_path_buf(),
        };
        let built = trials(layout.clone(), GoldenRegistry::new(), &env(&[]));
        // `failing` trials fail when run; this one is not ignored.
        assert_eq!(names(&built), [NO_SCENES_TRIAL]);
        assert!(!built[0].has_ignored_flag());

        for value in ["pass", "warn"] {
            let e = env(&[("SCENE_NO_TESTS", value)]);
            let built = trials(layout.clone(), GoldenRegistry::new(), &e);
            assert!(built.is_empty(), "{value}: {:?}", names(&built));
        }
        let e = env(&[("SCENE_NO_TESTS", "maybe")]);
        let built = trials(layout, GoldenRegistry::new(), &e);
        assert_eq!(names(&built), ["scenes::config"]);
    }

    #[test]
    fn failures_read_like_sentences() {
        assert_eq!(
            failure_sentence(
                "vector_example::small",
                Some(FailureStage::Compare),
                Some("output `c` differs at 3")
            ),
            "vector_example::small failed comparing outputs: output `c` differs at 3"
        );
        assert_eq!(
            failure_sentence(
                "s::c",
                Some(FailureStage::Compile),
                Some("add.c:1: error\nmore\n")
            ),
            "s::c failed compiling:\nadd.c:1: error\nmore"
        );
        assert_eq!(
            failure_sentence("s::c", Some(FailureStage::Device), None),
            "s::c failed on the device: no message"
        );
        assert_eq!(failure_sentence("s::c", None, Some("x")), "s::c failed: x");
    }

    /// The test target reads its scenes from `SCENE_SCENES_DIR` like the
    /// CLI: a folder elsewhere with a broken scene and one that does not
    /// exist under the layout's scenes dir gives those trials, and running
    /// them fails.
    #[test]
    fn scenes_dir_variable_is_honoured_and_its_failures_fail() {
        let layout_dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let broken = elsewhere.path().join("only_elsewhere");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(broken.join("scene.toml"), "this is = not [ a scene").unwrap();
        let layout = Layout {
            root: layout_dir.path().to_path_buf(),
            scenes_dir: layout_dir.path().to_path_buf(),
        };
        let dir = elsewhere.path().to_str().unwrap();
        let built = trials(
            layout.clone(),
            GoldenRegistry::new(),
            &env(&[("SCENE_SCENES_DIR", dir), ("SCENE_NO_TESTS", "pass")]),
        );
        assert_eq!(names(&built), ["only_elsewhere::load"]);
        let args = Arguments {
            test_threads: Some(1),
            quiet: true,
            // Its own report goes to a file, not into this test's output.
            logfile: Some(elsewhere.path().join("log").to_string_lossy().into_owned()),
            ..Arguments::default()
        };
        let conclusion = libtest_mimic::run(&args, built);
        assert_eq!(conclusion.num_failed, 1);
        assert_eq!(conclusion.num_passed, 0);

        // Without the variable: the layout's (empty) dir, no such trial.
        let built = trials(
            layout,
            GoldenRegistry::new(),
            &env(&[("SCENE_NO_TESTS", "pass")]),
        );
        assert!(built.is_empty(), "{:?}", names(&built));
    }
}
