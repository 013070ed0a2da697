//! Issue 27, cause 2: the cache must follow every header the compiler
//! reads, not only the ones our `#include` scanner can see. Each test
//! builds with a fresh builder per "process" (real compiler, temp cache),
//! edits a header the kernel reaches through one include form, and checks
//! that the unit recompiles into different bytes, while an unchanged
//! header stays a hit.

mod common;

use std::num::NonZeroUsize;

use common::{ORCH_SRC, Root, incore, orch, spec, toolchain};
use scene_kernels::cache::CacheConfig;
use scene_kernels::{
    BuildOptions, BuildOutput, Builder, CallableSpec, CoreType, IncoreUnit, Toolchain, UnitOutcome,
};

/// `x[i] = x[i] OP 3` with `OP` coming from whatever `preamble` includes.
fn kernel(preamble: &str) -> String {
    format!(
        "#include \"scene_kernel.h\"\n{preamble}\n\
         SCENE_KERNEL_ENTRY(ka) {{\n\
             float *x = SCENE_ARG_PTR(ka, 0, float);\n\
             uint64_t n = SCENE_ARG_LEN(ka, 0, float);\n\
             SCENE_FOR_BLOCK_RANGE(ka, n, i) {{ x[i] = x[i] OP 3.0f; }}\n\
         }}\n"
    )
}

fn build(root: &Root, cache: &std::path::Path, tc: &Toolchain, spec: &CallableSpec) -> BuildOutput {
    let options = BuildOptions {
        workers: NonZeroUsize::new(2).expect("non-zero"),
        cache: Some(CacheConfig::new(cache)),
        ..BuildOptions::default()
    };
    let builder = Builder::new(root.path(), tc.clone(), options).expect("builder");
    builder.build_all(std::slice::from_ref(spec))
}

fn text(out: &BuildOutput) -> Vec<u8> {
    let callable = out.callables[0].as_ref().expect("builds");
    callable.incores[0].text.clone()
}

fn outcome(out: &BuildOutput, unit: &str) -> UnitOutcome {
    out.units
        .iter()
        .find(|u| u.unit == unit)
        .unwrap_or_else(|| panic!("no {unit}: {:?}", out.units))
        .outcome
}

/// Builds, rebuilds (a hit), edits `header` from `OP +` to `OP *`, and
/// checks the kernel recompiles into other bytes with `--explain` naming
/// the header, then is a hit again.
fn editing_the_header_recompiles(root: &Root, unit: IncoreUnit, header: &str) {
    let cache = tempfile::tempdir().expect("cache");
    let tc = toolchain();
    root.write("orch.c", ORCH_SRC);
    root.write(header, "#define OP +\n");
    let spec = spec("s", orch("orch.c", "run_orch"), vec![unit]);

    let first = build(root, cache.path(), &tc, &spec);
    assert_eq!(outcome(&first, "s/k"), UnitOutcome::Compiled);
    let unchanged = build(root, cache.path(), &tc, &spec);
    assert_eq!(
        outcome(&unchanged, "s/k"),
        UnitOutcome::Cached,
        "an unchanged header stays a hit: {:?}",
        unchanged.units
    );
    let k = unchanged.units.iter().find(|u| u.unit == "s/k").expect("k");
    assert_eq!(k.deps_unchecked, None, "the compiler's list backs the hit");

    root.write(header, "#define OP *\n");
    let edited = build(root, cache.path(), &tc, &spec);
    assert_eq!(
        outcome(&edited, "s/k"),
        UnitOutcome::Compiled,
        "editing {header} must recompile: {:?}",
        edited.units
    );
    assert_ne!(text(&first), text(&edited), "the edit changes the kernel");
    let why = edited
        .units
        .iter()
        .find(|u| u.unit == "s/k")
        .and_then(|u| u.miss.as_ref())
        .expect("miss reason")
        .to_string();
    assert!(why.contains(header), "--explain names {header}: {why}");
    assert_eq!(outcome(&edited, "s/orch"), UnitOutcome::Cached);

    let again = build(root, cache.path(), &tc, &spec);
    assert_eq!(outcome(&again, "s/k"), UnitOutcome::Cached);
    assert_eq!(text(&again), text(&edited));

    // Back to the first content: the right bytes again, never the stale.
    root.write(header, "#define OP +\n");
    let back = build(root, cache.path(), &tc, &spec);
    assert_eq!(text(&back), text(&first));
}

fn unit(source: &str) -> IncoreUnit {
    incore("k", 0, CoreType::Aiv, source)
}

#[test]
fn plain_include_edit_recompiles() {
    let root = Root::new();
    root.write("k.c", &kernel("#include \"op.h\""));
    editing_the_header_recompiles(&root, unit("k.c"), "op.h");
}

