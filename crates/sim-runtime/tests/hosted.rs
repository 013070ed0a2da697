//! Hosted incore kernels (issue 29, `scene_rt_register_callable2`): C++20
//! shared objects with their runtime (templates, `thread_local`,
//! `std::vector`, `<cmath>`) registered next to image kernels, run block
//! by block on the emulated core threads, checked and crash-reported like
//! image kernels. Child processes (the crash report) are this same test
//! executable re-run with `SCENE_TEST_CHILD` selecting a child mode.

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dev, hosted_so, kernel_image, orch_so, tensor};
use scene_sim_runtime::*;

/// Tile-library style kernels: a `Tile<T, Rows, Cols>` class template with
/// fixed storage, a `thread_local` scratch tile, a `std::vector` of tiles
/// per block, `<cmath>`. Arguments: a, b (in f32), c (out f32), each
/// `rows x COLS`; a block takes its share of the rows.
const TILE_KERNELS: &str = r#"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>
#include <pthread.h>

namespace tile {
template <typename T, int Rows, int Cols>
class Tile {
public:
    static constexpr int rows = Rows;
    static constexpr int cols = Cols;
    void load(const T *src, int nrows) {
        for (int r = 0; r < nrows; ++r)
            for (int c = 0; c < Cols; ++c) at(r, c) = src[r * Cols + c];
    }
    void store(T *dst, int nrows) const {
        for (int r = 0; r < nrows; ++r)
            for (int c = 0; c < Cols; ++c) dst[r * Cols + c] = at(r, c);
    }
    template <typename F>
    Tile &combine(const Tile &o, F f) {
        for (std::size_t i = 0; i < data_.size(); ++i) data_[i] = f(data_[i], o.data_[i]);
        return *this;
    }
    T &at(int r, int c) { return data_[r * Cols + c]; }
    const T &at(int r, int c) const { return data_[r * Cols + c]; }
private:
    std::array<T, Rows * Cols> data_{};
};
}  // namespace tile

constexpr int COLS = 16;
using F32Tile = tile::Tile<float, 4, COLS>;

/* One scratch tile per emulated core thread. */
thread_local F32Tile scratch;

template <typename F>
static void rows_op(const SceneKernelArgs *ka, F f) {
    const float *a = SCENE_ARG_PTR(ka, 0, float);
    const float *b = SCENE_ARG_PTR(ka, 1, float);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    uint64_t rows = SCENE_ARG_LEN(ka, 2, float) / COLS;
    uint64_t r0, r1;
    scene_block_range(ka, rows, &r0, &r1);
    std::vector<F32Tile> out;
    for (uint64_t r = r0; r < r1; r += F32Tile::rows) {
        int n = (int)std::min<uint64_t>(F32Tile::rows, r1 - r);
        F32Tile t;
        t.load(a + r * COLS, n);
        scratch.load(b + r * COLS, n);
        out.push_back(t.combine(scratch, f));
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        uint64_t r = r0 + i * F32Tile::rows;
        out[i].store(c + r * COLS, (int)std::min<uint64_t>(F32Tile::rows, r1 - r));
    }
}

extern "C" void add_entry(const SceneKernelArgs *ka) { rows_op(ka, std::plus<float>()); }
extern "C" void exp_mul_entry(const SceneKernelArgs *ka) {
    rows_op(ka, [](float x, float y) { return std::exp(x) * y; });
}

/* Where a block ran: 32 bytes per block of argument 0: the thread's name,
 * then how many blocks this thread has run (thread_local, so it counts
 * per emulated core thread, across runs). */
thread_local std::vector<uint32_t> blocks_here;
extern "C" void where_entry(const SceneKernelArgs *ka) {
    char *o = SCENE_ARG_PTR(ka, 0, char) + 32 * ka->block_idx;
    char name[16] = {0};
    pthread_getname_np(pthread_self(), name, sizeof name);
    blocks_here.push_back(ka->block_idx);
    uint32_t n = (uint32_t)blocks_here.size();
    std::memcpy(o, name, 16);
    std::memcpy(o + 16, &n, 4);
}
"#;

