//! Hosted incores (issue 29): hosted C++20 built into a shared object with
//! the toolchain's hosted compiler, cached like any unit, and rebuilt when
//! a header under an include root (a PTO-ISA checkout, say) changes.

mod common;

use std::num::NonZeroUsize;
use std::path::Path;

use common::{ORCH_SRC, Root, incore, orch, spec, toolchain};
use scene_kernels::cache::CacheConfig;
use scene_kernels::{
    ArgsConvention, BuildOptions, BuildOutput, Builder, CallableSpec, CoreType, IncoreKind,
    IncoreUnit, Toolchain, UnitOutcome,
};

/// A kernel in the style of a tile library: a class template with
/// fixed-size storage, thread-local scratch, `<vector>` and `<cmath>`, its
/// operation from `tile_ops.hpp` under an include root.
const KERNEL: &str = r#"
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>
#include <tile_ops.hpp>
#include "scene_kernel.h"

template <typename T, int Rows, int Cols>
struct Tile {
    static_assert(std::is_same_v<std::remove_cvref_t<T>, float>);
    T data[Rows * Cols];
};

thread_local Tile<float, 1, 64> scratch;

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    std::vector<float> seen;
    SCENE_FOR_BLOCK_RANGE(ka, n, i) {
        scratch.data[i % 64] = tile_op(x[i]);
        seen.push_back(std::sqrt(scratch.data[i % 64] * scratch.data[i % 64]));
        x[i] = scratch.data[i % 64];
    }
}
"#;

fn hosted(unit: IncoreUnit) -> IncoreUnit {
    IncoreUnit {
        kind: IncoreKind::Hosted(ArgsConvention::Scene),
        ..unit
    }
}

/// `s`: the test orchestration and `kernel` as hosted incore `k`
/// (func_id 0, aiv), both written into `root`.
fn hosted_spec(root: &Root, kernel: &str) -> CallableSpec {
    root.write("orch.c", ORCH_SRC);
    root.write("k.cpp", kernel);
    spec(
        "s",
        orch("orch.c", "run_orch"),
        vec![hosted(incore("k", 0, CoreType::Aiv, "k.cpp"))],
    )
}

fn build(root: &Path, cache: &Path, tc: &Toolchain, spec: &CallableSpec) -> BuildOutput {
    let options = BuildOptions {
        workers: NonZeroUsize::new(2).expect("non-zero"),
        cache: Some(CacheConfig::new(cache)),
        ..BuildOptions::default()
    };
    let builder = Builder::new(root, tc.clone(), options).expect("builder");
    builder.build_all(std::slice::from_ref(spec))
}

fn outcome(out: &BuildOutput, unit: &str) -> UnitOutcome {
    out.units
        .iter()
        .find(|u| u.unit == unit)
        .unwrap_or_else(|| panic!("no {unit}: {:?}", out.units))
        .outcome
}

fn shared_object(out: &BuildOutput) -> Vec<u8> {
    let callable = out.callables[0]
        .as_ref()
        .unwrap_or_else(|e| panic!("builds: {e}"));
    let k = &callable.incores[0];
    assert_eq!(k.kind, IncoreKind::Hosted(ArgsConvention::Scene));
    k.text.clone()
}

fn is_shared_object(bytes: &[u8]) -> bool {
    // ELF, type ET_DYN (a shared object), little-endian field.
    bytes.starts_with(b"\x7fELF") && bytes.get(16..18) == Some(&[3, 0])
}

