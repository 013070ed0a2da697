//! What every command that works on a selection starts with.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use scene_harness::prepare::check_custom_comparisons;
use scene_harness::report::CaseReport;
use scene_harness::scene::discover;
use scene_harness::select::Partition;
use scene_harness::{GoldenRegistry, RunConfig, Scene, SelectedCase, select_cases};

use crate::Layout;
use crate::args::Selection;
use crate::env::{Environment, Flags, NoTests, no_tests, resolve};

/// The scenes loaded (malformed ones reported on stderr and kept as
/// failures), the cases selected for the platform, and the run
/// configuration for it.
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

/// Loads every scene; malformed ones are returned as [`LoadFailure`]s.
/// With `registry`, a scene with a case whose custom comparison is not
/// registered there (or gets arguments it does not take) is a load failure
/// too, naming the file, field, case, tensor and the registered ones.
pub(crate) fn load_scenes(
    dir: &Path,
    registry: Option<&GoldenRegistry>,
) -> Result<(Vec<Arc<Scene>>, Vec<LoadFailure>), String> {
    let all = discover(dir).map_err(|e| e.to_string())?;
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
    Ok((scenes, errors))
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

/// Builds the [`Prologue`]; `Err` is the exit code to return (already
/// reported). `registry`: see [`load_scenes`].
pub(crate) fn prologue(
    layout: &Layout,
    env: &Environment,
    cache_dir: Option<&Path>,
    registry: Option<&GoldenRegistry>,
    sel: &Selection,
    flags: &Flags,
    no_tests_flag: Option<NoTests>,
) -> Result<Prologue, ExitCode> {
    // The configuration first: a bad flag or variable is a usage error
    // before any scene is read.
    let usage = |e: crate::env::ConfigError| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let mut config = resolve(layout, env, cache_dir, flags).map_err(usage)?;
    crate::paths::check_config_dirs(&mut config, flags.uses_cards).map_err(usage)?;
    let no_tests = no_tests(env, no_tests_flag).map_err(usage)?;
    let (scenes, load_errors) = load_scenes(&layout.scenes_dir, registry).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(1)
    })?;
    for e in &load_errors {
        eprintln!("error: {}", e.message);
    }
    let cases = select_cases(
        &scenes,
        &sel.filters,
        config.platform.scenes(),
        sel.include_manual,
    );
    let selected = cases.len();
    let load_failures = load_errors.len();
    let (cases, load_errors) = partitioned(sel.partition, cases, load_errors);
    if let Some(p) = sel.partition
        && cases.is_empty()
        && load_errors.is_empty()
        && selected > 0
    {
        // Not an error (as in cargo-nextest): with more runners than
        // cases some partitions are empty, and the union still covers all.
        eprintln!("note: partition {p} selected none of the {selected} selected cases");
    }
    // A scene that did not load already fails the run; an empty selection
    // with nothing else wrong would otherwise pass having run nothing.
    if selected == 0 && load_failures == 0 {
        let reasons = scene_harness::select::why_not_selected(
            &scenes,
            &sel.filters,
            config.platform.scenes(),
        );
        for r in &reasons {
            eprintln!("note: {r}");
        }
        let what = match reasons.first() {
            Some(first) if reasons.len() == 1 => {
                format!("no cases selected on {}: {first}", config.platform)
            }
            _ => format!(
                "no cases selected on {} (filter: {}{})",
                config.platform,
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
        match no_tests {
            NoTests::Fail => {
                eprintln!("error: {what}; --no-tests=warn or =pass allows this");
                return Err(ExitCode::from(crate::EXIT_NO_TESTS));
            }
            NoTests::Warn => eprintln!("warning: {what}"),
            NoTests::Pass => {}
        }
    }
    Ok(Prologue {
        cases,
        load_errors,
        config,
    })
}
