//! Compiler invocations: incore objects, the builtins object, and
//! orchestration shared objects.
//!
//! The compiler always runs with the root as its working directory and is
//! given root-relative paths, so `__FILE__` and diagnostics read the same on
//! every machine.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use scene_util::Cancel;

use crate::error::{CompileError, Stage};
use crate::process::Invocation;
use crate::toolchain::Toolchain;
use crate::unit::{CoreType, HostUnit, IncoreUnit, Language, OrchUnit};

/// `-D` flags; an empty value defines the name without one (i.e. as `1`).
pub(crate) fn define_flags(defines: &[(String, String)]) -> impl Iterator<Item = OsString> + '_ {
    defines.iter().map(|(name, value)| {
        if value.is_empty() {
            OsString::from(format!("-D{name}"))
        } else {
            OsString::from(format!("-D{name}={value}"))
        }
    })
}

fn include_flags(dirs: &[PathBuf]) -> impl Iterator<Item = OsString> + '_ {
    dirs.iter().map(|dir| {
        let mut flag = OsString::from("-I");
        flag.push(dir.as_os_str());
        flag
    })
}

fn os(flags: &[String]) -> impl Iterator<Item = OsString> + '_ {
    flags.iter().map(OsString::from)
}

/// Fails with the file's name before the compiler gets a chance to fail
/// less clearly.
pub(crate) fn require_source(root: &Path, source: &Path) -> Result<(), CompileError> {
    if root.join(source).is_file() {
        Ok(())
    } else {
        Err(CompileError::MissingSource {
            path: source.to_path_buf(),
            root: root.to_path_buf(),
        })
    }
}

/// The compiler arguments for an incore object (without `-o`).
pub(crate) fn incore_args(tc: &Toolchain, unit: &IncoreUnit) -> Vec<OsString> {
    let mut args: Vec<OsString> = os(&tc.incore_flags).collect();
    args.extend(os(tc.core_flags(unit.core)));
    if Language::of(&unit.source) == Language::Cxx {
        args.extend(os(&tc.cxx_flags));
    }
    args.extend(os(&unit.flags));
    args.extend(define_flags(&unit.defines));
    args.extend(include_flags(&unit.include_dirs));
    args.push("-c".into());
    args.push(unit.source.as_os_str().to_owned());
    args
}

pub(crate) fn compile_incore(
    tc: &Toolchain,
    root: &Path,
    unit: &IncoreUnit,
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    let args = incore_args(tc, unit);
    compile_unit(tc, root, &unit.source, args, out, dep_file, cancel)
}

/// Runs the compiler for a scene's unit (incore or orchestration): its
/// source checked first, `args` plus `-o out` (and `-MD -MF dep_file`), in
/// `root`, with a C++ failure explained by the rule it breaks.
fn compile_unit(
    tc: &Toolchain,
    root: &Path,
    source: &Path,
    args: Vec<OsString>,
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    let language = Language::of(source);
    let compiler = (compiler_role(language), tc.compiler_for(language).as_path());
    run_compiler(compiler, root, source, args, out, dep_file, cancel)
        .map_err(|e| explain_compile_failure(language, e))
}

/// Runs `compiler` (its role in errors, its program) on `source` in
/// `root`: the source checked first, `args` plus `-MD -MF dep_file` and
/// `-o out`.
fn run_compiler(
    (role, program): (&'static str, &Path),
    root: &Path,
    source: &Path,
    mut args: Vec<OsString>,
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    require_source(root, source)?;
    if let Some(dep_file) = dep_file {
        args.extend(["-MD".into(), "-MF".into(), dep_file.as_os_str().to_owned()]);
    }
    args.push("-o".into());
    args.push(out.as_os_str().to_owned());
    Invocation {
        role,
        stage: Stage::Compile,
        program,
        args,
        cwd: root,
    }
    .run(cancel)
}

/// The bytes a compile wrote to `out` (a shared object).
fn read_output(out: &Path) -> Result<Vec<u8>, CompileError> {
    std::fs::read(out).map_err(|source| CompileError::Read {
        path: out.to_path_buf(),
        source,
    })
}

/// How the hosted C++ compiler is named in errors and rendered commands.
pub(crate) const HOSTED_COMPILER: &str = "hosted C++ compiler";

/// How a compiler is named in errors: `compiler` or `C++ compiler`.
pub(crate) fn compiler_role(language: Language) -> &'static str {
    match language {
        Language::C => "compiler",
        Language::Cxx => "C++ compiler",
    }
}

