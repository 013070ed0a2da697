//! What every command that works on a selection starts with (the scenes
//! loaded, the cases selected, the empty selection judged), and how the
//! commands that start long work end (interrupted, failed or passed):
//! written once for `run`, `compile` and `precompile`.

use std::path::Path;
use std::sync::Arc;

use scene_harness::prepare::check_custom_comparisons;
use scene_harness::report::CaseReport;
use scene_harness::scene::discover;
use scene_harness::select::Partition;
use scene_harness::{
    GoldenRegistry, Platform, RunConfig, Scene, SceneError, SelectedCase, select_cases,
};

use scene_util::Cancel;

use crate::Layout;
use crate::args::Selection;
use crate::error::CliError;
use crate::hiargs::Engine;
use crate::parse::NoTests;

/// The scenes loaded (malformed ones reported on stderr and kept as
/// failures), the cases selected for the platform, and the run
/// configuration for them.
pub(crate) struct Prologue {
    pub(crate) cases: Vec<SelectedCase>,
    /// Scenes whose `scene.toml` did not load; each counts as a failure.
    pub(crate) load_errors: Vec<LoadFailure>,
    pub(crate) config: RunConfig,
}

/// A scene whose `scene.toml` did not load.
#[derive(Clone, Debug)]
pub(crate) struct LoadFailure {
    /// The scene directory's name.
    pub(crate) scene: String,
    /// The loader's message (names the file and the field).
    pub(crate) message: String,
}

impl LoadFailure {
    /// Its entry's name, `<scene>::load`.
    pub(crate) fn id(&self) -> String {
        format!("{}::load", self.scene)
    }

    /// Its report entry: `<scene>::load`, failed in the `load` stage.
    pub(crate) fn report(&self) -> CaseReport {
        CaseReport::load_failure(&self.scene, self.message.clone())
    }
}

/// Loads every scene; malformed ones are returned as [`LoadFailure`]s
/// (and reported on stderr, one `error:` each).
/// With `registry`, a scene with a case whose custom comparison is not
/// registered there (or gets arguments it does not take) is a load failure
/// too, naming the file, field, case, tensor and the registered ones.
pub(crate) fn load_scenes(
    dir: &Path,
    sel: &Selection,
    config: Option<&RunConfig>,
    registry: Option<&GoldenRegistry>,
) -> Result<(Vec<Arc<Scene>>, Vec<LoadFailure>), CliError> {
    let all = match (sel.paths.is_empty(), config) {
        (false, Some(config)) => load_test_files(&sel.paths, sel, config)?,
        _ => discover(dir)?,
    };
    let mut scenes = Vec::new();
    let mut errors = Vec::new();
    for s in all {
        let s = s.map_err(|e| LoadFailure {
            scene: e.scene_name(),
            message: e.to_string(),
        });
        let checked = s.and_then(|s| match registry {
            Some(r) => match s
                .cases
                .iter()
                .try_for_each(|c| check_custom_comparisons(r, &s, c))
            {
                Ok(()) => Ok(s),
                Err(e) => Err(LoadFailure {
                    scene: s.name.clone(),
                    message: e.to_string(),
                }),
            },
            None => Ok(s),
        });
        match checked {
            Ok(s) => scenes.push(Arc::new(s)),
            Err(e) => errors.push(e),
        }
    }
    for e in &errors {
        eprintln!("error: {}", e.message);
    }
    Ok((scenes, errors))
}

/// The scenes of the original project's test files under `paths`
/// ([`scene_harness::testfiles`]); each class not run here is a `note:`
/// with its reason.
fn load_test_files(
    paths: &[std::path::PathBuf],
    sel: &Selection,
    config: &RunConfig,
) -> Result<Vec<Result<Scene, SceneError>>, CliError> {
    use scene_harness::testfiles;
    let files = testfiles::find_test_files(paths).map_err(CliError::TestFiles)?;
    let opts = testfiles::LoadOptions {
        platform: config.platform.name().to_string(),
        include_manual: sel.include_manual,
        simpler_root: config
            .platform
            .simpler_root()
            .map(|r| r.dir().to_path_buf()),
        python: config.python_config(),
        compat_base: config
            .cache_dir
            .as_ref()
            .map(|d| d.join("python"))
            .unwrap_or_else(|| std::env::temp_dir().join("scene-python")),
        describe_cache: scene_harness::golden::cache::GoldenCache::local_of(config),
        cancel: config.cancel.clone(),
    };
    let loaded = testfiles::load(&files, &opts);
    for s in &loaded.skipped {
        eprintln!("note: not run here: {}: {}", s.id, s.reason);
    }
    let mut out: Vec<Result<Scene, SceneError>> = loaded.scenes.into_iter().map(Ok).collect();
    out.extend(loaded.failures.into_iter().map(|f| {
        Err(SceneError::TestFile {
            scene: f.scene,
            message: f.message,
        })
    }));
    Ok(out)
}