#[test]
fn a_hosted_kernel_is_a_cached_shared_object_that_follows_its_include_root() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the ELF checks are Linux's");
        return;
    }
    let root = Root::new();
    let roots = tempfile::tempdir().expect("include root");
    let cache = tempfile::tempdir().expect("cache");
    std::fs::write(
        roots.path().join("tile_ops.hpp"),
        "inline float tile_op(float v) { return v + 1.0f; }\n",
    )
    .expect("header");
    let mut tc = toolchain();
    tc.include_roots = vec![roots.path().to_path_buf()];
    let spec = hosted_spec(&root, KERNEL);

    let first = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(outcome(&first, "s/k"), UnitOutcome::Compiled);
    let so = shared_object(&first);
    assert!(is_shared_object(&so), "a shared object, not an image");

    let again = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(
        outcome(&again, "s/k"),
        UnitOutcome::Cached,
        "{:?}",
        again.units
    );
    assert_eq!(shared_object(&again), so);
    let k = again.units.iter().find(|u| u.unit == "s/k").expect("k");
    assert_eq!(k.deps_unchecked, None, "the compiler's list backs the hit");

    // A header under the include root is a dependency like any other.
    std::fs::write(
        roots.path().join("tile_ops.hpp"),
        "inline float tile_op(float v) { return v * 2.0f; }\n",
    )
    .expect("header");
    let edited = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(
        outcome(&edited, "s/k"),
        UnitOutcome::Compiled,
        "{:?}",
        edited.units
    );
    assert_ne!(shared_object(&edited), so);

    // The same source as an image kernel is another unit (another key):
    // it does not take the hosted entry.
    let image_spec = common::spec(
        "s",
        orch("orch.c", "run_orch"),
        vec![incore("k", 0, CoreType::Aiv, "k.cpp")],
    );
    let image = build(root.path(), cache.path(), &tc, &image_spec);
    assert_ne!(
        outcome(&image, "s/k"),
        UnitOutcome::Cached,
        "an image build is not served the hosted entry"
    );
}

#[test]
fn a_missing_hosted_compiler_names_itself() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut tc = toolchain();
    tc.hosted_cxx = "no-such-c++-compiler".into();
    let spec = hosted_spec(&root, KERNEL);
    let out = build(root.path(), cache.path(), &tc, &spec);
    let err = out.callables[0].as_ref().expect_err("cannot build");
    let text = format!("{err}");
    assert!(
        text.contains("no-such-c++-compiler") && text.contains("hosted C++ compiler"),
        "{text}"
    );
}

/// A compiler (or flags) without C++20 fails the first hosted unit with
/// the probe's message listing what works, not pages of template errors.
#[test]
fn a_compiler_without_cxx20_says_what_works() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut tc = toolchain();
    for flag in tc.hosted_flags.iter_mut() {
        if flag == "-std=c++20" {
            *flag = "-std=c++17".to_owned();
        }
    }
    let spec = hosted_spec(&root, KERNEL);
    let out = build(root.path(), cache.path(), &tc, &spec);
    let err = out.callables[0].as_ref().expect_err("cannot build");
    let text = format!("{err}");
    for needed in [
        "cannot build hosted kernels",
        "g++ >= 13",
        "zig c++",
        "hosted_cxx",
    ] {
        assert!(text.contains(needed), "`{needed}` not in: {text}");
    }
}

/// With PTO-ISA under an include root the probe asks for what its headers
/// use. Whether the machine's `c++` has it decides the outcome, so the test
/// runs the probe's extra source itself to know which outcome to expect.
#[test]
fn a_pto_include_root_asks_the_probe_for_what_pto_needs() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let pto = tempfile::tempdir().expect("pto root");
    std::fs::create_dir_all(pto.path().join("pto")).expect("mkdir");
    std::fs::write(pto.path().join("pto/pto-inst.hpp"), "#pragma once\n").expect("header");
    let mut tc = toolchain();
    tc.include_roots = vec![pto.path().to_path_buf()];
    let spec = hosted_spec(
        &root,
        &KERNEL.replace(
            "#include <tile_ops.hpp>",
            "inline float tile_op(float v) { return v; }",
        ),
    );
    let probe = root.write(
        "probe.cpp",
        &format!(
            "{}{}",
            scene_kernels::HOSTED_PROBE_SOURCE,
            scene_kernels::PTO_PROBE_SOURCE
        ),
    );
    let capable = std::process::Command::new(&tc.hosted_cxx)
        .args(["-std=c++20", "-fsyntax-only"])
        .arg(root.path().join(probe))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("c++ runs")
        .success();
    let out = build(root.path(), cache.path(), &tc, &spec);
    match (&out.callables[0], capable) {
        (Ok(_), true) => {}
        (Err(e), false) => {
            let text = e.to_string();
            assert!(text.contains("PTO-ISA also"), "{text}");
        }
        (Ok(_), false) => panic!("built with a compiler that cannot build PTO-ISA"),
        (Err(e), true) => panic!("refused a capable compiler: {e}"),
    }
}

/// A hosted compiler that logs each command line to `log` and runs `c++`.
fn logging_cxx(dir: &Path, log: &Path) -> std::path::PathBuf {
    let script = dir.join("logging-c++");
    scene_util::write_executable(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec c++ \"$@\"\n",
            log.display()
        ),
    )
    .expect("script");
    script
}

