//! The C headers in `include/` and the Rust ABI of `scene-abi` say the same
//! thing: every integer `#define` of the headers has a Rust constant of the
//! same name and value (and the other way round), and every struct has the
//! same size and field offsets as compiled by the host C compiler. And the
//! headers keep the conventions of `scene_abi.h`: one way to fail, one
//! version policy stated once, checked accessors, deprecated forms that
//! still compile.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use scene_device::abi::*;

const HEADERS: [&str; 6] = [
    "scene_abi.h",
    "scene_runtime.h",
    "scene_comm.h",
    "scene_kernel.h",
    "scene_orch.h",
    "scene_tensor.h",
];

/// Every Rust constant of the ABI, by its C name.
fn rust_constants() -> BTreeMap<&'static str, i64> {
    BTreeMap::from([
        (
            "SCENE_RUNTIME_ABI_VERSION",
            i64::from(SCENE_RUNTIME_ABI_VERSION),
        ),
        (
            "SCENE_KERNEL_ABI_VERSION",
            i64::from(SCENE_KERNEL_ABI_VERSION),
        ),
        ("SCENE_ORCH_ABI_VERSION", i64::from(SCENE_ORCH_ABI_VERSION)),
        ("SCENE_MAX_ARGS", SCENE_MAX_ARGS as i64),
        ("SCENE_MAX_FUNC_IDS", i64::from(SCENE_MAX_FUNC_IDS)),
        ("SCENE_RT_OK", i64::from(SCENE_RT_OK)),
        ("SCENE_RT_E_INVALID", i64::from(SCENE_RT_E_INVALID)),
        ("SCENE_RT_E_ABI", i64::from(SCENE_RT_E_ABI)),
        ("SCENE_RT_E_NO_DEVICE", i64::from(SCENE_RT_E_NO_DEVICE)),
        ("SCENE_RT_E_OOM", i64::from(SCENE_RT_E_OOM)),
        (
            "SCENE_RT_E_OUT_OF_BOUNDS",
            i64::from(SCENE_RT_E_OUT_OF_BOUNDS),
        ),
        ("SCENE_RT_E_FUNC_ID", i64::from(SCENE_RT_E_FUNC_ID)),
        ("SCENE_RT_E_CORE_TYPE", i64::from(SCENE_RT_E_CORE_TYPE)),
        ("SCENE_RT_E_LOAD", i64::from(SCENE_RT_E_LOAD)),
        ("SCENE_RT_E_ORCH", i64::from(SCENE_RT_E_ORCH)),
        ("SCENE_RT_E_TIMEOUT", i64::from(SCENE_RT_E_TIMEOUT)),
        ("SCENE_RT_E_COMM", i64::from(SCENE_RT_E_COMM)),
        ("SCENE_COMM_MAX_RANKS", SCENE_COMM_MAX_RANKS as i64),
        ("SCENE_SLOT_AIC", i64::from(SCENE_SLOT_AIC)),
        ("SCENE_SLOT_AIV0", i64::from(SCENE_SLOT_AIV0)),
        ("SCENE_SLOT_AIV1", i64::from(SCENE_SLOT_AIV1)),
        ("SCENE_SLOTS", i64::from(SCENE_SLOTS)),
        ("SCENE_CLUSTER_FLAGS", i64::from(SCENE_CLUSTER_FLAGS)),
        ("SCENE_NO_KERNEL", i64::from(SCENE_NO_KERNEL)),
        ("SCENE_PRED_NONE", i64::from(SCENE_PRED_NONE)),
        ("SCENE_PRED_EQ", i64::from(SCENE_PRED_EQ)),
        ("SCENE_PRED_NE", i64::from(SCENE_PRED_NE)),
        ("SCENE_PRED_GT", i64::from(SCENE_PRED_GT)),
        ("SCENE_PRED_LT", i64::from(SCENE_PRED_LT)),
        ("SCENE_PRED_GE", i64::from(SCENE_PRED_GE)),
        ("SCENE_PRED_LE", i64::from(SCENE_PRED_LE)),
        (
            "SCENE_COMM_SIGNAL_SLOTS",
            i64::from(SCENE_COMM_SIGNAL_SLOTS),
        ),
        (
            "SCENE_RT_E_DEVICE_FATAL",
            i64::from(SCENE_RT_E_DEVICE_FATAL),
        ),
        ("SCENE_CORE_AIC", i64::from(SCENE_CORE_AIC)),
        ("SCENE_CORE_AIV", i64::from(SCENE_CORE_AIV)),
        (
            "SCENE_RT_TRACE_TIMELINE",
            i64::from(SCENE_RT_TRACE_TIMELINE),
        ),
        ("SCENE_RT_TRACE_DEPS", i64::from(SCENE_RT_TRACE_DEPS)),
        ("SCENE_INCORE_IMAGE", i64::from(SCENE_INCORE_IMAGE)),
        ("SCENE_INCORE_HOSTED", i64::from(SCENE_INCORE_HOSTED)),
        (
            "SCENE_KERNEL_ARGS_SCENE",
            i64::from(SCENE_KERNEL_ARGS_SCENE),
        ),
        (
            "SCENE_KERNEL_ARGS_CHIP_TENSOR",
            i64::from(SCENE_KERNEL_ARGS_CHIP_TENSOR),
        ),
        ("SCENE_DIR_IN", i64::from(SCENE_DIR_IN)),
        ("SCENE_DIR_OUT", i64::from(SCENE_DIR_OUT)),
        ("SCENE_DIR_INOUT", i64::from(SCENE_DIR_INOUT)),
        ("SCENE_DIR_SCALAR", i64::from(SCENE_DIR_SCALAR)),
        ("SCENE_MAX_RANK", SCENE_MAX_RANK as i64),
        ("SCENE_DTYPE_F32", i64::from(SCENE_DTYPE_F32)),
        ("SCENE_DTYPE_F64", i64::from(SCENE_DTYPE_F64)),
        ("SCENE_DTYPE_F16", i64::from(SCENE_DTYPE_F16)),
        ("SCENE_DTYPE_BF16", i64::from(SCENE_DTYPE_BF16)),
        ("SCENE_DTYPE_I8", i64::from(SCENE_DTYPE_I8)),
        ("SCENE_DTYPE_U8", i64::from(SCENE_DTYPE_U8)),
        ("SCENE_DTYPE_I16", i64::from(SCENE_DTYPE_I16)),
        ("SCENE_DTYPE_I32", i64::from(SCENE_DTYPE_I32)),
        ("SCENE_DTYPE_I64", i64::from(SCENE_DTYPE_I64)),
        ("SCENE_DTYPE_BOOL", i64::from(SCENE_DTYPE_BOOL)),
        ("SCENE_DTYPE_BYTES", i64::from(SCENE_DTYPE_BYTES)),
    ])
}