/// Compiles the toolchain's builtins for one core type into `work_dir`.
pub(crate) fn compile_builtins(
    tc: &Toolchain,
    core: CoreType,
    work_dir: &Path,
    cancel: &Cancel,
) -> Result<PathBuf, CompileError> {
    let source = work_dir.join(BUILTINS_SOURCE_NAME);
    // Several core types may race to write it; identical content makes
    // that harmless, and a per-core name keeps the objects apart.
    std::fs::write(&source, &tc.builtins_source).map_err(|e| CompileError::WorkDir {
        path: source.clone(),
        source: e,
    })?;
    let out = work_dir.join(builtins_object_name(core));
    Invocation {
        role: "compiler",
        stage: Stage::CompileBuiltins,
        program: &tc.compiler,
        args: builtins_args(tc, core, &out),
        cwd: work_dir,
    }
    .run(cancel)?;
    Ok(out)
}

/// File name of the builtins source [`compile_builtins`] writes.
pub(crate) const BUILTINS_SOURCE_NAME: &str = "scene_builtins.c";

pub(crate) fn builtins_object_name(core: CoreType) -> String {
    format!("scene_builtins_{core}.o")
}

/// The compiler arguments of [`compile_builtins`], run in the directory
/// holding [`BUILTINS_SOURCE_NAME`].
pub(crate) fn builtins_args(tc: &Toolchain, core: CoreType, out: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = os(&tc.incore_flags).collect();
    args.extend(os(tc.core_flags(core)));
    args.extend(os(&tc.builtins_flags));
    args.extend(["-c".into(), BUILTINS_SOURCE_NAME.into(), "-o".into()]);
    args.push(out.as_os_str().to_owned());
    args
}

/// The compiler arguments for an orchestration shared object (without `-o`).
pub(crate) fn orch_args(tc: &Toolchain, unit: &OrchUnit) -> Vec<OsString> {
    let mut args: Vec<OsString> = os(&tc.orch_flags).collect();
    if Language::of(&unit.source) == Language::Cxx {
        args.extend(os(&tc.cxx_flags));
    }
    args.extend(define_flags(&unit.defines));
    args.extend(include_flags(&unit.include_dirs));
    args.push(unit.source.as_os_str().to_owned());
    args
}

/// The compiler arguments of a hosted incore, without its source or `-o`:
/// the hosted flags, the core's flags, the unit's own flags, `-isystem` per
/// include root, the unit's defines and include dirs. Its precompiled
/// preamble is built with exactly these (a compiler refuses a PCH built
/// with other macros).
fn hosted_flags(tc: &Toolchain, unit: &IncoreUnit) -> Vec<OsString> {
    let mut args: Vec<OsString> = os(&tc.hosted_flags).collect();
    if let Some(shim) = &tc.hosted_bf16_shim {
        args.extend(crate::bf16::shim_flags(shim));
    }
    args.extend(os(tc.core_flags(unit.core)));
    args.extend(os(&unit.flags));
    if let Some(overlay) = &tc.hosted_pto_overlay {
        args.extend(crate::pto_fast::overlay_flags(overlay));
    }
    for root in &tc.include_roots {
        args.push("-isystem".into());
        args.push(root.as_os_str().to_owned());
    }
    args.extend(define_flags(&unit.defines));
    args.extend(include_flags(&unit.include_dirs));
    args
}

/// The compiler arguments for a hosted incore's shared object (without
/// `-o`).
pub(crate) fn hosted_args(tc: &Toolchain, unit: &IncoreUnit) -> Vec<OsString> {
    let mut args = hosted_flags(tc, unit);
    args.push(unit.source.as_os_str().to_owned());
    args
}

/// A hosted compile from a precompiled preamble (see `preamble.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PchUse<'a> {
    /// The preamble header, beside its PCH (`<header>.gch`, which gcc and
    /// clang both look for when the header is named by `-include`).
    pub header: &'a Path,
    /// The source's copy with its preamble blanked (absolute).
    pub copy: &'a Path,
}

/// The PCH file compilers look for beside `header`.
pub(crate) fn pch_file(header: &Path) -> PathBuf {
    let mut name = header.as_os_str().to_owned();
    name.push(".gch");
    PathBuf::from(name)
}

