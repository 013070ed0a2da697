//! The compile stage: a scene's callable as a `scene-kernels` spec, one
//! builder per run, and the compiled callables of every selected scene.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use scene_kernels::{
    ArgsConvention, BuildError, BuildOptions, BuildOutput, Builder, CacheConfig, CallableSpec,
    ChipCallable, HostUnit, IncoreKind, IncoreUnit, OrchUnit, UnitOutcome, plan_outline,
};

use crate::config::RunConfig;
use crate::host_step::{BuildKey, BuiltHost, HostStepError, host_unit};
use crate::scene::steps::StepKind;
use crate::scene::{OrchestrationApi, SIMPLER_INCLUDE_SUBDIR, SIMPLER_ORCH_FLAGS, Scene};

/// The compile spec of a scene's callable on `platform`, paths relative
/// to `root`. Incores neither they nor their scene give a `build` take the
/// platform's `incore_build`; with a checkout of the original named
/// (`platform.simpler_root()`), hosted `chip_tensor` incores get its
/// toolchain ([`crate::simpler`]).
pub fn callable_spec(
    scene: &Scene,
    root: &Path,
    abi_include_dir: &Path,
    platform: &crate::Platform,
) -> CallableSpec {
    let rel = |p: &Path| scene.relative_to(root, p);
    let abi_inc = crate::config::root_relative(root, abi_include_dir);
    // Only the declared dirs and the ABI headers: no implicit per-scene dir,
    // so a kernel shared by several scenes is one unit with one cache key.
    let includes = |dirs: &[std::path::PathBuf]| {
        let mut v: Vec<std::path::PathBuf> = dirs.iter().map(|d| rel(d)).collect();
        v.push(abi_inc.clone());
        v
    };
    let o = &scene.orchestration;
    let mut orchestration = OrchUnit {
        name: "orchestration".to_string(),
        source: rel(&o.source),
        function: o.entry_symbol().to_owned(),
        include_dirs: includes(&o.include_dirs),
        defines: o.defines.clone(),
        flags: Vec::new(),
    };
    if o.api == OrchestrationApi::Simpler {
        // Our `pto_orchestration_api.h` before the ABI headers it builds
        // on; never the checkout's own (`--simpler-root` is for kernels).
        let at = orchestration.include_dirs.len() - 1;
        orchestration
            .include_dirs
            .insert(at, abi_inc.join(SIMPLER_INCLUDE_SUBDIR));
        orchestration.flags = SIMPLER_ORCH_FLAGS.map(str::to_owned).to_vec();
    }
    CallableSpec {
        label: scene.name.clone(),
        orchestration,
        incores: scene
            .incores
            .iter()
            .map(|k| {
                let kind = k.kind_on(platform.incore_build(), scene.args);
                let mut unit = IncoreUnit {
                    name: k.name.clone(),
                    func_id: k.func_id,
                    core: k.core,
                    kind,
                    source: rel(&k.source),
                    include_dirs: includes(&k.include_dirs),
                    defines: k.defines.clone(),
                    flags: Vec::new(),
                };
                if let Some(simpler) = platform.simpler_root()
                    && unit.kind == IncoreKind::Hosted(ArgsConvention::ChipTensor)
                {
                    // The original's dirs after the scene's own (theirs
                    // first, as its `extra_include_dirs` come last there
                    // too, would let its headers shadow a scene's).
                    unit.include_dirs
                        .extend(simpler.incore_include_dirs(platform.scenes(), scene.runtime));
                    // Its defines before the scene's own.
                    unit.defines =
                        [crate::simpler::incore_defines(k.core), k.defines.clone()].concat();
                    unit.flags = crate::simpler::INCORE_FLAGS.map(str::to_owned).to_vec();
                }
                unit
            })
            .collect(),
    }
}