/// The cases and load failures (as their `<scene>::load` entries) in
/// `partition`, split together so each entry is in exactly one partition.
pub(crate) fn partitioned(
    partition: Option<Partition>,
    cases: Vec<SelectedCase>,
    load_errors: Vec<LoadFailure>,
) -> (Vec<SelectedCase>, Vec<LoadFailure>) {
    let Some(partition) = partition else {
        return (cases, load_errors);
    };
    let case_ids: Vec<String> = cases.iter().map(SelectedCase::id).collect();
    let load_ids: Vec<String> = load_errors.iter().map(LoadFailure::id).collect();
    let all: Vec<&str> = case_ids
        .iter()
        .chain(&load_ids)
        .map(String::as_str)
        .collect();
    let taken: std::collections::HashSet<&str> = partition.apply_ids(&all).into_iter().collect();
    let cases = cases
        .into_iter()
        .zip(&case_ids)
        .filter(|(_, id)| taken.contains(id.as_str()))
        .map(|(c, _)| c)
        .collect();
    let load_errors = load_errors
        .into_iter()
        .zip(&load_ids)
        .filter(|(_, id)| taken.contains(id.as_str()))
        .map(|(e, _)| e)
        .collect();
    (cases, load_errors)
}

/// The cases `sel` selects on `platform` and the load failures, both
/// split by `--partition` together; with how many cases were selected
/// before the split. A partition that took none of them is noted (not an
/// error, as in cargo-nextest: with more runners than cases some
/// partitions are empty, and the union still covers all).
pub(crate) fn select(
    scenes: &[Arc<Scene>],
    load_errors: Vec<LoadFailure>,
    sel: &Selection,
    platform: &Platform,
) -> (Vec<SelectedCase>, Vec<LoadFailure>, usize) {
    let cases = select_cases(scenes, &sel.filters, platform.scenes(), sel.include_manual);
    let selected = cases.len();
    let (cases, load_errors) = partitioned(sel.partition, cases, load_errors);
    if let Some(p) = sel.partition
        && cases.is_empty()
        && load_errors.is_empty()
        && selected > 0
    {
        eprintln!("note: partition {p} selected none of the {selected} selected cases");
    }
    (cases, load_errors, selected)
}

/// Builds the [`Prologue`] of `engine`'s selection. `registry`: see
/// [`load_scenes`].
pub(crate) fn prologue(
    layout: &Layout,
    engine: &Engine,
    registry: Option<&GoldenRegistry>,
) -> Result<Prologue, CliError> {
    let sel = &engine.selection;
    let platform = engine.config.platform();
    let (scenes, load_errors) = load_scenes(
        &layout.scenes_dir,
        sel,
        Some(engine.config.base()),
        registry,
    )?;
    let load_failures = load_errors.len();
    let (cases, load_errors, selected) = select(&scenes, load_errors, sel, platform);
    // A scene that did not load already fails the run; an empty selection
    // with nothing else wrong would otherwise pass having run nothing.
    if selected == 0 && load_failures == 0 {
        let reasons =
            scene_harness::select::why_not_selected(&scenes, &sel.filters, platform.scenes());
        for r in &reasons {
            eprintln!("note: {r}");
        }
        let what = match reasons.first() {
            Some(first) if reasons.len() == 1 => {
                format!("no cases selected on {platform}: {first}")
            }
            _ => format!(
                "no cases selected on {platform} (filter: {}{})",
                match sel.filters.is_empty() {
                    true => "none".to_string(),
                    false => sel.filters.join(", "),
                },
                if sel.include_manual {
                    ""
                } else {
                    "; manual cases need --include-manual"
                }
            ),
        };
        match engine.no_tests {
            NoTests::Fail => return Err(CliError::NoTests { what }),
            NoTests::Warn => eprintln!("warning: {what}"),
            NoTests::Pass => {}
        }
    }
    let config = engine.config.for_cases(&cases);
    Ok(Prologue {
        cases,
        load_errors,
        config,
    })
}

/// How a command that starts long work ends when SIGINT / SIGTERM
/// cancelled it: `partial` prints its partial summary with the words for
/// the signal (`interrupted (SIGINT)`), and the error exits 130 / 143.
/// `Ok` when not interrupted.
pub(crate) fn unless_interrupted(
    cancel: &Cancel,
    partial: impl FnOnce(&str),
) -> Result<(), CliError> {
    match crate::signals::interrupted(cancel) {
        Some((what, e)) => {
            partial(&what);
            Err(e)
        }
        None => Ok(()),
    }
}
