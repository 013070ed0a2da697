//! A build described without running it: the distinct units a set of
//! callables needs (the same deduplicated plan [`crate::Builder::build_all`]
//! runs), the exact tool command lines of each unit, and a content digest of
//! a built callable.
//!
//! Callers use this to size progress bars and attribute unit outcomes to
//! callables (`scene compile`), and to replay the builder's commands under
//! another scheduler such as `make -jN` (the compile-throughput benchmark).
//! Everything here is derived from the same functions the builder calls, so
//! the rendered commands cannot drift from the ones it runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::compile;
use crate::error::Stage;
use crate::key::UnitKey;
use crate::link;
use crate::plan::{self, Job};
use crate::process::Invocation;
use crate::report::UnitKind;
use crate::toolchain::Toolchain;
use crate::unit::{CallableSpec, ChipCallable, CoreType, HostUnit, Language};

/// One distinct unit of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedUnit {
    /// `<label>/<name>` of the first callable using it; the same string the
    /// builder puts in [`crate::UnitReport::unit`].
    pub display: String,
    pub kind: UnitKind,
}

/// The deduplicated units of a set of callables and which ones each uses.
#[derive(Debug, Clone)]
pub struct PlanOutline {
    /// In the builder's plan order, so `units[i]` describes the same unit as
    /// `BuildOutput::units[i]` of a `build_all` over the same specs.
    pub units: Vec<PlannedUnit>,
    /// Parallel to the specs: indices into `units` (orchestration first, then
    /// the incores in spec order), or `None` when the spec fails validation
    /// and so has no units planned.
    pub callables: Vec<Option<Vec<usize>>>,
    /// Parallel to the host programs: indices into `units`.
    pub hosts: Vec<usize>,
}

/// The plan `build_all(specs)` would run, without reading any file.
pub fn plan_outline(specs: &[CallableSpec]) -> PlanOutline {
    plan_outline_with_hosts(specs, &[])
}

/// The plan `build_all_with_hosts(specs, hosts)` would run.
pub fn plan_outline_with_hosts(specs: &[CallableSpec], hosts: &[HostUnit]) -> PlanOutline {
    let plan = plan::plan_with_hosts(specs, hosts);
    PlanOutline {
        units: plan
            .entries
            .iter()
            .map(|e| PlannedUnit {
                display: e.display.clone(),
                kind: e.kind,
            })
            .collect(),
        callables: plan
            .specs
            .into_iter()
            .map(|s| {
                s.ok().map(|s| {
                    std::iter::once(s.orch)
                        .chain(s.incores.iter().copied())
                        .collect()
                })
            })
            .collect(),
        hosts: plan.hosts,
    }
}

/// One external tool run: program, arguments, working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCommand {
    /// `compiler` or `linker`.
    pub role: &'static str,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
}

impl ToolCommand {
    /// `(cd <cwd> && <program> <args>)`, quoted for `sh`; the rendering the
    /// builder uses in its error messages.
    pub fn to_shell(&self) -> String {
        Invocation {
            role: self.role,
            stage: Stage::Compile,
            program: &self.program,
            args: self.args.clone(),
            cwd: &self.cwd,
        }
        .display()
    }
}

/// The commands of one unit, to be run in order.
#[derive(Debug, Clone)]
pub struct UnitCommands {
    pub unit: PlannedUnit,
    /// Incores link against the builtins object of their core type, which
    /// must exist before `commands` run.
    pub needs_builtins: Option<CoreType>,
    pub commands: Vec<ToolCommand>,
    /// What the last command writes (linked image or shared object).
    pub output: PathBuf,
}

/// The builtins object of one core type and the command producing it.
#[derive(Debug, Clone)]
pub struct BuiltinsCommand {
    pub core: CoreType,
    pub command: ToolCommand,
    pub output: PathBuf,
}