/// C orchestrations. `orch_two`: a, b (in), c, d (out): c = a + b (func 0,
/// 4 blocks), d = exp(a) * b (func 1, 3 blocks). `orch_chain`: a, b (in),
/// out: tmp = a + b (func 0, 4 blocks), out = exp(tmp) * b (func 1, 3
/// blocks). `orch_one`: out, func_id, blocks: one task.
const ORCH: &str = r#"
#define SUBMIT(f, b, ...) do { SceneTaskArg t_[] = { __VA_ARGS__ }; int32_t rc_ = scene_orch_submit(ctx, (f), (b), t_, sizeof t_ / sizeof t_[0]); if (rc_) return rc_; } while (0)
SCENE_ORCH_ENTRY(orch_two, ctx, args, nargs) {
    if (nargs != 4) { ctx->ops->fail(ctx, "orch_two wants 4 args"); return -1; }
    SUBMIT(0, 4, SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2]));
    SUBMIT(1, 3, SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[3]));
    return 0;
}
SCENE_ORCH_ENTRY(orch_chain, ctx, args, nargs) {
    if (nargs != 3) { ctx->ops->fail(ctx, "orch_chain wants 3 args"); return -1; }
    uint64_t sz = args[0].size;
    uint64_t tmp = 0;
    if (scene_orch_malloc(ctx, sz, &tmp) != SCENE_RT_OK) return -1;
    SUBMIT(0, 4, SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT_BUF(tmp, sz));
    SUBMIT(1, 3, SCENE_IN_BUF(tmp, sz), SCENE_IN(args[1]), SCENE_OUT(args[2]));
    return 0;
}
SCENE_ORCH_ENTRY(orch_one, ctx, args, nargs) {
    if (nargs != 3) { ctx->ops->fail(ctx, "orch_one wants 3 args"); return -1; }
    SUBMIT((uint32_t)args[1].value, (uint32_t)args[2].value, SCENE_OUT(args[0]));
    return 0;
}
"#;

const COLS: usize = 16;
const ROWS: usize = 37; // not a multiple of the tile's rows nor of the blocks

/// One incore of a `SceneCallableDesc2`: `(func_id, core, kind, convention,
/// bytes, symbol)`.
type Incore2<'a> = (u32, u32, u32, u32, &'a [u8], Option<&'a str>);