fn logged(log: &Path, needle: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Opening directives (a licence comment, `<cstdint>`, a guarded macro,
/// then a header of the include root) that differ between kernels only in
/// comments: one precompiled preamble for both.
fn opening(comment: &str) -> String {
    format!(
        "/* {comment} */\n#include <cstdint>\n#ifndef TILE\n#define TILE 64 // tile size\n#endif\n\
         #include <lib/ops.hpp>\n"
    )
}

const BODY: &str = r#"#include "scene_kernel.h"
#include "near.h"
#define STR2(x) #x
#define STR(x) STR2(x)
extern "C" const char where_built[] = __FILE__ ":" STR(__LINE__) " " NEAR;
extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = op(x[i]) + TILE; }
}
"#;

/// Kernels that open with the same directives compile from one
/// precompiled preamble, built once and then cached like a unit; the
/// kernel is compiled exactly as written (its own line numbers, file name
/// and quoted includes; an unguarded header of the preamble read once),
/// and `hosted_pch = false` compiles without it.
#[test]
fn kernels_that_open_alike_share_one_cached_precompiled_preamble() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the logging compiler is a shell script for c++ on Linux");
        return;
    }
    let root = Root::new();
    let roots = tempfile::tempdir().expect("include root");
    let cache = tempfile::tempdir().expect("cache");
    let tools = tempfile::tempdir().expect("tools");
    let log = tools.path().join("log");
    std::fs::create_dir_all(roots.path().join("lib")).expect("mkdir");
    // Unguarded: reading the preamble twice would redefine `op`.
    std::fs::write(
        roots.path().join("lib/ops.hpp"),
        "inline float op(float v) { return v + 1.0f; }\n",
    )
    .expect("header");
    root.write("orch.c", ORCH_SRC);
    root.write("a/near.h", "#define NEAR \"near-a\"\n");
    root.write("b/near.h", "#define NEAR \"near-b\"\n");
    root.write("a/k.cpp", &format!("{}{BODY}", opening("kernel a")));
    root.write(
        "b/k.cpp",
        &format!("{}{BODY}", opening("kernel b, other text")),
    );
    let mut tc = toolchain();
    tc.include_roots = vec![roots.path().to_path_buf()];
    tc.hosted_cxx = logging_cxx(tools.path(), &log);
    let spec = spec(
        "s",
        orch("orch.c", "run_orch"),
        vec![
            hosted(incore("ka", 0, CoreType::Aiv, "a/k.cpp")),
            hosted(incore("kb", 1, CoreType::Aiv, "b/k.cpp")),
        ],
    );

    let first = build(root.path(), cache.path(), &tc, &spec);
    let callable = first.callables[0]
        .as_ref()
        .unwrap_or_else(|e| panic!("builds: {e}"));
    assert_eq!(logged(&log, "c++-header"), 1, "one preamble for both");
    assert_eq!(logged(&log, "-include "), 2, "both compiled from it");
    // `where_built` is line 5 of BODY, after the six lines of `opening`.
    for (k, file, near) in [(0, "a/k.cpp", "near-a"), (1, "b/k.cpp", "near-b")] {
        let so = &callable.incores[k].text;
        assert!(is_shared_object(so));
        let expected = format!("{file}:11 {near}");
        assert!(contains(so, &expected), "`{expected}` in {file}'s object");
    }

    // A new process, one kernel edited: its preamble comes from the cache.
    let a = root.path().join("a/k.cpp");
    let edited = std::fs::read_to_string(&a)
        .expect("a")
        .replace("+ TILE", "- TILE");
    std::fs::write(&a, edited).expect("edit");
    let second = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(outcome(&second, "s/ka"), UnitOutcome::Compiled);
    assert_eq!(outcome(&second, "s/kb"), UnitOutcome::Cached);
    assert_eq!(logged(&log, "c++-header"), 1, "not compiled again");
    assert_eq!(logged(&log, "-include "), 3);
    let ka = second.units.iter().find(|u| u.unit == "s/ka").expect("ka");
    assert_eq!(ka.deps_unchecked, None, "its compile's reads are recorded");

    // Its header is a dependency of the unit compiled from the preamble.
    std::fs::write(
        roots.path().join("lib/ops.hpp"),
        "inline float op(float v) { return v * 3.0f; }\n",
    )
    .expect("header");
    let third = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(outcome(&third, "s/ka"), UnitOutcome::Compiled);
    assert_eq!(outcome(&third, "s/kb"), UnitOutcome::Compiled);
    assert_eq!(
        logged(&log, "c++-header"),
        2,
        "a new preamble for the new header"
    );

    // A compile error after the preamble names the original file and line.
    let broken = std::fs::read_to_string(&a)
        .expect("a")
        .replace("x[i] = op", "x[i] = no_such_op");
    std::fs::write(&a, broken).expect("break");
    let failed = build(root.path(), cache.path(), &tc, &spec);
    let err = failed.callables[0].as_ref().expect_err("a/k.cpp is broken");
    let text = format!("{err:?}");
    assert!(text.contains("a/k.cpp:15:"), "{text}");

    // Off: every kernel parses its headers itself (and is another key).
    std::fs::write(&a, format!("{}{BODY}", opening("kernel a"))).expect("restore");
    tc.hosted_pch = false;
    let includes = logged(&log, "-include ");
    let off = build(root.path(), cache.path(), &tc, &spec);
    assert_eq!(outcome(&off, "s/ka"), UnitOutcome::Compiled);
    assert_eq!(outcome(&off, "s/kb"), UnitOutcome::Compiled);
    assert_eq!(logged(&log, "-include "), includes);
    assert_eq!(
        logged(&log, "hosted-probe.cpp"),
        1,
        "five builders, one probe: the cache remembers it passed"
    );
}