/// `#define NAME <integer>` lines of `text` (a trailing comment allowed);
/// include guards and function-like macros have no integer value and are
/// skipped.
fn integer_defines(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("#define")?;
            let mut words = rest.split_whitespace();
            let name = words.next()?;
            let value = words.next()?.parse::<i64>().ok()?;
            match words.next() {
                None => {}
                Some(w) if w.starts_with("/*") || w.starts_with("//") => {}
                Some(_) => return None,
            }
            Some((name.to_owned(), value))
        })
        .collect()
}

#[test]
fn define_parser_reads_values_and_skips_the_rest() {
    let text = "#define A 1\n#define B -100 /* x */\n#define GUARD_H\n#define F(x) (x)\n#define C 2 + 3\n  #define D 7\n";
    assert_eq!(
        integer_defines(text),
        [("A".into(), 1), ("B".into(), -100), ("D".into(), 7)]
    );
}

#[test]
fn header_defines_match_the_rust_constants() {
    let mut in_headers = BTreeMap::new();
    for h in HEADERS {
        let text = std::fs::read_to_string(include_dir().join(h)).unwrap();
        for (name, value) in integer_defines(&text) {
            assert!(
                in_headers.insert(name.clone(), value).is_none(),
                "{name} is defined twice in the headers"
            );
        }
    }
    let rust: BTreeMap<String, i64> = rust_constants()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert!(
        in_headers.len() >= 20,
        "parsed too few defines: {in_headers:?}"
    );
    assert_eq!(
        in_headers, rust,
        "headers (left) and scene-abi (right) disagree"
    );
}

/// `(struct, field or "", value)`: sizes (field "") and field offsets.
type Layout = Vec<(String, String, usize)>;