/// Every command a cold build of some callables runs, with the files those
/// commands expect in the output directory.
#[derive(Debug, Clone)]
pub struct RenderedBuild {
    /// Files to write before running anything (link script, builtins source).
    pub files: Vec<(PathBuf, String)>,
    pub builtins: Vec<BuiltinsCommand>,
    pub units: Vec<UnitCommands>,
}

/// Renders the compile and link commands the builder runs for `specs`,
/// writing all outputs under `out_dir` (made absolute, since compilers run
/// in `root`). Nothing is run or written. Hosted kernels and C++
/// orchestrations are rendered with the toolchain as given: the builder
/// adds `-fno-gnu-unique` to theirs when it finds the compiler accepts it
/// (`crate::unique`), and to hosted kernels the bf16 shim (`crate::bf16`)
/// and the matmul fast path's overlay (`crate::pto_fast`) when they apply,
/// none of which rendering probes or writes.
pub fn render_commands(
    tc: &Toolchain,
    root: &Path,
    specs: &[CallableSpec],
    out_dir: &Path,
) -> RenderedBuild {
    let out_dir = std::path::absolute(out_dir).unwrap_or_else(|_| out_dir.to_path_buf());
    let link_script = out_dir.join("kernel.ld");
    let files = vec![
        (link_script.clone(), tc.link_script.clone()),
        (
            out_dir.join(compile::BUILTINS_SOURCE_NAME),
            tc.builtins_source.clone(),
        ),
    ];
    let builtins = builtins_commands(tc, &out_dir);

    let plan = plan::plan(specs);
    let units = plan
        .entries
        .iter()
        .enumerate()
        .map(|(idx, entry)| unit_commands(tc, root, &out_dir, &link_script, idx, entry))
        .collect();
    RenderedBuild {
        files,
        builtins,
        units,
    }
}

/// The two builtins objects (one per core type).
fn builtins_commands(tc: &Toolchain, out_dir: &Path) -> Vec<BuiltinsCommand> {
    [CoreType::Aic, CoreType::Aiv]
        .into_iter()
        .map(|core| {
            let output = out_dir.join(compile::builtins_object_name(core));
            BuiltinsCommand {
                core,
                command: ToolCommand {
                    role: "compiler",
                    program: tc.compiler.clone(),
                    args: compile::builtins_args(tc, core, &output),
                    cwd: out_dir.to_path_buf(),
                },
                output,
            }
        })
        .collect()
}