/// Every kind of object g++ binds `STB_GNU_UNIQUE` (an inline variable, a
/// static local of an inline function, a template static data member, an
/// `inline thread_local`): what two scenes' headers may both declare.
const UNIQUE_HEADER: &str = r#"#pragma once
inline float bias = 1.0f;
inline float &scale() { static float s = 2.0f; return s; }
template <typename T> struct Table { static T first[4]; };
template <typename T> T Table<T>::first[4] = {T(3)};
inline thread_local float stage[16] = {4.0f};
inline float op(float v) { return (v + bias) * scale() + Table<float>::first[0] + stage[0]; }
"#;

/// Whether `c++` takes `-fno-gnu-unique` (g++ does, clang refuses it).
fn cxx_takes_no_gnu_unique() -> bool {
    std::process::Command::new("c++")
        .args(["-fno-gnu-unique", "-E", "-x", "c++", "/dev/null"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The cache manifests under `cache` that record hosted flags (hosted
/// units and their precompiled preambles).
fn hosted_manifests(cache: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![cache.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("cache dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "manifest.json") {
                let text = std::fs::read_to_string(&path).expect("manifest");
                if text.contains("flags.hosted") {
                    found.push(text);
                }
            }
        }
    }
    found
}

/// g++ gives inline variables, static locals of inline functions, template
/// static data members and `inline thread_local` variables the binding
/// `STB_GNU_UNIQUE`, which glibc shares by name across every library of a
/// device worker and never unloads (issue 38). A hosted kernel, and the
/// precompiled preamble it compiles from (a PCH needs the unit's flags),
/// are built with `-fno-gnu-unique` when the compiler takes it, which both
/// keys record; the shared object defines no such symbol either way.
#[test]
fn hosted_kernels_and_their_preambles_are_built_without_gnu_unique_symbols() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the logging compiler is a shell script for c++ on Linux");
        return;
    }
    let root = Root::new();
    let roots = tempfile::tempdir().expect("include root");
    let cache = tempfile::tempdir().expect("cache");
    let tools = tempfile::tempdir().expect("tools");
    let log = tools.path().join("log");
    std::fs::create_dir_all(roots.path().join("lib")).expect("mkdir");
    std::fs::write(roots.path().join("lib/names.hpp"), UNIQUE_HEADER).expect("header");
    let mut tc = toolchain();
    tc.include_roots = vec![roots.path().to_path_buf()];
    tc.hosted_cxx = logging_cxx(tools.path(), &log);
    let kernel = format!(
        "#include <lib/names.hpp>\n{}",
        KERNEL.replace(
            "#include <tile_ops.hpp>",
            "inline float tile_op(float v) { return op(v); }"
        )
    );
    let spec = hosted_spec(&root, &kernel);
    let out = build(root.path(), cache.path(), &tc, &spec);
    let so = shared_object(&out);
    assert!(is_shared_object(&so));
    assert_eq!(
        scene_kernels::gnu_unique_symbols(&so),
        Vec::<String>::new(),
        "the hosted kernel's shared object"
    );
    let takes = cxx_takes_no_gnu_unique();
    let compiles = std::fs::read_to_string(&log).expect("log");
    let compiles: Vec<&str> = compiles
        .lines()
        .filter(|l| l.contains("c++-header") || l.contains("-include "))
        .collect();
    assert_eq!(
        compiles.len(),
        2,
        "the preamble, then the unit: {compiles:?}"
    );
    for line in &compiles {
        assert_eq!(line.contains(scene_kernels::NO_GNU_UNIQUE), takes, "{line}");
    }
    let manifests = hosted_manifests(cache.path());
    assert_eq!(manifests.len(), 2, "the unit's and the preamble's");
    for m in &manifests {
        assert_eq!(m.contains(scene_kernels::NO_GNU_UNIQUE), takes, "{m}");
    }
}

/// A hosted compiler that takes `-fno-gnu-unique` and ignores it (here a
/// wrapper dropping it before g++), or anything else that brings the
/// binding back (a static C++ library, `-fgnu-unique` in the platform's
/// flags): the unit is refused, naming the compiler, the symbols and the
/// fix, and nothing is cached for it.
#[test]
fn a_hosted_object_that_keeps_gnu_unique_symbols_is_refused_naming_them() {
    if !cfg!(target_os = "linux") || !cxx_takes_no_gnu_unique() {
        eprintln!("skipped: needs c++ to be g++ on Linux (clang never emits STB_GNU_UNIQUE)");
        return;
    }
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let tools = tempfile::tempdir().expect("tools");
    let deaf = tools.path().join("deaf-c++");
    scene_util::write_executable(
        &deaf,
        "#!/bin/sh\nfor a do shift; [ \"$a\" = -fno-gnu-unique ] || set -- \"$@\" \"$a\"; done\nexec c++ \"$@\"\n",
    )
    .expect("script");
    let mut tc = toolchain();
    tc.hosted_cxx = deaf.clone();
    let kernel = format!(
        "{UNIQUE_HEADER}\n{}",
        KERNEL.replace("#pragma once", "").replace(
            "#include <tile_ops.hpp>",
            "inline float tile_op(float v) { return op(v); }"
        )
    );
    let spec = hosted_spec(&root, &kernel);
    let out = build(root.path(), cache.path(), &tc, &spec);
    let err = out.callables[0].as_ref().expect_err("refused");
    let text = err.to_string();
    for needed in [
        "kernel `k`",
        "STB_GNU_UNIQUE",
        "`bias`",
        "scale",
        "Table",
        "`stage`",
        "-fno-gnu-unique",
        deaf.to_str().expect("utf-8"),
    ] {
        assert!(text.contains(needed), "`{needed}` not in: {text}");
    }
    assert_eq!(hosted_manifests(cache.path()), Vec::<String>::new());
}

/// A C++ orchestration is a shared object in the same worker: built with
/// `-fno-gnu-unique` when the compiler takes it, so its inline and
/// template objects are its own (and fresh after a reset).
#[test]
fn a_cxx_orchestration_is_built_without_gnu_unique_symbols() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    root.write(
        "orch.cpp",
        &format!(
            "{UNIQUE_HEADER}\n{}",
            ORCH_SRC.replace("(void)nargs;", "(void)nargs; if (op(1.0f) < 0) return -1;")
        ),
    );
    root.write(
        "k.cpp",
        &KERNEL.replace(
            "#include <tile_ops.hpp>",
            "inline float tile_op(float v) { return v; }",
        ),
    );
    let spec = spec(
        "s",
        orch("orch.cpp", "run_orch"),
        vec![hosted(incore("k", 0, CoreType::Aiv, "k.cpp"))],
    );
    let out = build(root.path(), cache.path(), &toolchain(), &spec);
    let callable = out.callables[0]
        .as_ref()
        .unwrap_or_else(|e| panic!("builds: {e}"));
    assert_eq!(
        scene_kernels::gnu_unique_symbols(&callable.orch_so),
        Vec::<String>::new()
    );
}