/// Registers through `scene_rt_register_callable2`; returns (status, handle).
fn try_register2(dev: &Dev, orch: &[u8], sym: &str, incores: &[Incore2<'_>]) -> (i32, u32) {
    let symbols: Vec<Option<CString>> = incores
        .iter()
        .map(|i| i.5.map(|s| CString::new(s).unwrap()))
        .collect();
    let descs: Vec<SceneIncoreDesc2> = incores
        .iter()
        .zip(&symbols)
        .map(
            |(&(func_id, core_type, kind, args_convention, bytes, _), sym)| SceneIncoreDesc2 {
                func_id,
                core_type,
                kind,
                args_convention,
                image: bytes.as_ptr(),
                image_len: bytes.len() as u64,
                symbol: sym.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                reserved: [0; 4],
            },
        )
        .collect();
    let sym = CString::new(sym).unwrap();
    let desc = SceneCallableDesc2 {
        orch_so: orch.as_ptr(),
        orch_so_len: orch.len() as u64,
        orch_symbol: sym.as_ptr(),
        incores: descs.as_ptr(),
        num_incores: descs.len() as u32,
    };
    let mut h = 0;
    let rc = scene_rt_register_callable2(dev.0, &desc, &mut h);
    (rc, h)
}

fn register2(dev: &Dev, orch: &[u8], sym: &str, incores: &[Incore2<'_>]) -> u32 {
    let (rc, h) = try_register2(dev, orch, sym, incores);
    assert_eq!(rc, SCENE_RT_OK, "register2 {sym}: {}", last_error_message());
    h
}

fn hosted<'a>(func_id: u32, core: u32, so: &'a [u8], symbol: &'a str) -> Incore2<'a> {
    (
        func_id,
        core,
        SCENE_INCORE_HOSTED,
        SCENE_KERNEL_ARGS_SCENE,
        so,
        Some(symbol),
    )
}

fn inputs() -> (Vec<f32>, Vec<f32>) {
    let n = ROWS * COLS;
    let a = (0..n).map(|i| (i % 23) as f32 * 0.125 - 1.0).collect();
    let b = (0..n).map(|i| (i % 7) as f32 * 0.5 + 0.25).collect();
    (a, b)
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

fn bytes_of(v: &[f32]) -> u64 {
    std::mem::size_of_val(v) as u64
}

#[test]
fn hosted_cxx_kernels_compute_over_several_blocks_and_cores() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path(), "tiles", TILE_KERNELS);
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=2;aiv=2");
    let h = register2(
        &dev,
        &orch,
        "orch_two",
        &[
            hosted(0, SCENE_CORE_AIV, &so, "add_entry"),
            hosted(1, SCENE_CORE_AIC, &so, "exp_mul_entry"),
        ],
    );
    let (a, b) = inputs();
    let size = bytes_of(&a);
    let [da, db, dc, dd] = [0; 4].map(|_| dev.malloc(size));
    dev.put(da, &a);
    dev.put(db, &b);
    let args = [
        tensor(SCENE_DIR_IN, da, size),
        tensor(SCENE_DIR_IN, db, size),
        tensor(SCENE_DIR_OUT, dc, size),
        tensor(SCENE_DIR_OUT, dd, size),
    ];
    for _ in 0..3 {
        dev.run(h, &args);
        let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let expmul: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x.exp() * y).collect();
        assert_close(&dev.get::<f32>(dc, a.len()), &sum, "c = a + b");
        assert_close(&dev.get::<f32>(dd, a.len()), &expmul, "d = exp(a) * b");
    }
    // Both kernels come from one shared object: the entries differ.
    let add = debug_image_addr(dev.0, h, 0);
    let exp_mul = debug_image_addr(dev.0, h, 1);
    assert!(add != 0 && exp_mul != 0 && add != exp_mul);
}

/// Every block runs on an emulated core thread of the task's core type,
/// and a kernel's `thread_local` state stays with that thread across
/// blocks and runs: each thread counts 1, 2, 3, ... with no gap.
#[test]
fn hosted_blocks_run_on_the_stable_emulated_core_threads() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path(), "tiles", TILE_KERNELS);
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=1;aiv=2");
    let h = register2(
        &dev,
        &orch,
        "orch_one",
        &[hosted(4, SCENE_CORE_AIV, &so, "where_entry")],
    );
    const BLOCKS: usize = 8;
    let out = dev.malloc(32 * BLOCKS as u64);
    let mut counts: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for _ in 0..4 {
        dev.run(
            h,
            &[
                tensor(SCENE_DIR_OUT, out, 32 * BLOCKS as u64),
                common::scalar(4),
                common::scalar(BLOCKS as u64),
            ],
        );
        let raw = dev.get::<u8>(out, 32 * BLOCKS);
        for rec in raw.chunks(32) {
            let name = String::from_utf8_lossy(&rec[..16])
                .trim_end_matches('\0')
                .to_owned();
            let n = u32::from_le_bytes(rec[16..20].try_into().unwrap());
            counts.entry(name).or_default().push(n);
        }
    }
    assert!(
        !counts.is_empty() && counts.len() <= 2,
        "blocks ran on more threads than the 2 aiv cores: {counts:?}"
    );
    let mut total = 0;
    for (name, mut ns) in counts {
        assert!(
            name.starts_with("scene-dev0-aiv"),
            "block ran on `{name}`, not an aiv core thread"
        );
        ns.sort_unstable();
        let want: Vec<u32> = (1..=ns.len() as u32).collect();
        assert_eq!(ns, want, "thread_local count of `{name}`");
        total += ns.len();
    }
    assert_eq!(total, 4 * BLOCKS);
}