#[test]
fn macro_named_include_edit_recompiles() {
    let root = Root::new();
    root.write("k.c", &kernel("#define H \"op.h\"\n#include H"));
    editing_the_header_recompiles(&root, unit("k.c"), "op.h");
}

#[test]
fn include_named_by_a_defines_entry_edit_recompiles() {
    let root = Root::new();
    root.write("k.c", &kernel("#include KHDR"));
    let mut u = unit("k.c");
    u.defines.push(("KHDR".into(), "\"op.h\"".into()));
    editing_the_header_recompiles(&root, u, "op.h");
}

#[test]
fn has_include_guarded_include_edit_recompiles() {
    let root = Root::new();
    root.write(
        "k.c",
        &kernel(
            "#define OPH \"op.h\"\n#if __has_include(OPH)\n#include OPH\n#else\n#define OP -\n#endif",
        ),
    );
    editing_the_header_recompiles(&root, unit("k.c"), "op.h");
}

#[test]
fn nested_include_two_levels_deep_edit_recompiles() {
    let root = Root::new();
    root.write("k.c", &kernel("#include \"include/outer.h\""));
    root.write(
        "include/outer.h",
        "#define INNER \"deep/op.h\"\n#include INNER\n",
    );
    editing_the_header_recompiles(&root, unit("k.c"), "include/deep/op.h");
}

#[test]
fn include_next_edit_recompiles() {
    let root = Root::new();
    root.write("k.c", &kernel("#include <op.h>"));
    root.write("first/op.h", "#include_next <op.h>\n");
    let mut u = unit("k.c");
    u.include_dirs = vec!["include".into(), "first".into(), "second".into()];
    editing_the_header_recompiles(&root, u, "second/op.h");
}

/// A toolchain without dependency files still builds and caches, on the
/// scanner's closure, and says so.
#[test]
fn toolchain_without_dep_files_falls_back_to_the_scanner_and_says_so() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut tc = toolchain();
    tc.dep_file = false;
    root.write("orch.c", ORCH_SRC);
    root.write("op.h", "#define OP +\n");
    root.write("k.c", &kernel("#include \"op.h\""));
    let spec = spec("s", orch("orch.c", "run_orch"), vec![unit("k.c")]);
    let first = build(&root, cache.path(), &tc, &spec);
    let k = first.units.iter().find(|u| u.unit == "s/k").expect("k");
    assert_eq!(k.outcome, UnitOutcome::Compiled);
    assert!(
        k.deps_unchecked
            .as_deref()
            .is_some_and(|w| w.contains("does not write dependency files")),
        "{k:?}"
    );
    let second = build(&root, cache.path(), &tc, &spec);
    let k = second.units.iter().find(|u| u.unit == "s/k").expect("k");
    assert_eq!(k.outcome, UnitOutcome::Cached);
    assert!(k.deps_unchecked.is_some(), "{k:?}");
    // The scanner still sees a plain include.
    root.write("op.h", "#define OP *\n");
    let third = build(&root, cache.path(), &tc, &spec);
    assert_eq!(outcome(&third, "s/k"), UnitOutcome::Compiled);
}

/// The manifest records the compiler's list: root-relative inside the
/// root, the source itself included.
#[test]
fn manifest_records_the_compilers_dependency_list() {
    let root = Root::new();
    let cache = tempfile::tempdir().expect("cache");
    root.write("orch.c", ORCH_SRC);
    root.write("op.h", "#define OP +\n");
    root.write("k.c", &kernel("#define H \"op.h\"\n#include H"));
    let spec = spec("s", orch("orch.c", "run_orch"), vec![unit("k.c")]);
    let out = build(&root, cache.path(), &toolchain(), &spec);
    let key = out
        .units
        .iter()
        .find(|u| u.unit == "s/k")
        .and_then(|u| u.key)
        .expect("key");
    let storage = scene_kernels::cache::LocalDisk::new(cache.path());
    let (manifest, _) = scene_kernels::cache::read_verified(&storage, &key, None)
        .expect("read")
        .expect("stored")
        .expect("valid");
    let deps = manifest.deps.expect("deps recorded");
    for file in ["k.c", "op.h", "include/scene_kernel.h"] {
        assert_eq!(
            deps.get(file).map(String::as_str),
            Some(
                blake3::hash(&std::fs::read(root.path().join(file)).expect("read"))
                    .to_hex()
                    .as_str()
            ),
            "{file} in {deps:?}"
        );
    }
    assert!(
        deps.keys()
            .all(|p| !p.starts_with(&*root.path().to_string_lossy())),
        "no absolute path into the root: {deps:?}"
    );
}