fn rust_layout() -> Layout {
    macro_rules! layout {
        ($($ty:ident { $($field:ident),* })*) => {
            vec![$(
                (stringify!($ty).to_owned(), String::new(), size_of::<$ty>()),
                $((stringify!($ty).to_owned(), stringify!($field).to_owned(), offset_of!($ty, $field)),)*
            )*]
        };
    }
    layout! {
        SceneIncoreDesc { func_id, core_type, image, image_len }
        SceneCallableDesc { orch_so, orch_so_len, orch_symbol, incores, num_incores }
        SceneIncoreDesc2 { func_id, core_type, kind, args_convention, image, image_len, symbol, reserved }
        SceneCallableDesc2 { orch_so, orch_so_len, orch_symbol, incores, num_incores }
        SceneRunArg { direction, reserved, value, size }
        SceneOrchArg { direction, reserved, value, size }
        SceneKernelArgs { abi_version, block_idx, block_num, num_args, args, arg_sizes, descs, comm, slot, slot_mask, cluster }
        SceneClusterCtx { slot, slot_mask, block, signal, wait }
        SceneMixedKernels { aic, aiv0, aiv1 }
        ScenePredicate { op, elem_size, addr, offset, target }
        SceneSubmit { kernels, block_num, num_args, args, deps, num_deps, reserved, predicate }
        SceneCommCtx { rank, nranks, window_size, windows, signals, num_signals, reserved, domain, signal, wait }
        SceneOrchOps { abi_version, alloc, submit, fail, arg_desc, submit_v2, read, write, fill, free, begin_scope, end_scope, malloc, last_error, submit_mixed, comm_rank, submit_task, memory_window, core_counts }
        SceneTensorDesc { dtype, rank, offset, shape, strides }
        SceneTaskArgV2 { direction, view_error, value, size, desc }
        SceneOrchCtx { ops, runtime }
    }
}