/// An image kernel and a hosted kernel in one callable, one feeding the
/// other (the image's output is the hosted kernel's input).
#[test]
fn image_and_hosted_kernels_share_a_callable() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path(), "tiles", TILE_KERNELS);
    let image = kernel_image(
        dir.path(),
        "add_f32",
        "SCENE_KERNEL_ENTRY(ka) { const float *a = SCENE_ARG_PTR(ka, 0, float); const float *b = SCENE_ARG_PTR(ka, 1, float); float *c = SCENE_ARG_PTR(ka, 2, float); uint64_t n = SCENE_ARG_LEN(ka, 2, float); SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; } }",
    );
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=2;aiv=2");
    let h = register2(
        &dev,
        &orch,
        "orch_chain",
        &[
            (
                0,
                SCENE_CORE_AIC,
                SCENE_INCORE_IMAGE,
                SCENE_KERNEL_ARGS_SCENE,
                &image,
                None,
            ),
            hosted(1, SCENE_CORE_AIV, &so, "exp_mul_entry"),
        ],
    );
    let (a, b) = inputs();
    let size = bytes_of(&a);
    let [da, db, dout] = [0; 3].map(|_| dev.malloc(size));
    dev.put(da, &a);
    dev.put(db, &b);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_IN, da, size),
            tensor(SCENE_DIR_IN, db, size),
            tensor(SCENE_DIR_OUT, dout, size),
        ],
    );
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (x + y).exp() * y).collect();
    assert_close(&dev.get::<f32>(dout, a.len()), &want, "exp(a + b) * b");
    // The image is mapped as scene_rt_register_callable maps it: its
    // first bytes are the image's.
    let addr = debug_image_addr(dev.0, h, 0);
    assert_ne!(addr, 0);
}

#[test]
fn a_missing_entry_symbol_is_a_load_error_naming_func_id_and_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path(), "tiles", TILE_KERNELS);
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=1;aiv=1");
    let (rc, _) = try_register2(
        &dev,
        &orch,
        "orch_two",
        &[
            hosted(0, SCENE_CORE_AIV, &so, "add_entry"),
            hosted(7, SCENE_CORE_AIV, &so, "no_such_entry"),
        ],
    );
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(
        msg.contains("scene_rt_register_callable2")
            && msg.contains("func_id 7")
            && msg.contains("`no_such_entry`"),
        "{msg}"
    );
    // No symbol given: `kernel_entry`, which this object lacks.
    let (rc, _) = try_register2(
        &dev,
        &orch,
        "orch_two",
        &[(
            3,
            SCENE_CORE_AIV,
            SCENE_INCORE_HOSTED,
            SCENE_KERNEL_ARGS_SCENE,
            &so,
            None,
        )],
    );
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(
        msg.contains("func_id 3") && msg.contains("`kernel_entry`"),
        "{msg}"
    );
    // Bytes that are no shared object.
    let junk = b"not an ELF shared object".to_vec();
    let (rc, _) = try_register2(
        &dev,
        &orch,
        "orch_two",
        &[hosted(2, SCENE_CORE_AIV, &junk, "add_entry")],
    );
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(
        msg.contains("func_id 2") && msg.contains("cannot load the hosted kernel shared object"),
        "{msg}"
    );
    // A symbol the host libraries lack is found at load (RTLD_NOW), not
    // mid-run.
    let unresolved = hosted_so(
        dir.path(),
        "unresolved",
        r#"extern "C" void scene_test_undefined_function(void);
extern "C" void entry(const SceneKernelArgs *) { scene_test_undefined_function(); }"#,
    );
    let (rc, _) = try_register2(
        &dev,
        &orch,
        "orch_two",
        &[hosted(2, SCENE_CORE_AIV, &unresolved, "entry")],
    );
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(msg.contains("scene_test_undefined_function"), "{msg}");
}