/// A hosted kernel that chooses its bf16 type as PTO-ISA's `type.hpp`
/// does (the standard `std::bfloat16_t` when the compiler declares it,
/// else `_Float16`) and refuses to compile with a half: 2^100 survives a
/// bf16 round trip and overflows a half.
const BF16_KERNEL: &str = r#"
#if defined(__has_include) && __has_include(<stdfloat>) && __cplusplus >= 202302L && defined(__STDCPP_BFLOAT16_T__)
#include <stdfloat>
typedef std::bfloat16_t bf16_like_pto;
#else
typedef _Float16 bf16_like_pto;
#endif
#include "scene_kernel.h"
static_assert(static_cast<float>(static_cast<bf16_like_pto>(0x1p100f)) == 0x1p100f,
              "bfloat16_t is not a bfloat16");
extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    x[0] = static_cast<float>(static_cast<bf16_like_pto>(x[0]));
}
"#;

/// Whether `cxx` with `flags` compiles `source` to an object (`zig c++`
/// fails `-fsyntax-only` whatever the source).
fn compiles(cxx: &std::ffi::OsStr, flags: &[&str], source: &str) -> bool {
    let dir = tempfile::tempdir().expect("probe dir");
    let file = dir.path().join("probe.cpp");
    std::fs::write(&file, source).expect("probe source");
    std::process::Command::new(cxx)
        .args(flags)
        .arg("-c")
        .arg(&file)
        .arg("-o")
        .arg(dir.path().join("probe.o"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The bf16 kernel with `cxx` at C++23: built exactly when the compiler
/// has a real `std::bfloat16_t` or `__bf16` for the shim (issue 39: `zig
/// c++`'s libc++ has no `<stdfloat>`, and PTO-ISA silently read bf16
/// tensors as halves), the shim's digest in its key only in the second
/// case; a second build is a hit.
fn bf16_kernel_with(cxx: &std::ffi::OsStr) -> bool {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut tc = toolchain();
    tc.hosted_cxx = cxx.into();
    for flag in tc.hosted_flags.iter_mut() {
        if flag == "-std=c++20" {
            *flag = "-std=c++2b".to_owned();
        }
    }
    let native = compiles(
        cxx,
        &["-std=c++2b"],
        "#if !(defined(__has_include) && __has_include(<stdfloat>) && __cplusplus >= 202302L \
         && defined(__STDCPP_BFLOAT16_T__))\n#error no\n#endif\n",
    );
    let has_bf16 = compiles(
        cxx,
        &["-std=c++2b"],
        "__bf16 x = static_cast<__bf16>(1.0f);\n",
    ) && compiles(
        cxx,
        &["-std=c++2b"],
        "static_assert(__cplusplus >= 202302L);\n",
    );
    let spec = hosted_spec(&root, BF16_KERNEL);
    let out = build(root.path(), cache.path(), &tc, &spec);
    match (&out.callables[0], native || has_bf16) {
        (Ok(_), true) => {}
        (Err(e), false) => assert!(e.to_string().contains("bfloat16"), "{e}"),
        (Ok(_), false) => panic!("a half passed for a bf16"),
        (Err(e), true) => panic!("{cxx:?} has a bf16, the kernel did not get it: {e}"),
    }
    let mut files = Vec::new();
    scene_util::files_under(cache.path(), &mut files);
    let shimmed = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("bf16_shim")));
    if out.callables[0].is_ok() {
        assert_eq!(shimmed, !native, "the shim is keyed exactly when used");
        let again = build(root.path(), cache.path(), &tc, &spec);
        assert_eq!(outcome(&again, "s/k"), UnitOutcome::Cached);
    }
    native || has_bf16
}

#[test]
fn bf16_is_real_in_hosted_kernels_with_the_default_compiler_or_refused_loudly() {
    let _ = bf16_kernel_with(std::ffi::OsStr::new("c++"));
}

/// The same with `SCENE_TEST_HOSTED_CXX` (`zig c++` under CI): clang with
/// libc++, which has `__bf16` and no `<stdfloat>`, so the shim is used.
#[test]
fn bf16_is_real_in_hosted_kernels_with_zig_cxx() {
    let Some(cxx) = std::env::var_os("SCENE_TEST_HOSTED_CXX") else {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "CI must set SCENE_TEST_HOSTED_CXX (.ci/run installs zig c++)"
        );
        eprintln!("skipped: set SCENE_TEST_HOSTED_CXX to a clang-based C++20 compiler");
        return;
    };
    assert!(
        bf16_kernel_with(&cxx),
        "{cxx:?} (clang) should have __bf16 at C++23"
    );
}
