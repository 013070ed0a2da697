//! The scene's header: name, level, devices, platforms, the orchestration,
//! the incore kernels and the signature's length.

use std::collections::{BTreeMap, BTreeSet};

use scene_kernels::{ArgsConvention, CoreType, IncoreKind};

use super::{Validator, is_c_identifier};
use crate::scene::raw::{RawIncore, RawOrchestration, RawScene};
use crate::scene::{ArgDirection, Incore, IncoreBuild, OrchestrationApi, SIMPLER_ENTRY};

impl Validator<'_> {
    /// Name, level, devices and platforms, each checked on its own.
    pub(super) fn check_header(&self, raw: &RawScene) {
        let dir_name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if raw.name != dir_name {
            self.problem(
                "name",
                format!(
                    "`{}` must equal the scene directory name `{dir_name}`",
                    raw.name
                ),
            );
        }
        if raw.level != 2 && raw.level != 3 {
            self.problem(
                "level",
                format!(
                    "level {} is not supported (2 = one chip, 3 = a rank group of chips)",
                    raw.level
                ),
            );
        }
        if raw.devices == 0 {
            self.problem("devices", "must be at least 1");
        }
        self.report(self.platform_list("platforms", &raw.platforms));
    }

    /// The orchestration's API and entry function; `None` when either is
    /// wrong (reported).
    pub(super) fn check_orchestration(
        &self,
        o: &RawOrchestration,
    ) -> Option<(OrchestrationApi, String)> {
        self.report(self.existing_file("orchestration.source", &o.source));
        self.existing_dirs("orchestration.include_dirs", &o.include_dirs);
        let api = match o.api.as_deref() {
            None => OrchestrationApi::Scene,
            Some(a) => match OrchestrationApi::parse(a) {
                Some(api) => api,
                None => {
                    self.problem(
                        "orchestration.api",
                        format!(
                            "unknown API `{a}` (one of: {})",
                            OrchestrationApi::NAMES.join(", ")
                        ),
                    );
                    return None;
                }
            },
        };
        match (api, &o.function) {
            (OrchestrationApi::Scene, None) => {
                self.problem(
                    "orchestration.function",
                    "missing: the entry function the runtime calls",
                );
                None
            }
            (_, Some(f)) if !is_c_identifier(f) => {
                self.problem(
                    "orchestration.function",
                    format!("`{f}` is not a C identifier"),
                );
                None
            }
            (OrchestrationApi::Simpler, Some(f)) if f != SIMPLER_ENTRY => {
                self.problem(
                    "orchestration.function",
                    format!(
                        "`{f}`: an orchestration written against the original's API (api = \"simpler\") has the entry `{SIMPLER_ENTRY}`; leave `function` out"
                    ),
                );
                None
            }
            (OrchestrationApi::Simpler, _)
                if scene_kernels::Language::of(&o.source) != scene_kernels::Language::Cxx =>
            {
                self.problem(
                    "orchestration.source",
                    format!(
                        "`{}`: the original's orchestration API is C++ (a .cpp, .cc or .cxx source)",
                        o.source.display()
                    ),
                );
                None
            }
            (OrchestrationApi::Simpler, _) => Some((api, SIMPLER_ENTRY.to_owned())),
            (OrchestrationApi::Scene, Some(f)) => Some((api, f.clone())),
        }
    }

    /// The scene's default incore build (`build`; `None`: unsaid, the
    /// platform decides, except that `args = "chip_tensor"` means hosted)
    /// and the argument convention of its hosted kernels (`args`); `None`
    /// when either is malformed (reported).
    pub(super) fn incore_kinds(
        &self,
        build: Option<&str>,
        args: Option<&str>,
    ) -> Option<(Option<IncoreBuild>, ArgsConvention)> {
        let build = match build {
            None => Some(None),
            Some(b) => self.build_kind("build", b).map(Some),
        };
        let args = match args {
            None => Some(ArgsConvention::Scene),
            Some(a) => self.report(
                a.parse::<ArgsConvention>()
                    .map_err(|e| self.err("args", e.to_string())),
            ),
        };
        let (build, args) = (build?, args?);
        let build = match (build, args) {
            (None, ArgsConvention::ChipTensor) => Some(IncoreBuild::Hosted),
            (b, _) => b,
        };
        Some((build, args))
    }

    /// `runtime`: one of the original's runtime variants.
    pub(super) fn runtime(&self, runtime: Option<&str>) -> Option<crate::simpler::SimplerRuntime> {
        match runtime {
            None => Some(crate::simpler::SimplerRuntime::default()),
            Some(r) => {
                self.report(r.parse().map_err(|e: crate::simpler::UnknownRuntime| {
                    self.err("runtime", e.to_string())
                }))
            }
        }
    }

    fn build_kind(&self, field: &str, value: &str) -> Option<IncoreBuild> {
        self.report(
            value
                .parse::<IncoreBuild>()
                .map_err(|e| self.err(field, e.to_string())),
        )
    }

    /// Unique func_ids and names, known core types, existing sources.
    pub(super) fn incores(
        &self,
        raw: Vec<RawIncore>,
        kinds: Option<(Option<IncoreBuild>, ArgsConvention)>,
    ) -> Option<Vec<Incore>> {
        if raw.is_empty() {
            self.problem("incores", "a scene needs at least one incore kernel");
            return None;
        }
        let mut func_ids = BTreeMap::new();
        let mut names = BTreeSet::new();
        let mut incores = Some(Vec::with_capacity(raw.len()));
        for (i, k) in raw.into_iter().enumerate() {
            let field = |f: &str| format!("incores[{i}].{f}");
            let func_id = if k.func_id >= scene_device::abi::SCENE_MAX_FUNC_IDS {
                Err(self.err(
                    field("func_id"),
                    format!(
                        "{} is out of range (0..{})",
                        k.func_id,
                        scene_device::abi::SCENE_MAX_FUNC_IDS
                    ),
                ))
            } else if let Some(prev) = func_ids.insert(k.func_id, k.name.clone()) {
                Err(self.err(
                    field("func_id"),
                    format!(
                        "duplicate func_id {} (kernels `{prev}` and `{}`)",
                        k.func_id, k.name
                    ),
                ))
            } else {
                Ok(())
            };
            let name = if names.insert(k.name.clone()) {
                Ok(())
            } else {
                Err(self.err(field("name"), format!("duplicate kernel name `{}`", k.name)))
            };
            let ok = self.all([func_id, name]);
            let core = self.report(k.core.parse::<CoreType>().map_err(|_| {
                self.err(
                    field("core"),
                    format!("`{}` is not a core type (aic | aiv)", k.core),
                )
            }));
            let source = self.report(self.existing_file(&field("source"), &k.source));
            let dirs = self.existing_dirs(&field("include_dirs"), &k.include_dirs);
            // Checked even when the scene's defaults are malformed.
            let own = k
                .build
                .as_ref()
                .map(|b| self.build_kind(&field("build"), b));
            let kind = kinds.and_then(|(default, args)| {
                let build = match own {
                    Some(b) => Some(b?),
                    None => default,
                };
                match (build, args) {
                    (None, _) => Some(None),
                    (Some(IncoreBuild::Hosted), args) => Some(Some(IncoreKind::Hosted(args))),
                    (Some(IncoreBuild::Image), ArgsConvention::Scene) => {
                        Some(Some(IncoreKind::Image))
                    }
                    (Some(IncoreBuild::Image), ArgsConvention::ChipTensor) => {
                        self.problem(
                            field("build"),
                            format!(
                                "kernel `{}` is an image kernel, but `args = \"chip_tensor\"` is a convention of hosted kernels (build = \"hosted\")",
                                k.name
                            ),
                        );
                        None
                    }
                }
            });
            match (ok && dirs, core, source, kind, incores.as_mut()) {
                (true, Some(core), Some(()), Some(kind), Some(list)) => list.push(Incore {
                    func_id: k.func_id,
                    name: k.name,
                    core,
                    kind,
                    source: k.source,
                    include_dirs: k.include_dirs,
                    defines: k.defines.into_iter().collect(),
                }),
                _ => incores = None,
            }
        }
        incores
    }

    /// Tensors then scalars map positionally onto the signature.
    pub(super) fn check_argument_count(
        &self,
        signature: &[ArgDirection],
        n_tensors: usize,
        n_scalars: usize,
    ) {
        let n_args = n_tensors + n_scalars;
        if n_args != signature.len() {
            self.problem(
                "orchestration.signature",
                format!(
                    "has {} entries but the scene declares {} tensors and {} scalars",
                    signature.len(),
                    n_tensors,
                    n_scalars
                ),
            );
        }
    }
}