#[test]
fn chip_tensor_needs_the_visible_hooks_and_unknown_kinds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path(), "tiles", TILE_KERNELS);
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=1;aiv=1");
    let chip = (
        0,
        SCENE_CORE_AIV,
        SCENE_INCORE_HOSTED,
        SCENE_KERNEL_ARGS_CHIP_TENSOR,
        &so[..],
        Some("add_entry"),
    );
    // This test links the runtime into its executable, where nothing exports
    // the execution-context hook to `dlsym(RTLD_DEFAULT)`: a chip_tensor
    // kernel (which learns its block only from the hook) is refused, naming
    // why. (Loaded as the shared object it is, the runtime promotes itself:
    // crates/device/tests/chip_tensor.rs.)
    let (rc, _) = try_register2(&dev, &orch, "orch_two", &[chip]);
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(
        msg.contains("func_id 0 (chip_tensor)")
            && msg.contains("pto_cpu_sim_get_execution_context")
            && msg.contains("dlsym(RTLD_DEFAULT)"),
        "{msg}"
    );
    for (kind, conv, want) in [
        (7, SCENE_KERNEL_ARGS_SCENE, "unknown kind 7"),
        (SCENE_INCORE_HOSTED, 9, "unknown args_convention 9"),
        (
            SCENE_INCORE_IMAGE,
            SCENE_KERNEL_ARGS_CHIP_TENSOR,
            "an image kernel takes SCENE_KERNEL_ARGS_SCENE",
        ),
    ] {
        let inc = (0, SCENE_CORE_AIV, kind, conv, &so[..], Some("add_entry"));
        let (rc, _) = try_register2(&dev, &orch, "orch_two", &[inc]);
        assert_eq!(rc, SCENE_RT_E_INVALID, "{want}");
        let msg = last_error_message();
        assert!(msg.contains(want), "{msg}");
    }
}

/// A hosted kernel with a global counter: each block adds one and writes
/// it to `out[block_idx]`. `tag` makes the bytes unique to a test, so no
/// other test of this binary (they run in parallel) shares the loaded
/// library through the runtime's by-content cache.
fn counting_kernel(dir: &Path, tag: &str) -> Vec<u8> {
    hosted_so(
        dir,
        "count",
        &format!(
            r#"extern "C" const char scene_test_tag[] = "{tag}";
static uint32_t calls;
SCENE_KERNEL_ENTRY(ka) {{
    SCENE_ARG_PTR(ka, 0, uint32_t)[ka->block_idx] = ++calls;
}}
"#
        ),
    )
}

/// Runs `orch_one` with the counting kernel (func_id 5, one block) and
/// returns what it wrote.
fn count(dev: &Dev, h: u32) -> u32 {
    let out = dev.malloc(4);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_OUT, out, 4),
            common::scalar(5),
            common::scalar(1),
        ],
    );
    let v = dev.get::<u32>(out, 1)[0];
    assert_eq!(scene_rt_free(dev.0, out), SCENE_RT_OK);
    v
}

#[test]
fn reset_unloads_hosted_kernels_so_globals_start_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let so = counting_kernel(dir.path(), "reset_unloads_hosted_kernels");
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=1;aiv=1");
    // NULL symbol: `kernel_entry` (SCENE_KERNEL_ENTRY).
    let incore = (
        5,
        SCENE_CORE_AIV,
        SCENE_INCORE_HOSTED,
        SCENE_KERNEL_ARGS_SCENE,
        &so[..],
        None,
    );
    let h1 = register2(&dev, &orch, "orch_one", &[incore]);
    assert_eq!(count(&dev, h1), 1);
    assert_eq!(count(&dev, h1), 2);
    // Control: the same bytes registered again without a reset share the
    // loaded copy, globals included.
    let h2 = register2(&dev, &orch, "orch_one", &[incore]);
    assert_eq!(count(&dev, h2), 3);
    assert_eq!(count(&dev, h1), 4);
    assert_eq!(
        scene_rt_reset(dev.0),
        SCENE_RT_OK,
        "reset: {}",
        last_error_message()
    );
    let h3 = register2(&dev, &orch, "orch_one", &[incore]);
    assert_eq!(count(&dev, h3), 1, "fresh globals after scene_rt_reset");
    assert_eq!(count(&dev, h3), 2);
}

