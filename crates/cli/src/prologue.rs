//! What every command that works on a selection starts with.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use scene_harness::scene::discover;
use scene_harness::{RunConfig, Scene, SelectedCase, select_cases};

use crate::Layout;
use crate::args::Selection;
use crate::env::{Environment, Flags, resolve};

/// The scenes loaded (malformed ones reported on stderr and counted), the
/// cases selected for the platform (a warning when none), and the run
/// configuration for it.
pub(crate) struct Prologue {
    pub(crate) cases: Vec<SelectedCase>,
    /// Scenes whose `scene.toml` did not load; each counts as a failure.
    pub(crate) load_errors: usize,
    pub(crate) config: RunConfig,
}

/// Loads every scene; malformed ones are returned as messages.
pub(crate) fn load_scenes(dir: &Path) -> Result<(Vec<Arc<Scene>>, Vec<String>), String> {
    let all = discover(dir).map_err(|e| e.to_string())?;
    let mut scenes = Vec::new();
    let mut errors = Vec::new();
    for s in all {
        match s {
            Ok(s) => scenes.push(Arc::new(s)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok((scenes, errors))
}

/// Builds the [`Prologue`]; `Err` is the exit code to return (already reported).
pub(crate) fn prologue(
    layout: &Layout,
    env: &Environment,
    cache_dir: Option<&Path>,
    sel: &Selection,
    flags: &Flags,
) -> Result<Prologue, ExitCode> {
    // The configuration first: a bad flag or variable is a usage error
    // before any scene is read.
    let config = resolve(layout, env, cache_dir, flags).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    let (scenes, load_errors) = load_scenes(&layout.scenes_dir).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(1)
    })?;
    for e in &load_errors {
        eprintln!("error: {e}");
    }
    let cases = select_cases(
        &scenes,
        sel.filter.as_deref(),
        config.platform.scenes(),
        sel.include_manual,
    );
    if cases.is_empty() {
        eprintln!(
            "warning: no cases selected on {} (filter: {})",
            config.platform,
            sel.filter.as_deref().unwrap_or("none")
        );
    }
    Ok(Prologue {
        cases,
        load_errors: load_errors.len(),
        config,
    })
}
