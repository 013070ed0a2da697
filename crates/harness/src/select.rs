//! Which cases a run covers: `scene::case` ids filtered by text, platform
//! and the `manual` flag.

use std::sync::Arc;

use crate::scene::{Case, Scene};

/// One selected `scene::case`.
#[derive(Clone, Debug)]
pub struct SelectedCase {
    pub scene: Arc<Scene>,
    pub case: usize,
}

impl SelectedCase {
    pub fn case(&self) -> &Case {
        &self.scene.cases[self.case]
    }
    /// Cards the case holds in its device stage: its ranks (level 3),
    /// else the scene's `devices`.
    pub fn cards(&self) -> usize {
        self.case().group.map_or(self.scene.devices, |g| g.ranks)
    }
    pub fn id(&self) -> String {
        format!("{}::{}", self.scene.name, self.case().name)
    }
}

/// Cases of `scenes` enabled on `platform` (a scene platform name, as
/// scene.toml spells it) whose `scene::case` contains `filter`; `manual`
/// cases only when asked or named exactly.
pub fn select_cases(
    scenes: &[Arc<Scene>],
    filter: Option<&str>,
    platform: crate::platform::BuiltinPlatform,
    include_manual: bool,
) -> Vec<SelectedCase> {
    let mut out = Vec::new();
    for scene in scenes {
        for (i, case) in scene.cases.iter().enumerate() {
            let sel = SelectedCase {
                scene: Arc::clone(scene),
                case: i,
            };
            let id = sel.id();
            if let Some(f) = filter
                && !id.contains(f)
            {
                continue;
            }
            if !scene.case_enabled_on(case, platform.as_str()) {
                continue;
            }
            if case.manual.on(platform.as_str()) && !include_manual && filter != Some(id.as_str()) {
                continue;
            }
            out.push(sel);
        }
    }
    out
}

/// Cases of `scenes` whose `scene::case` contains `filter` and that run on
/// hardware only (their platforms are all hardware platforms such as
/// `a2a3`): no simulator runs them, `scene list` shows them marked.
pub fn hardware_only_cases(scenes: &[Arc<Scene>], filter: Option<&str>) -> Vec<SelectedCase> {
    let mut out = Vec::new();
    for scene in scenes {
        for (i, case) in scene.cases.iter().enumerate() {
            let sel = SelectedCase {
                scene: Arc::clone(scene),
                case: i,
            };
            if filter.is_none_or(|f| sel.id().contains(f)) && scene.case_hardware_only(case) {
                out.push(sel);
            }
        }
    }
    out
}

/// Why a selection is empty, case by case: the cases `filter` matches
/// that are manual on `platform` (they need `--include-manual`) or run on
/// hardware only. Empty when nothing matches at all.
pub fn why_not_selected(
    scenes: &[Arc<Scene>],
    filter: Option<&str>,
    platform: crate::platform::BuiltinPlatform,
) -> Vec<String> {
    let mut out: Vec<String> = select_cases(scenes, filter, platform, true)
        .iter()
        .filter(|c| c.case().manual.on(platform.as_str()))
        .map(|c| format!("case {} is manual: add --include-manual", c.id()))
        .collect();
    out.extend(hardware_only_cases(scenes, filter).iter().map(|c| {
        format!(
            "case {} runs on hardware only ({}), not on {platform}",
            c.id(),
            c.scene.case_platforms(c.case()).join(", ")
        )
    }));
    out
}

/// The scenes of `cases`, each once, in selection order.
pub fn distinct_scenes(cases: &[SelectedCase]) -> Vec<Arc<Scene>> {
    let mut scenes: Vec<Arc<Scene>> = Vec::new();
    for c in cases {
        if !scenes.iter().any(|s| s.name == c.scene.name) {
            scenes.push(Arc::clone(&c.scene));
        }
    }
    scenes
}