/// The compile (and, for an incore, link) commands of plan entry `idx`.
fn unit_commands(
    tc: &Toolchain,
    root: &Path,
    out_dir: &Path,
    link_script: &Path,
    idx: usize,
    entry: &plan::PlanEntry,
) -> UnitCommands {
    let unit = PlannedUnit {
        display: entry.display.clone(),
        kind: entry.kind,
    };
    match &entry.job {
        Job::Incore(incore) if incore.kind.is_hosted() => {
            let output = out_dir.join(format!("u{idx}.so"));
            let mut args = compile::hosted_args(tc, incore);
            args.push("-o".into());
            args.push(output.as_os_str().to_owned());
            UnitCommands {
                unit,
                needs_builtins: None,
                commands: vec![ToolCommand {
                    role: compile::HOSTED_COMPILER,
                    program: tc.hosted_cxx.clone(),
                    args,
                    cwd: root.to_path_buf(),
                }],
                output,
            }
        }
        Job::Incore(incore) => {
            let object = out_dir.join(format!("u{idx}.o"));
            let output = out_dir.join(format!("u{idx}.elf"));
            let builtins = out_dir.join(compile::builtins_object_name(incore.core));
            let mut args = compile::incore_args(tc, incore);
            args.push("-o".into());
            args.push(object.as_os_str().to_owned());
            UnitCommands {
                unit,
                needs_builtins: Some(incore.core),
                commands: vec![
                    ToolCommand {
                        role: compile::compiler_role(Language::of(&incore.source)),
                        program: tc.compiler_for(Language::of(&incore.source)).clone(),
                        args,
                        cwd: root.to_path_buf(),
                    },
                    ToolCommand {
                        role: "linker",
                        program: tc.linker.clone(),
                        args: link::link_args(tc, link_script, &[&object, &builtins], &output),
                        cwd: out_dir.to_path_buf(),
                    },
                ],
                output,
            }
        }
        Job::Host(host) => {
            // The driver's text is written as `u<idx>-<driver name>`.
            let object = out_dir.join(format!("u{idx}.o"));
            let driver = out_dir.join(format!("u{idx}-{}", compile::HOST_DRIVER_NAME));
            let output = out_dir.join(format!("u{idx}"));
            let mut args = compile::host_object_args(tc, host);
            args.push("-o".into());
            args.push(object.as_os_str().to_owned());
            UnitCommands {
                unit,
                needs_builtins: None,
                commands: vec![
                    ToolCommand {
                        role: "compiler",
                        program: tc.compiler.clone(),
                        args,
                        cwd: root.to_path_buf(),
                    },
                    ToolCommand {
                        role: "compiler",
                        program: tc.compiler.clone(),
                        args: compile::host_link_args(tc, host, &driver, &object, &output),
                        cwd: root.to_path_buf(),
                    },
                ],
                output,
            }
        }
        Job::Orch(orch) => {
            let output = out_dir.join(format!("u{idx}.so"));
            let mut args = compile::orch_args(tc, orch);
            args.push("-o".into());
            args.push(output.as_os_str().to_owned());
            UnitCommands {
                unit,
                needs_builtins: None,
                commands: vec![ToolCommand {
                    role: compile::compiler_role(Language::of(&orch.source)),
                    program: tc.compiler_for(Language::of(&orch.source)).clone(),
                    args,
                    cwd: root.to_path_buf(),
                }],
                output,
            }
        }
    }
}