/// Every kind of object g++ binds `STB_GNU_UNIQUE` (an inline variable, a
/// static local of an inline function, a template static data member, an
/// `inline thread_local`), read by the entry.
const UNIQUE_OBJECTS: &str = r#"
inline int scene_test_inline_var = 1;
inline int &scene_test_fn_static() { static int v = 2; return v; }
template <int N> struct SceneTestTemplate { static int value; };
template <int N> int SceneTestTemplate<N>::value = N;
inline thread_local int scene_test_tls[4] = {4};
static int sum() {
    return scene_test_inline_var + scene_test_fn_static() + SceneTestTemplate<3>::value +
           scene_test_tls[0];
}
"#;

/// `g++` building `src` (after `header`) into a shared object with
/// `flags`; `None` when there is no `g++` (clang never emits the binding).
fn gxx_so(dir: &Path, name: &str, header: &str, src: &str, flags: &[&str]) -> Option<Vec<u8>> {
    let cpp = dir.join(format!("{name}.cpp"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&cpp, format!("#include \"{header}\"\n{src}\n")).unwrap();
    let out = Command::new("g++")
        .args([
            "-std=c++20",
            "-shared",
            "-fPIC",
            "-O1",
            "-I",
            &common::include(),
        ])
        .args(flags)
        .arg(&cpp)
        .arg("-o")
        .arg(&so)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "g++: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(std::fs::read(&so).unwrap())
}

/// g++ binds those objects `STB_GNU_UNIQUE`, which glibc shares by name
/// with every library of the process (across `RTLD_LOCAL`) and never
/// unloads: a hosted kernel or orchestration that defines one is refused
/// at registration, naming the symbols and the fix, before it is loaded;
/// built with `-fno-gnu-unique` (as the harness builds) it registers and
/// runs. Issue 38.
#[test]
fn gnu_unique_symbols_are_refused_at_registration() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = format!(
        "{UNIQUE_OBJECTS}\nextern \"C\" void unique_entry(const SceneKernelArgs *ka) {{ SCENE_ARG_PTR(ka, 0, uint32_t)[ka->block_idx] = sum(); }}"
    );
    let Some(unique) = gxx_so(dir.path(), "unique", "scene_kernel.h", &kernel, &[]) else {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "CI has g++"
        );
        eprintln!("skipped: no g++ (the compiler that emits STB_GNU_UNIQUE)");
        return;
    };
    let orch = orch_so(dir.path(), "orch", ORCH);
    let dev = Dev::open("aic=1;aiv=1");
    let (rc, _) = try_register2(
        &dev,
        &orch,
        "orch_one",
        &[hosted(5, SCENE_CORE_AIV, &unique, "unique_entry")],
    );
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    for needed in [
        "func_id 5",
        "hosted kernel shared object",
        "STB_GNU_UNIQUE",
        "`scene_test_inline_var`",
        "scene_test_fn_static",
        "SceneTestTemplate",
        "`scene_test_tls`",
        "-fno-gnu-unique",
    ] {
        assert!(msg.contains(needed), "`{needed}` not in: {msg}");
    }

    // The same source with -fno-gnu-unique: registered, and it runs.
    let weak = gxx_so(
        dir.path(),
        "weak",
        "scene_kernel.h",
        &kernel,
        &["-fno-gnu-unique"],
    )
    .expect("g++");
    let h = register2(
        &dev,
        &orch,
        "orch_one",
        &[hosted(5, SCENE_CORE_AIV, &weak, "unique_entry")],
    );
    assert_eq!(count(&dev, h), 1 + 2 + 3 + 4);

    // An orchestration built so is refused too (the reset promises its
    // globals fresh as well).
    let orch_src = format!(
        "{UNIQUE_OBJECTS}\nSCENE_ORCH_ENTRY(unique_orch, ctx, args, nargs) {{ (void)args; (void)nargs; return sum() == 10 ? 0 : -1; }}"
    );
    let unique_orch =
        gxx_so(dir.path(), "unique_orch", "scene_orch.h", &orch_src, &[]).expect("g++");
    let (rc, _) = dev.try_register(&unique_orch, "unique_orch", &[]);
    assert_eq!(rc, SCENE_RT_E_LOAD);
    let msg = last_error_message();
    assert!(
        msg.contains("orchestration shared object")
            && msg.contains("`scene_test_inline_var`")
            && msg.contains("-fno-gnu-unique"),
        "{msg}"
    );
}