/// The host programs of every C host step of `scenes`, each with the key
/// [`crate::host_step::HostBuilds`] knows it by (one per scene, source and
/// function, however many steps call it).
pub fn scene_hosts(config: &RunConfig, scenes: &[Arc<Scene>]) -> Vec<(BuildKey, HostUnit)> {
    let mut out: Vec<(BuildKey, HostUnit)> = Vec::new();
    for scene in scenes {
        for step in &scene.steps {
            if let StepKind::HostC { source, function } = &step.kind {
                let key = crate::host_step::build_key(scene, source, function);
                if out.iter().all(|(k, _)| k != &key) {
                    out.push((key, host_unit(config, scene, source, function)));
                }
            }
        }
    }
    out
}

/// The host programs of `scenes` as [`scene_hosts`] finds them, without
/// their keys: what `scene compile` builds and a progress bar counts.
pub fn scene_host_units(config: &RunConfig, scenes: &[Arc<Scene>]) -> Vec<HostUnit> {
    scene_hosts(config, scenes)
        .into_iter()
        .map(|(_, unit)| unit)
        .collect()
}

/// The builder a run compiles with (the platform's toolchain, the worker
/// budget, the kernel cache). `scene compile` and `scene precompile` use
/// it too: same units, same keys as `scene run`, but no card pool.
pub fn compile_builder(config: &RunConfig) -> Result<Builder, scene_kernels::BuildSetupError> {
    Builder::new(
        config.root.clone(),
        config.platform.toolchain().clone(),
        BuildOptions {
            workers: config.compile_workers,
            work_dir: None,
            cache: config
                .cache_dir
                .clone()
                .map(|dir| CacheConfig::new(dir).with_remote(config.cache_remote.clone())),
            cancel: config.cancel.clone(),
        },
    )
}

/// Outcome of the compile stage for the scenes of a run.
#[derive(Debug, Default)]
pub struct CompiledScenes {
    pub callables: BTreeMap<String, Result<Arc<ChipCallable>, BuildError>>,
    /// Seconds of compiler work for each scene's callable: a unit shared by
    /// several scenes counts for each of them (each would have needed it).
    pub compile_s: BTreeMap<String, f64>,
    /// The plan's units by outcome (each distinct unit once).
    pub units: crate::report::UnitCounts,
    /// The C host steps' programs, built in the same plan (their failures
    /// carry the compiler's message).
    pub hosts: Vec<BuiltHost>,
}

/// The specs of `scenes`, in order.
pub fn scene_specs(config: &RunConfig, scenes: &[Arc<Scene>]) -> Vec<CallableSpec> {
    scenes
        .iter()
        .map(|s| callable_spec(s, &config.root, &config.abi_include_dir, &config.platform))
        .collect()
}

/// Compiles the callables of `scenes` as one plan on `builder`.
pub fn compile_scenes(
    builder: &Builder,
    config: &RunConfig,
    scenes: &[Arc<Scene>],
) -> CompiledScenes {
    let specs = scene_specs(config, scenes);
    let (host_keys, host_units): (Vec<BuildKey>, Vec<HostUnit>) =
        scene_hosts(config, scenes).into_iter().unzip();
    let out = builder.build_all_with_hosts(&specs, &host_units);
    let mut compile_s = unit_seconds_per_callable(&specs, &out);
    // A scene's host programs are compiler work for it too.
    for (scene, seconds) in scenes.iter().zip(compile_s.iter_mut()) {
        *seconds += out
            .units
            .iter()
            .filter(|u| u.kind == scene_kernels::UnitKind::Host)
            .filter(|u| u.unit.split_once('/').map(|(l, _)| l) == Some(scene.name.as_str()))
            .map(|u| u.duration.as_secs_f64())
            .sum::<f64>();
    }
    let mut compiled = CompiledScenes {
        units: crate::report::UnitCounts {
            cached: out.count(UnitOutcome::Cached) + out.count(UnitOutcome::Reused),
            compiled: out.count(UnitOutcome::Compiled),
            failed: out.count(UnitOutcome::Failed),
        },
        hosts: host_keys
            .into_iter()
            .zip(out.hosts)
            .map(|(key, result)| {
                let result = result.map_err(|e| HostStepError::Build(e.to_string()));
                (key, result)
            })
            .collect(),
        ..CompiledScenes::default()
    };
    for ((scene, result), seconds) in scenes.iter().zip(out.callables).zip(compile_s) {
        compiled.callables.insert(scene.name.clone(), result);
        compiled.compile_s.insert(scene.name.clone(), seconds);
    }
    compiled
}