impl ChipCallable {
    /// A content digest of everything a device receives (label, symbol,
    /// orchestration bytes, and each incore's name, func_id, core and text in
    /// func_id order). Equal digests mean byte-identical callables, so it
    /// can show that a build does not depend on worker count or finish order.
    pub fn digest(&self) -> UnitKey {
        let mut h = blake3::Hasher::new();
        // Length prefixes keep field boundaries unambiguous.
        let mut field = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(b"chip-callable-v1");
        field(self.label.as_bytes());
        field(self.orch_symbol.as_bytes());
        field(&self.orch_so);
        for k in &self.incores {
            field(k.name.as_bytes());
            field(&k.func_id.to_le_bytes());
            field(k.core.as_str().as_bytes());
            // Image kernels keep the digest they always had.
            if k.kind.is_hosted() {
                field(k.kind.as_str().as_bytes());
            }
            field(&k.text);
        }
        UnitKey(*h.finalize().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::{IncoreImage, IncoreKind, IncoreUnit, OrchUnit};

    fn spec(label: &str, sources: &[&str]) -> CallableSpec {
        CallableSpec {
            label: label.into(),
            orchestration: OrchUnit {
                name: "orch".into(),
                source: "orch.c".into(),
                function: "entry".into(),
                include_dirs: vec![],
                defines: vec![],
                flags: Vec::new(),
            },
            incores: sources
                .iter()
                .enumerate()
                .map(|(i, s)| IncoreUnit {
                    name: format!("k{i}"),
                    func_id: i as u32,
                    core: if i % 2 == 0 {
                        CoreType::Aiv
                    } else {
                        CoreType::Aic
                    },
                    kind: IncoreKind::Image,
                    source: (*s).into(),
                    include_dirs: vec![],
                    defines: vec![],
                    flags: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn outline_maps_callables_onto_shared_units() {
        let specs = [spec("a", &["x.c", "y.c"]), spec("b", &["x.c"])];
        let outline = plan_outline(&specs);
        assert_eq!(outline.units.len(), 3, "orch.c, x.c as aiv, y.c as aic");
        assert_eq!(outline.callables[0], Some(vec![0, 1, 2]));
        assert_eq!(outline.callables[1], Some(vec![0, 1]));
        assert_eq!(outline.units[1].display, "a/k0");
    }

    #[test]
    fn cxx_units_render_with_the_cxx_compiler_and_flags() {
        let tc = Toolchain::builtin("a2a3sim")
            .expect("toolchain")
            .with_cxx("/opt/bin/g++-x");
        let mut specs = [spec("a", &["x.cpp", "y.c"])];
        specs[0].orchestration.source = "orch.cc".into();
        let rendered = render_commands(&tc, Path::new("/root"), &specs, Path::new("/tmp/o"));
        let program = |unit: usize| rendered.units[unit].commands[0].program.clone();
        let has_rtti_flag = |unit: usize| {
            rendered.units[unit].commands[0]
                .args
                .iter()
                .any(|a| a == "-fno-rtti")
        };
        assert_eq!(program(0), PathBuf::from("/opt/bin/g++-x"), "orch.cc");
        assert_eq!(program(1), PathBuf::from("/opt/bin/g++-x"), "x.cpp");
        assert_eq!(program(2), PathBuf::from("cc"), "y.c");
        assert!(has_rtti_flag(0) && has_rtti_flag(1) && !has_rtti_flag(2));
        assert_eq!(rendered.units[1].commands[0].role, "C++ compiler");
    }

    #[test]
    fn rendered_commands_match_the_plan_and_write_under_out_dir() {
        let tc = Toolchain::builtin("a2a3sim")
            .expect("toolchain")
            .with_search_path(std::env::var_os("PATH"));
        let specs = [spec("a", &["x.c", "y.c"])];
        let out = Path::new("/tmp/scene-outline-test");
        let rendered = render_commands(&tc, Path::new("/root"), &specs, out);
        assert_eq!(rendered.units.len(), 3);
        assert_eq!(rendered.builtins.len(), 2);
        let orch = &rendered.units[0];
        assert_eq!(orch.commands.len(), 1);
        assert!(orch.output.starts_with(out));
        let incore = &rendered.units[2];
        assert_eq!(incore.needs_builtins, Some(CoreType::Aic));
        let [compile, link] = incore.commands.as_slice() else {
            panic!("incore = compile + link");
        };
        assert_eq!(compile.cwd, Path::new("/root"));
        let compile_sh = compile.to_shell();
        assert!(
            compile_sh.contains(" -c y.c -o /tmp/scene-outline-test/u2.o"),
            "{compile_sh}"
        );
        assert!(compile_sh.contains("-DSCENE_CORE_AIC=1"), "{compile_sh}");
        let link_sh = link.to_shell();
        assert!(link_sh.contains("scene_builtins_aic.o"), "{link_sh}");
        assert!(
            link_sh.contains("-T /tmp/scene-outline-test/kernel.ld") || cfg!(target_os = "macos")
        );
    }

    #[test]
    fn digest_covers_every_byte_a_device_receives() {
        let base = ChipCallable {
            label: "s".into(),
            orch_so: vec![1, 2, 3],
            orch_symbol: "entry".into(),
            incores: vec![IncoreImage {
                name: "k".into(),
                func_id: 0,
                core: CoreType::Aiv,
                kind: IncoreKind::Image,
                text: vec![0xc3],
            }],
        };
        let mut text = base.clone();
        text.incores[0].text = vec![0x90];
        let mut so = base.clone();
        so.orch_so.push(4);
        let mut core = base.clone();
        core.incores[0].core = CoreType::Aic;
        assert_eq!(base.digest(), base.clone().digest());
        for other in [&text, &so, &core] {
            assert_ne!(base.digest(), other.digest());
        }
    }
}