/// Builds a hosted incore into the shared object `out` with the hosted
/// C++ compiler, from its precompiled preamble when given one; returns its
/// bytes.
pub(crate) fn compile_hosted(
    tc: &Toolchain,
    root: &Path,
    unit: &IncoreUnit,
    pch: Option<PchUse<'_>>,
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<Vec<u8>, CompileError> {
    let compiler = (HOSTED_COMPILER, tc.hosted_cxx.as_path());
    let args = match pch {
        None => hosted_args(tc, unit),
        Some(pch) => {
            // First, so quoted includes search the original's directory
            // right after the copy's own (which holds nothing else).
            let dir = unit.source.parent().filter(|d| !d.as_os_str().is_empty());
            let mut args = vec!["-iquote".into(), dir.unwrap_or(Path::new(".")).into()];
            args.extend(hosted_flags(tc, unit));
            args.push("-include".into());
            args.push(pch.header.as_os_str().to_owned());
            args.push(pch.copy.as_os_str().to_owned());
            args
        }
    };
    let source = pch.map_or(unit.source.as_path(), |p| p.copy);
    run_compiler(compiler, root, source, args, out, dep_file, cancel)?;
    let bytes = read_output(out)?;
    crate::unique::refuse_gnu_unique(&bytes, &tc.hosted_cxx)?;
    Ok(bytes)
}

/// Precompiles the preamble `header` for `unit` into `out`, with the
/// unit's own flags; `clang`: told not to record input mtimes.
pub(crate) fn compile_preamble(
    tc: &Toolchain,
    root: &Path,
    unit: &IncoreUnit,
    (header, clang): (&Path, bool),
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    let compiler = (HOSTED_COMPILER, tc.hosted_cxx.as_path());
    let mut args = hosted_flags(tc, unit);
    if clang {
        args.extend(["-Xclang".into(), "-fno-pch-timestamp".into()]);
    }
    args.extend(["-x".into(), "c++-header".into()]);
    args.push(header.as_os_str().to_owned());
    run_compiler(compiler, root, header, args, out, dep_file, cancel)
}

pub(crate) fn compile_orchestration(
    tc: &Toolchain,
    root: &Path,
    unit: &OrchUnit,
    out: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<Vec<u8>, CompileError> {
    let args = orch_args(tc, unit);
    compile_unit(tc, root, &unit.source, args, out, dep_file, cancel)?;
    let bytes = read_output(out)?;
    crate::unique::refuse_gnu_unique(&bytes, tc.compiler_for(Language::of(&unit.source)))?;
    Ok(bytes)
}

/// A host program's flags besides its defines and include dirs: C at
/// `-O2` (gnu11), plus the platform's `-D` flags as the orchestration sees
/// them.
pub(crate) fn host_flags(tc: &Toolchain) -> Vec<String> {
    let mut flags = vec!["-O2".to_owned(), "-std=gnu11".to_owned()];
    flags.extend(
        tc.orch_flags
            .iter()
            .filter(|f| f.starts_with("-D"))
            .cloned(),
    );
    flags
}

/// The flags every compile of a host program (its source, its driver)
/// gets.
fn host_common_args(tc: &Toolchain, unit: &HostUnit) -> Vec<OsString> {
    let mut args: Vec<OsString> = host_flags(tc).into_iter().map(OsString::from).collect();
    args.extend(define_flags(&unit.defines));
    args.extend(include_flags(&unit.include_dirs));
    args
}

/// The compiler arguments of a host program's source object (without
/// `-o`).
pub(crate) fn host_object_args(tc: &Toolchain, unit: &HostUnit) -> Vec<OsString> {
    let mut args = host_common_args(tc, unit);
    args.push("-c".into());
    args.push(unit.source.as_os_str().to_owned());
    args
}

/// The compiler arguments that compile the driver and link it with the
/// source's object into the executable `out`.
pub(crate) fn host_link_args(
    tc: &Toolchain,
    unit: &HostUnit,
    driver: &Path,
    object: &Path,
    out: &Path,
) -> Vec<OsString> {
    let mut args = host_common_args(tc, unit);
    args.push(driver.as_os_str().to_owned());
    args.push(object.as_os_str().to_owned());
    args.push("-o".into());
    args.push(out.as_os_str().to_owned());
    args
}

/// File name of the driver [`compile_host`] writes beside its object.
pub(crate) const HOST_DRIVER_NAME: &str = "scene_host_driver.c";

/// Builds a host program into the executable `<dir>/<name>` with the C
/// compiler: the source into an object (its dependencies into
/// `dep_file`), then the driver (written into `dir`) compiled and linked
/// with it. Returns the executable's bytes.
pub(crate) fn compile_host(
    tc: &Toolchain,
    root: &Path,
    unit: &HostUnit,
    dir: &Path,
    dep_file: Option<&Path>,
    cancel: &Cancel,
) -> Result<Vec<u8>, CompileError> {
    let work_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CompileError::WorkDir { path, source }
    };
    std::fs::create_dir_all(dir).map_err(work_err(dir))?;
    let driver = dir.join(HOST_DRIVER_NAME);
    std::fs::write(&driver, unit.driver.as_bytes()).map_err(work_err(&driver))?;
    // Named after the source, so a link error names it.
    let stem = unit.source.file_stem().unwrap_or(unit.source.as_os_str());
    let object = dir.join(Path::new(stem).with_extension("o"));
    let compiler = ("compiler", tc.compiler.as_path());
    let args = host_object_args(tc, unit);
    run_compiler(
        compiler,
        root,
        &unit.source,
        args,
        &object,
        dep_file,
        cancel,
    )?;
    let out = dir.join("host");
    Invocation {
        role: "compiler",
        stage: Stage::Link,
        program: &tc.compiler,
        args: host_link_args(tc, unit, &driver, &object, &out),
        cwd: root,
    }
    .run(cancel)?;
    read_output(&out)
}

/// Puts the rule in front of a C++ compile failure that one explains.
pub(crate) fn explain_compile_failure(language: Language, error: CompileError) -> CompileError {
    if language != Language::Cxx {
        return error;
    }
    match error.stderr().and_then(crate::rules::rule_of_compile_error) {
        Some(rule) => CompileError::Rule {
            rule,
            cause: Box::new(error),
        },
        None => error,
    }
}

/// What `probe_hosted` compiles: the C++ language and library features
/// PTO-ISA's CPU backend uses (a compiler that lacks one fails on the
/// first PTO header, with pages of template errors).
pub const HOSTED_PROBE_SOURCE: &str = r#"
#include <bit>
#include <concepts>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>
#if __cplusplus < 202002L
#error "not C++20"
#endif
template <typename T>
concept Numeric = std::is_arithmetic_v<std::remove_cvref_t<T>>;
template <Numeric T>
constexpr T twice(T v) { return v + v; }
static_assert(std::bit_cast<std::uint32_t>(1.0f) == 0x3f800000u);
static_assert(twice(21) == 42);
thread_local std::vector<float> scratch;
extern "C" int scene_hosted_probe(const float *p, unsigned n) {
    std::span<const float> s(p, n);
    std::mutex m;
    std::lock_guard<std::mutex> g(m);
    scratch.assign(s.begin(), s.end());
    return static_cast<int>(scratch.size());
}
"#;

/// Added to the probe when an include root holds PTO-ISA
/// (`pto/pto-inst.hpp`): `static_assert(false)` in a template never
/// instantiated (P2593: g++ 13, clang 17) and `_Float16` (clang 15 on
/// x86-64), both in its headers; Debian 12's g++ 12 and clang 14 pass the
/// plain probe and fail these.
pub const PTO_PROBE_SOURCE: &str = r#"
template <typename T>
struct NotForThis {
    static void apply() { static_assert(false, "never instantiated"); }
};
_Float16 half_one = static_cast<_Float16>(1.0f);
"#;

/// What [`probe_hosted`] compiles for `tc`: [`HOSTED_PROBE_SOURCE`], and
/// [`PTO_PROBE_SOURCE`] when an include root holds PTO-ISA.
pub(crate) fn hosted_probe_text(tc: &Toolchain) -> String {
    let pto = tc
        .include_roots
        .iter()
        .any(|r| r.join("pto").join("pto-inst.hpp").is_file());
    if pto {
        format!("{HOSTED_PROBE_SOURCE}{PTO_PROBE_SOURCE}")
    } else {
        HOSTED_PROBE_SOURCE.to_owned()
    }
}

/// Checks, in `work_dir`, that `tc.hosted_cxx` with `tc.hosted_flags` builds
/// a shared object from `text` ([`hosted_probe_text`]). Run before the
/// first hosted unit, unless the cache remembers it passed.
pub(crate) fn probe_hosted(
    tc: &Toolchain,
    text: &str,
    work_dir: &Path,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    let unavailable = |why: String| CompileError::HostedToolchain {
        compiler: tc.hosted_cxx.clone(),
        why,
    };
    let source = work_dir.join("hosted-probe.cpp");
    std::fs::write(&source, text).map_err(|e| CompileError::WorkDir {
        path: source.clone(),
        source: e,
    })?;
    let out = work_dir.join("hosted-probe.so");
    let mut args: Vec<OsString> = tc.hosted_flags.iter().map(OsString::from).collect();
    args.push(source.clone().into_os_string());
    args.push("-o".into());
    args.push(out.into_os_string());
    let run = Invocation {
        role: HOSTED_COMPILER,
        stage: Stage::Compile,
        program: &tc.hosted_cxx,
        args,
        cwd: work_dir,
    }
    .run(cancel);
    match run {
        Ok(()) => Ok(()),
        Err(e) if e.is_cancelled() => Err(e),
        Err(CompileError::Tool { stderr, .. }) => Err(unavailable(
            stderr
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("the probe did not compile")
                .trim()
                .to_owned(),
        )),
        Err(e) => Err(unavailable(e.to_string())),
    }
}