/// For each spec, the summed duration of every unit it uses (the builder
/// reports each distinct unit once, in plan order).
pub fn unit_seconds_per_callable(specs: &[CallableSpec], out: &BuildOutput) -> Vec<f64> {
    let outline = plan_outline(specs);
    let seconds_of = |index: usize| -> f64 {
        let name = &outline.units[index].display;
        // The builder reports the plan's units in plan order (host
        // programs after them).
        if let Some(unit) = out.units.get(index).filter(|u| &u.unit == name) {
            return unit.duration.as_secs_f64();
        }
        // A builder that reported fewer units: match by display name.
        out.units
            .iter()
            .find(|u| &u.unit == name)
            .map_or(0.0, |u| u.duration.as_secs_f64())
    };
    outline
        .callables
        .iter()
        .map(|units| {
            units
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|&i| seconds_of(i))
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use scene_kernels::{CoreType, UnitKind, UnitOutcome, UnitReport};

    use super::*;

    fn spec(label: &str, kernels: &[&str]) -> CallableSpec {
        CallableSpec {
            label: label.to_string(),
            orchestration: OrchUnit {
                name: "orchestration".to_string(),
                source: PathBuf::from(format!("{label}/orch.c")),
                function: "orch".to_string(),
                include_dirs: vec![],
                defines: vec![],
                flags: Vec::new(),
            },
            incores: kernels
                .iter()
                .enumerate()
                .map(|(i, k)| IncoreUnit {
                    name: k.to_string(),
                    func_id: i as u32,
                    core: CoreType::Aiv,
                    kind: scene_kernels::IncoreKind::Image,
                    source: PathBuf::from(format!("common/{k}.c")),
                    include_dirs: vec![],
                    defines: vec![],
                    flags: vec![],
                })
                .collect(),
        }
    }

    /// A unit shared by two scenes counts for both: each would have needed
    /// it compiled (before, only the first scene in the plan was charged).
    #[test]
    fn shared_units_count_for_every_scene_that_uses_them() {
        let specs = [spec("a", &["mul"]), spec("b", &["mul"])];
        let outline = plan_outline(&specs);
        assert_eq!(outline.units.len(), 3, "orch a, orch b, one shared mul");
        let out = BuildOutput {
            callables: vec![],
            hosts: vec![],
            units: outline
                .units
                .iter()
                .enumerate()
                .map(|(i, u)| UnitReport {
                    unit: u.display.clone(),
                    kind: UnitKind::Orchestration,
                    outcome: UnitOutcome::Compiled,
                    duration: Duration::from_secs(1 + i as u64 * 10),
                    key: None,
                    miss: None,
                    remote: false,
                    deps_unchecked: None,
                })
                .collect(),
        };
        let seconds = unit_seconds_per_callable(&specs, &out);
        let shared: f64 = outline.callables[0]
            .as_ref()
            .unwrap()
            .iter()
            .copied()
            .filter(|i| outline.callables[1].as_ref().unwrap().contains(i))
            .map(|i| out.units[i].duration.as_secs_f64())
            .sum();
        assert!(shared > 0.0);
        let own = |c: usize| -> f64 {
            outline.callables[c]
                .as_ref()
                .unwrap()
                .iter()
                .map(|&i| out.units[i].duration.as_secs_f64())
                .sum()
        };
        assert_eq!(seconds, vec![own(0), own(1)]);
        assert!(seconds[0] > shared && seconds[1] > shared, "{seconds:?}");
    }
}