/// The same table, as the host C compiler lays the header structs out.
fn c_layout(dir: &std::path::Path) -> Layout {
    let mut prog = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"scene_kernel.h\"\n#include \"scene_orch.h\"\nint main(void) {\n",
    );
    for (ty, field, _) in rust_layout() {
        if field.is_empty() {
            prog.push_str(&format!("    printf(\"{ty} - %zu\\n\", sizeof({ty}));\n"));
        } else {
            prog.push_str(&format!(
                "    printf(\"{ty} {field} %zu\\n\", offsetof({ty}, {field}));\n"
            ));
        }
    }
    // The deprecated name of `view_error` is the same storage.
    prog.push_str(
        "    printf(\"SceneTaskArgV2 reserved-alias %d\\n\", (int)(offsetof(SceneTaskArgV2, reserved) == offsetof(SceneTaskArgV2, view_error)));\n",
    );
    prog.push_str("    return 0;\n}\n");
    run_c(dir, "layout", &prog)
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let field = if w[1] == "-" { "" } else { w[1] };
            (w[0].to_owned(), field.to_owned(), w[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn header_structs_match_the_rust_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let rust = rust_layout();
    let mut c = c_layout(dir.path());
    assert_eq!(
        c.pop(),
        Some(("SceneTaskArgV2".into(), "reserved-alias".into(), 1))
    );
    assert_eq!(rust.len(), c.len());
    for (r, c) in rust.iter().zip(&c) {
        assert_eq!(r, c, "Rust (left) and C (right) layouts differ");
    }
    // The table covers what it claims: a size and an offset per struct.
    assert!(
        rust.iter()
            .any(|(t, f, _)| t == "SceneKernelArgs" && f == "arg_sizes")
    );
}

/// The indented example blocks of a header's comments (`" *     code"`).
fn examples(header: &str) -> Vec<String> {
    let text = std::fs::read_to_string(include_dir().join(header)).unwrap();
    let mut blocks: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        match line.strip_prefix(" *     ") {
            Some(code) => {
                current.push_str(code);
                current.push('\n');
            }
            None if !current.is_empty() => blocks.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    blocks
}

/// Compiles `src` with `compiler` (and `flags`) in `dir`; panics with the
/// diagnostics on failure.
fn compiles(dir: &std::path::Path, compiler: &str, flags: &[&str], name: &str, src: &str) {
    let path = dir.join(name);
    std::fs::write(&path, src).unwrap();
    let out = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(include_dir())
        .arg("-c")
        .arg(&path)
        .arg("-o")
        .arg(dir.join(format!("{name}.o")))
        .output()
        .unwrap_or_else(|e| panic!("running `{compiler}`: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {flags:?} rejects the example {name}:\n{src}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The examples in the headers' comments compile, as C and as C++, so the
/// documentation cannot rot and the headers stay usable from C++ sources.
#[test]
fn header_examples_compile_as_c_and_cxx() {
    let dir = tempfile::tempdir().unwrap();
    let orch = examples("scene_orch.h");
    assert!(orch.len() >= 3, "v1, v2 and v3 examples expected: {orch:?}");
    // The examples show the current API: a deprecated call is an error.
    for (i, block) in orch.iter().enumerate() {
        let src = format!("#include \"scene_orch.h\"\n{block}");
        compiles(
            dir.path(),
            "cc",
            &[
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fPIC",
                "-DSCENE_WARN_DEPRECATED",
            ],
            &format!("orch{i}.c"),
            &src,
        );
        compiles(
            dir.path(),
            "c++",
            &[
                "-x",
                "c++",
                "-std=c++17",
                "-Wall",
                "-Werror",
                "-fPIC",
                "-DSCENE_WARN_DEPRECATED",
            ],
            &format!("orch{i}.cpp"),
            &src,
        );
    }
    let kernel = examples("scene_kernel.h");
    assert_eq!(kernel.len(), 1, "{kernel:?}");
    let freestanding = [
        "-ffreestanding",
        "-fno-builtin",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-DSCENE_WARN_DEPRECATED",
    ];
    compiles(
        dir.path(),
        "cc",
        &[&["-std=c11"], &freestanding[..]].concat(),
        "kernel.c",
        &kernel[0],
    );
    compiles(
        dir.path(),
        "c++",
        &[&["-x", "c++", "-std=c++17"], &freestanding[..]].concat(),
        "kernel.cpp",
        &kernel[0],
    );
    let comm = examples("scene_comm.h");
    assert_eq!(comm.len(), 1, "{comm:?}");
    compiles(
        dir.path(),
        "cc",
        &[&["-std=c11"], &freestanding[..]].concat(),
        "comm.c",
        &comm[0],
    );
}

/// Builds `src` (C11, with the headers) into an executable in `dir`, runs
/// it and returns its standard output.
fn run_c(dir: &std::path::Path, name: &str, src: &str) -> String {
    let path = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&path, src).unwrap();
    let out = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&path)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running the host C compiler `cc`");
    assert!(
        out.status.success(),
        "cc rejects {name}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success(), "{name} failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `SCENE_ARG_DIM`, `SCENE_ARG_STRIDE` and `SCENE_AT*` check the view as
/// `scene_arg_desc` does: no descriptors (a v1 runtime, or NULL), an
/// argument past `num_args`, a dimension past the rank: never a read of
/// something that is not there.
#[test]
fn descriptor_accessors_check_like_scene_arg_desc() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_c(
        dir.path(),
        "accessors",
        r#"#include <stdio.h>
#include "scene_kernel.h"
int main(void) {
    float buf[12];
    uint64_t shape[2] = {3, 4};
    SceneTensorDesc d[2];
    d[0] = scene_desc_contiguous(SCENE_DTYPE_F32, 2, shape);
    d[1] = scene_desc_contiguous(SCENE_DTYPE_F32, 2, shape);
    SceneKernelArgs ka = {0};
    ka.abi_version = SCENE_KERNEL_ABI_VERSION;
    ka.num_args = 1;
    ka.args[0] = (uint64_t)(uintptr_t)buf;
    ka.arg_sizes[0] = sizeof buf;
    ka.descs = d;
    /* a view: dims, strides, element pointers */
    printf("%d %d %d %d\n", (int)SCENE_ARG_DIM(&ka, 0, 0), (int)SCENE_ARG_DIM(&ka, 0, 1),
           (int)SCENE_ARG_STRIDE(&ka, 0, 0), (int)(SCENE_AT2(&ka, 0, float, 2, 3) - buf));
    /* past the rank: 0, and the index is ignored */
    printf("%d %d %d\n", (int)SCENE_ARG_DIM(&ka, 0, 2), (int)SCENE_ARG_STRIDE(&ka, 0, 7),
           (int)(SCENE_AT4(&ka, 0, float, 1, 1, 5, 5) - buf));
    /* past num_args (d[1] exists but is not an argument), past SCENE_MAX_ARGS */
    printf("%d %d %d\n", scene_arg_desc(&ka, 1) == 0, (int)SCENE_ARG_DIM(&ka, 1, 0),
           (int)SCENE_ARG_DIM(&ka, 1000, 0));
    /* no descriptors: a rank-1 view of the bytes, as v1 submits give */
    ka.descs = 0;
    printf("%d %d %d %d %d\n", scene_arg_desc(&ka, 0) == 0, (int)SCENE_ARG_DIM(&ka, 0, 0),
           (int)SCENE_ARG_DIM(&ka, 0, 1), (int)SCENE_ARG_STRIDE(&ka, 0, 0),
           (int)(SCENE_AT1(&ka, 0, uint8_t, 5) - (uint8_t *)buf));
    /* a v1 runtime: its descs field is not there to read */
    ka.descs = d;
    ka.abi_version = 1;
    printf("%d %d\n", scene_arg_desc(&ka, 0) == 0, (int)SCENE_ARG_DIM(&ka, 0, 0));
    return 0;
}
"#,
    );
    assert_eq!(out, "3 4 4 11\n0 0 5\n1 0 0\n1 48 0 1 5\n1 48\n");
}

/// The orchestration calls report failure as statuses: `scene_orch_malloc`
/// on a v3 table calls `malloc`; on a v2 table it maps alloc's in-band 0
/// to SCENE_RT_E_OOM; `scene_orch_last_error` is "" there;
/// `scene_task_view_checked` refuses a view outside its parent at once;
/// the deprecated forms still work.
#[test]
fn orchestration_calls_return_statuses_on_v2_and_v3_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_c(
        dir.path(),
        "orch_status",
        r#"#include <stdio.h>
#include <string.h>
#include "scene_orch.h"
static uint64_t next = 64;
static uint64_t alloc_v2(SceneOrchCtx *c, uint64_t size) { (void)c; return size > 100 ? 0 : next; }
static int32_t malloc_v3(SceneOrchCtx *c, uint64_t size, uint64_t *out) {
    (void)c; *out = size > 100 ? 0 : 128; return size > 100 ? SCENE_RT_E_OOM : SCENE_RT_OK;
}
static const char *last_v3(SceneOrchCtx *c) { (void)c; return "orchestration alloc: full"; }
int main(void) {
    SceneOrchOps ops;
    memset(&ops, 0, sizeof ops);
    ops.abi_version = 2;
    ops.alloc = alloc_v2;
    SceneOrchCtx ctx = {&ops, 0};
    uint64_t a = 1;
    int32_t rc = scene_orch_malloc(&ctx, 8, &a);
    printf("%d %d", rc, (int)a);
    rc = scene_orch_malloc(&ctx, 1000, &a);
    printf(" %d %d", rc, (int)a);
    printf(" %d [%s]", scene_orch_malloc(&ctx, 8, 0), scene_orch_last_error(&ctx));
    printf(" %d\n", (int)scene_orch_alloc(&ctx, 8));
    ops.abi_version = 3;
    ops.malloc = malloc_v3;
    ops.last_error = last_v3;
    rc = scene_orch_malloc(&ctx, 8, &a);
    printf("%d %d", rc, (int)a);
    rc = scene_orch_malloc(&ctx, 1000, &a);
    printf(" %d %d [%s]\n", rc, (int)a, scene_orch_last_error(&ctx));
    uint64_t shape[2] = {4, 4}, off[2] = {2, 0}, fits[2] = {2, 4}, leaves[2] = {3, 4};
    SceneTaskArgV2 t = scene_task_buf(SCENE_DIR_IN, 64, SCENE_DTYPE_F32, 2, shape), v;
    v.view_error = 99;
    rc = scene_task_view_checked(&t, off, fits, &v);
    printf("%d %d %d", rc, (int)v.view_error, (int)v.desc.offset);
    rc = scene_task_view_checked(&t, off, leaves, &v);
    printf(" %d %d", rc, (int)v.desc.offset);
    SceneTaskArgV2 marked = scene_task_view(t, off, leaves);
    printf(" %d %d", (int)marked.view_error, (int)marked.reserved);
    printf(" %d\n", scene_task_view_checked(&marked, off, fits, &v));
    return 0;
}
"#,
    );
    assert_eq!(
        out,
        format!(
            "0 64 {oom} 0 {inv} [] 64\n0 128 {oom} 0 [orchestration alloc: full]\n0 0 8 {oob} 8 1 1 {oob}\n",
            oom = SCENE_RT_E_OOM,
            inv = SCENE_RT_E_INVALID,
            oob = SCENE_RT_E_OUT_OF_BOUNDS
        )
    );
}

/// `scene_comm_barrier` returns the status of the call that failed (a
/// stray positive value from an old runtime becomes SCENE_RT_E_COMM).
#[test]
fn comm_barrier_returns_the_failing_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_c(
        dir.path(),
        "barrier",
        r#"#include <stdio.h>
#include <string.h>
#include "scene_kernel.h"
static int32_t sig_rc, wait_rc;
static int32_t sig(const SceneCommCtx *c, uint32_t p, uint32_t s, int32_t v) { (void)c; (void)p; (void)s; (void)v; return sig_rc; }
static int32_t wt(const SceneCommCtx *c, int32_t f, uint32_t s, int32_t e) { (void)c; (void)f; (void)s; (void)e; return wait_rc; }
int main(void) {
    SceneCommCtx c;
    memset(&c, 0, sizeof c);
    c.rank = 0;
    c.nranks = 2;
    c.signal = sig;
    c.wait = wt;
    printf("%d", scene_comm_barrier(&c, 0));
    sig_rc = SCENE_RT_E_INVALID;
    printf(" %d", scene_comm_barrier(&c, 0));
    sig_rc = 0;
    wait_rc = SCENE_RT_E_COMM;
    printf(" %d", scene_comm_barrier(&c, 0));
    wait_rc = 1;
    printf(" %d\n", scene_comm_barrier(&c, 0));
    return 0;
}
"#,
    );
    assert_eq!(
        out,
        format!("0 {SCENE_RT_E_INVALID} {SCENE_RT_E_COMM} {SCENE_RT_E_COMM}\n")
    );
}

/// Deprecated forms keep compiling warning-free by default (existing
/// scenes build unchanged), and name themselves when asked to with
/// SCENE_WARN_DEPRECATED.
#[test]
fn deprecated_forms_compile_and_warn_only_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"#include "scene_orch.h"
SCENE_ORCH_ENTRY(old_style, ctx, args, nargs) {
    (void)nargs;
    uint64_t tmp = scene_orch_alloc(ctx, args[0].size);
    SceneTaskArgV2 t = scene_task_scalar(1);
    t.reserved = 0;
    SceneTaskArg a[1] = {SCENE_OUT_BUF(tmp, args[0].size)};
    return t.reserved ? -1 : scene_orch_submit(ctx, 0, 1, a, 1);
}
"#;
    for (compiler, lang) in [
        ("cc", &["-std=c11"][..]),
        ("c++", &["-x", "c++", "-std=c++17"]),
    ] {
        let flags = [lang, &["-Wall", "-Wextra", "-Werror", "-fPIC"]].concat();
        compiles(dir.path(), compiler, &flags, "old.c", src);
        let path = dir.path().join("old.c");
        let out = Command::new(compiler)
            .args(&flags)
            .arg("-DSCENE_WARN_DEPRECATED")
            .arg("-I")
            .arg(include_dir())
            .arg("-c")
            .arg(&path)
            .arg("-o")
            .arg(dir.path().join("old.o"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{compiler}: no deprecation errors");
        assert!(
            err.contains("use scene_orch_malloc") && err.contains("use view_error"),
            "{compiler}: {err}"
        );
    }
}

/// The one version policy and the conventions are stated once, in
/// scene_abi.h, and every other interface header points there.
#[test]
fn conventions_are_stated_once_and_referenced() {
    let read = |h: &str| std::fs::read_to_string(include_dir().join(h)).unwrap();
    let abi = read("scene_abi.h");
    for section in [
        "C ABI conventions",
        "Failure reporting.",
        "Last error.",
        "Version policy.",
        "Deprecation.",
    ] {
        assert!(abi.contains(section), "scene_abi.h lacks {section:?}");
    }
    for h in [
        "scene_runtime.h",
        "scene_orch.h",
        "scene_comm.h",
        "scene_kernel.h",
    ] {
        let text = read(h);
        assert!(
            text.contains("#include \"scene_abi.h\"") || h == "scene_orch.h",
            "{h} does not include scene_abi.h"
        );
        assert!(
            text.contains("scene_abi.h"),
            "{h} does not refer to scene_abi.h"
        );
        assert!(
            !text.contains("Version policy.") && !text.contains("version mismatch"),
            "{h} states a version policy of its own"
        );
    }
}

/// Every call of the runtime, orchestration and comm headers returns an
/// `int32_t` status; the others are the queries, the report and the
/// deprecated in-band forms scene_abi.h names. A new call that reports
/// failure in-band fails here.
#[test]
fn every_call_returns_a_status() {
    const NOT_CALLS: [&str; 18] = [
        // queries
        "scene_rt_abi_version",
        "scene_rt_last_error",
        "scene_orch_has_v2",
        "scene_orch_has_v3",
        "scene_orch_has_v4",
        "scene_orch_has_v5",
        "scene_orch_has_v6",
        "scene_mixed",
        "scene_orch_desc",
        "scene_orch_last_error",
        "scene_comm_peer_ptr",
        "scene_comm_local_ptr",
        "scene_comm_offset",
        "scene_comm_word",
        // reports
        "scene_orch_fail",
        // deprecated: scene_orch_malloc
        "scene_orch_alloc",
        // value builders (no runtime involved, nothing to fail)
        "scene_scalar_f32",
        "scene_task_*",
    ];
    let mut seen = 0;
    let mut seen_alloc = false;
    for h in ["scene_runtime.h", "scene_orch.h", "scene_comm.h"] {
        let text = std::fs::read_to_string(include_dir().join(h)).unwrap();
        let joined = text.replace('\n', " ");
        for (i, _) in joined.match_indices("scene_") {
            let rest = &joined[i..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = rest[name.len()..].trim_start();
            // A declaration or definition: `<type> name(` at the start of
            // a statement, not a call or a mention in a comment.
            let before = joined[..i].trim_end();
            let decl_start = before.rfind([';', '}', '/', '{']).map_or(0, |p| p + 1);
            let mut head = before[decl_start..].trim();
            if let Some(rest) = head.strip_prefix("SCENE_DEPRECATED(") {
                // `SCENE_DEPRECATED("...")` then the declaration.
                head = rest.split_once(')').map_or("", |(_, d)| d.trim());
            }
            let is_decl = after.starts_with('(')
                && (head.starts_with("static inline")
                    || head.starts_with("int32_t")
                    || head.starts_with("const char *")
                    || head.starts_with("uint64_t")
                    || head.starts_with("void")
                    || head.starts_with("int "))
                && !head.contains('=')
                && !head.contains("return");
            if !is_decl {
                continue;
            }
            let exempt = NOT_CALLS.iter().any(|n| match n.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => *n == name,
            });
            seen += 1;
            seen_alloc |= name == "scene_orch_alloc";
            if !exempt {
                assert!(
                    head.ends_with("int32_t"),
                    "{h}: `{name}` returns `{head}`, not an int32_t status (scene_abi.h, Failure reporting)"
                );
            }
        }
    }
    assert!(seen >= 30, "found only {seen} declarations");
    assert!(seen_alloc, "the deprecated scene_orch_alloc was not seen");
}

/// The same for the function pointers of the ops table and the comm
/// context: what a runtime implements returns a status, except the
/// deprecated `alloc`, the report `fail` and the queries.
#[test]
fn every_op_returns_a_status() {
    const NOT_CALLS: [&str; 4] = ["alloc", "fail", "arg_desc", "last_error"];
    let mut seen = Vec::new();
    for h in ["scene_orch.h", "scene_comm.h", "scene_kernel.h"] {
        let text = std::fs::read_to_string(include_dir().join(h)).unwrap();
        for line in text.lines() {
            let Some((ret, rest)) = line.trim().split_once("(*") else {
                continue;
            };
            // A member `ret (*name)(...)`, not a call like `f(*p, ...)`.
            let Some((name, _)) = rest.split_once(")(") else {
                continue;
            };
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            seen.push(name.to_owned());
            if !NOT_CALLS.contains(&name) {
                assert_eq!(
                    ret.trim(),
                    "int32_t",
                    "{h}: op `{name}` does not return a status"
                );
            }
        }
    }
    for op in [
        "alloc",
        "submit",
        "malloc",
        "last_error",
        "signal",
        "wait",
        "submit_mixed",
        "comm_rank",
        "submit_task",
        "memory_window",
        "core_counts",
    ] {
        assert!(seen.iter().any(|s| s == op), "{op} not found in {seen:?}");
    }
}

/// The device headers of the checkout the test runs in: the manifest dir is
/// read at run time first (a nextest archive run with `--workspace-remap`
/// points it at the checkout it runs in; `scene_device::include_dir()` is
/// the build machine's).
fn include_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("include")
}