// ---- crash reports (child process) -------------------------------------------

const CRASH_KERNEL: &str = r#"
#include <vector>
int *volatile scene_test_null = nullptr;
/* Block 2 dereferences NULL; the others write their index. */
extern "C" void crash_entry(const SceneKernelArgs *ka) {
    std::vector<uint32_t> v(1, ka->block_idx);
    if (ka->block_idx == 2) *scene_test_null = 1;
    SCENE_ARG_PTR(ka, 0, uint32_t)[ka->block_idx] = v[0];
}
"#;

fn child_mode() -> Option<String> {
    std::env::var("SCENE_TEST_CHILD").ok()
}

/// Child mode `hosted_crash`: enable crash reports into
/// `$SCENE_TEST_DIR/report`, run the crashing hosted kernel (func_id 6,
/// aiv, 3 blocks on one aiv core, so the blocks run in order).
#[test]
fn child_hosted_crash() {
    if child_mode().as_deref() != Some("hosted_crash") {
        return;
    }
    let dir = PathBuf::from(std::env::var("SCENE_TEST_DIR").unwrap());
    let report = CString::new(dir.join("report").to_str().unwrap()).unwrap();
    assert_eq!(scene_rt_crash_report(report.as_ptr()), SCENE_RT_OK);
    let so = std::fs::read(dir.join("crash.so")).unwrap();
    let orch = std::fs::read(dir.join("orch.so")).unwrap();
    let dev = Dev::open("aic=1;aiv=1");
    let h = register2(
        &dev,
        &orch,
        "orch_one",
        &[hosted(6, SCENE_CORE_AIV, &so, "crash_entry")],
    );
    let out = dev.malloc(12);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_OUT, out, 12),
            common::scalar(6),
            common::scalar(3),
        ],
    );
    println!("the hosted kernel did not crash");
}

#[test]
fn a_hosted_kernel_that_faults_is_reported_as_a_kernel_crash() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    hosted_so(dir.path(), "crash", CRASH_KERNEL);
    orch_so(dir.path(), "orch", ORCH);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_hosted_crash",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SCENE_TEST_CHILD", "hosted_crash")
        .env("SCENE_TEST_DIR", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "child: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.path().join("report")).unwrap();
    for line in [
        "signal=SIGSEGV",
        "who=kernel",
        "func_id=6",
        "core=aiv",
        "block=2",
        "blocks=3",
    ] {
        assert!(
            report.lines().any(|l| l == line),
            "report lacks `{line}`:\n{report}"
        );
    }
}

/// PTO-ISA's execution-context hook, called outside any kernel block (here:
/// the test's thread): block 0, sub-block 0 of 1; NULL out-pointers are
/// skipped.
#[test]
fn the_execution_context_outside_a_block_is_block_0_of_1() {
    let (mut b, mut s, mut d) = (7u32, 7u32, 7u32);
    pto_cpu_sim_get_execution_context(&mut b, &mut s, &mut d);
    assert_eq!((b, s, d), (0, 0, 1));
    pto_cpu_sim_get_execution_context(std::ptr::null_mut(), &mut s, std::ptr::null_mut());
}
