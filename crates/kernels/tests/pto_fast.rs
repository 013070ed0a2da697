//! The fast path for PTO-ISA's CPU matmul (`src/pto_fast.rs`) computes
//! the same bits as the code it stands in for.
//!
//! Each test builds one program twice, with the overlay first on the
//! include path and without it, runs both, and compares every output
//! bit. CI runs the first against a stand-in of PTO's tile API that we
//! wrote (the reference matmul in it computes what PTO-ISA's does); with
//! a PTO-ISA checkout (`SCENE_PTO_ISA_ROOT`) the second checks against
//! PTO-ISA's own code, every dtype its matmul takes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the overlay (`<dir>/pto/cpu/TMatmul.hpp`) and returns `dir`.
fn overlay(base: &Path) -> PathBuf {
    let dir = base.join("overlay");
    std::fs::create_dir_all(dir.join("pto/cpu")).expect("mkdir overlay");
    std::fs::write(
        dir.join("pto/cpu/TMatmul.hpp"),
        scene_kernels::PTO_FAST_OVERLAY,
    )
    .expect("write overlay");
    dir
}

/// Compiles `main` with `cxx` and `flags` (then `-isystem` per root, in
/// order) and returns its standard output.
fn build_and_run(
    cxx: &std::ffi::OsStr,
    dir: &Path,
    name: &str,
    flags: &[&str],
    roots: &[&Path],
    main: &Path,
) -> String {
    let exe = dir.join(name);
    let mut cmd = Command::new(cxx);
    cmd.args(flags);
    for root in roots {
        cmd.arg("-isystem").arg(root);
    }
    cmd.arg(main).arg("-o").arg(&exe);
    let out = common::run(&mut cmd);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = common::run(&mut Command::new(&exe));
    assert!(
        run.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout).expect("utf-8 output")
}

/// A stand-in for PTO-ISA's tile API (our own): tiles in 8-column
/// blocks, valid shapes at run time, and in `TMatmulNzZn` the reference:
/// what PTO-ISA's CPU matmul computes, element by element, reached from
/// `TMATMUL_IMPL` by an unqualified call as there. `src1` reads are
/// counted, so a run shows which implementation ran.
const STAND_IN: &str = r#"
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
namespace pto {
namespace cpu {
template <typename Fn>
inline void parallel_for_1d(std::size_t begin, std::size_t end, std::size_t, Fn fn) {
    for (std::size_t i = begin; i < end; ++i) fn(i);
}
}
inline unsigned long long right_reads = 0;
template <typename T, int R, int C, bool Right = false>
struct Tile {
    using DType = T;
    static constexpr int Rows = R;
    static constexpr int Cols = C;
    T* p = nullptr;
    int vr = R, vc = C;
    T* data() { return p; }
    int GetValidRow() const { return vr; }
    int GetValidCol() const { return vc; }
    static std::size_t at(std::size_t r, std::size_t c) { return (c / 8) * R * 8 + r * 8 + c % 8; }
    T GetElement(std::size_t r, std::size_t c) {
        if constexpr (Right) right_reads++;
        return p[at(r, c)];
    }
    void SetElement(std::size_t r, std::size_t c, const T& v) { p[at(r, c)] = v; }
};
template <typename A, typename L, typename R>
void CheckMadValid() {}
template <typename A, typename L, typename R>
void TMatmulNzZn(A& dst, A* acc, L& src0, R& src1) {
    using C = typename A::DType;
    for (std::size_t i = 0; i < (std::size_t)src0.GetValidRow(); i++) {
        for (std::size_t j = 0; j < (std::size_t)src1.GetValidCol(); j++) {
            C s = 0;
            for (std::size_t k = 0; k < (std::size_t)src0.GetValidCol(); k++) {
                C a = static_cast<C>(src0.GetElement(i, k));
                C b = static_cast<C>(src1.GetElement(k, j));
                if constexpr (std::is_same_v<C, float>) s = std::fma(a, b, s); else s += a * b;
            }
            dst.SetElement(i, j, acc ? acc->GetElement(i, j) + s : s);
        }
    }
}
template <typename A, typename L, typename R>
void TMATMUL_IMPL(A& c, L& a, R& b) { TMatmulNzZn(c, static_cast<A*>(nullptr), a, b); }
template <typename A, typename L, typename R>
void TMATMUL_ACC_IMPL(A& out, A& in, L& a, R& b) { TMatmulNzZn(out, &in, a, b); }
}
"#;

/// Matmuls of every shape class (full blocks, row and column tails,
/// single elements), with an accumulator (the same tile, as
/// `TMATMUL_ACC(c, c, ...)` is written), and with the output sharing
/// storage with an operand. Prints a digest of the output's bits per
/// case, the `src1` reads, and whether a reordered sum of the same data
/// would have shown (the data can tell orders apart).
const STAND_IN_MAIN: &str = r#"
#include <pto/cpu/TMatmul.hpp>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
using namespace pto;
constexpr int T = 64;
template <typename V>
unsigned long long digest(const V* p, std::size_t n) {
    unsigned long long h = 1469598103934665603ull;
    const unsigned char* b = reinterpret_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n * sizeof(V); i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
std::mt19937 rng(7);
template <typename V>
void fill(std::vector<V>& v) {
    std::uniform_real_distribution<double> m(-1, 1);
    std::uniform_int_distribution<int> e(-30, 30);
    for (auto& x : v) {
        if constexpr (std::is_same_v<V, int8_t>) x = static_cast<int8_t>(e(rng) * 4);
        else x = static_cast<V>(std::ldexp(m(rng), e(rng) / (sizeof(V) == 2 ? 3 : 1)));
    }
}
template <typename C, typename V>
void one(const char* name, int M, int K, int N, bool accumulate) {
    std::vector<V> a(T * T), b(T * T);
    std::vector<C> c(T * T), c0(T * T);
    fill(a); fill(b);
    for (auto& x : c0) x = static_cast<C>(rng() % 1000) / static_cast<C>(7);
    c = c0;
    Tile<V, T, T> l{a.data(), M, K};
    Tile<V, T, T, true> r{b.data(), K, N};
    Tile<C, T, T> o{c.data(), M, N};
    if (accumulate) TMATMUL_ACC_IMPL(o, o, l, r); else TMATMUL_IMPL(o, l, r);
    std::printf("%s %dx%dx%d%s %016llx\n", name, M, K, N, accumulate ? " acc" : "", digest(c.data(), c.size()));
}
int main() {
    const int shapes[][3] = {{64, 64, 64}, {37, 53, 19}, {3, 5, 17}, {1, 1, 1}, {4, 64, 16}, {5, 7, 33}, {8, 1, 48}};
    for (auto& s : shapes) {
        for (bool acc : {false, true}) {
            one<float, float>("f32", s[0], s[1], s[2], acc);
            one<int32_t, int8_t>("s8", s[0], s[1], s[2], acc);
#if defined(__FLT16_MANT_DIG__)
            one<float, _Float16>("f16", s[0], s[1], s[2], acc);
#endif
        }
    }
    {
        // The output in the left operand's storage: each write is read
        // by later elements, so the order of the writes is the result.
        std::vector<float> a(T * T), b(T * T);
        fill(a); fill(b);
        Tile<float, T, T> l{a.data(), 20, 20};
        Tile<float, T, T, true> r{b.data(), 20, 20};
        Tile<float, T, T> o{a.data(), 20, 20};
        TMATMUL_IMPL(o, l, r);
        std::printf("shared %016llx\n", digest(a.data(), a.size()));
    }
    {
        // A sum in another order gives other bits on this data.
        std::vector<float> a(T * T), b(T * T);
        fill(a); fill(b);
        int differ = 0;
        for (int j = 0; j < T; j++) {
            float fwd = 0, bwd = 0;
            for (int k = 0; k < T; k++) fwd = std::fma(a[k], b[j * T + k], fwd);
            for (int k = T - 1; k >= 0; k--) bwd = std::fma(a[k], b[j * T + k], bwd);
            differ += std::memcmp(&fwd, &bwd, sizeof fwd) != 0;
        }
        std::printf("order-sensitive %d\n", differ);
    }
    std::fprintf(stdout, "reads %llu\n", right_reads);
}
"#;

/// The C++20 compiler the tests build with: `SCENE_TEST_HOSTED_CXX`
/// (`zig c++` under CI), else `c++`.
fn cxx() -> std::ffi::OsString {
    std::env::var_os("SCENE_TEST_HOSTED_CXX").unwrap_or_else(|| "c++".into())
}

fn lines_except_reads(out: &str) -> Vec<&str> {
    out.lines().filter(|l| !l.starts_with("reads ")).collect()
}

fn reads(out: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix("reads "))
        .and_then(|n| n.parse().ok())
        .expect("a reads line")
}

#[test]
fn the_fast_matmul_computes_every_chain_of_the_reference_bit_for_bit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let stand_in = tmp.path().join("pto-stand-in");
    std::fs::create_dir_all(stand_in.join("pto/cpu")).expect("mkdir");
    std::fs::write(stand_in.join("pto/cpu/TMatmul.hpp"), STAND_IN).expect("stand-in");
    let main = tmp.path().join("main.cpp");
    std::fs::write(&main, STAND_IN_MAIN).expect("main");
    let over = overlay(tmp.path());
    let cxx = cxx();
    let flags = ["-std=c++20", "-O2"];
    let reference = build_and_run(&cxx, tmp.path(), "reference", &flags, &[&stand_in], &main);
    let fast = build_and_run(&cxx, tmp.path(), "fast", &flags, &[&over, &stand_in], &main);

    assert!(
        lines_except_reads(&reference).len() >= 29,
        "every case printed:\n{reference}"
    );
    assert_eq!(lines_except_reads(&fast), lines_except_reads(&reference));
    // The data tells sum orders apart, so equal digests mean equal orders.
    let sensitive = reference
        .lines()
        .find_map(|l| l.strip_prefix("order-sensitive "))
        .and_then(|n| n.parse::<u32>().ok())
        .expect("order line");
    assert!(sensitive > 0, "{reference}");
    // And the fast path is what ran: it reads each right-operand element
    // once per 4 rows, the reference once per row.
    assert!(
        reads(&fast) * 2 < reads(&reference),
        "fast {} vs reference {} reads of src1",
        reads(&fast),
        reads(&reference)
    );
    // Before C++20 the overlay is the file it shadows and nothing more.
    let old = build_and_run(
        &cxx,
        tmp.path(),
        "cxx17",
        &["-std=c++17", "-O2"],
        &[&over, &stand_in],
        &main,
    );
    assert_eq!(old, reference);
}

/// Every matmul PTO-ISA's CPU backend takes (f32, f16 and bf16 into f32,
/// s8 into s32), full tiles and valid shapes with tails, plain,
/// accumulating and with bias; a digest of each output's bits.
const PTO_MAIN: &str = r#"
#include <cstdint>
#include <cstring>
#include <pto/pto-inst.hpp>
#include <cstdio>
#include <random>
using namespace pto;
std::mt19937 rng(11);
unsigned long long digest(const void* p, std::size_t n) {
    unsigned long long h = 1469598103934665603ull;
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
template <typename V>
void fill(V* p, std::size_t n) {
    std::uniform_real_distribution<float> m(-1, 1);
    std::uniform_int_distribution<int> e(-12, 12);
    for (std::size_t i = 0; i < n; i++) {
        if constexpr (std::is_same_v<V, int8_t>) p[i] = static_cast<int8_t>(e(rng) * 9);
        else p[i] = static_cast<V>(std::ldexp(m(rng), e(rng)));
    }
}
template <typename C, typename V, int M, int K, int N, int VM, int VK, int VN>
void one(const char* name) {
    using L = TileLeft<V, M, K, VM, VK>;
    using R = TileRight<V, K, N, VK, VN>;
    using A = TileAcc<C, M, N, VM, VN>;
    L l; R r; A c;
    TASSIGN(l, 0x0); TASSIGN(r, 0x0); TASSIGN(c, 0x0);
    fill(l.data(), M * K); fill(r.data(), K * N);
    TMATMUL(c, l, r);
    std::printf("%s %dx%dx%d %016llx\n", name, VM, VK, VN, digest(c.data(), sizeof(C) * M * N));
    TMATMUL_ACC(c, c, l, r);
    std::printf("%s %dx%dx%d acc %016llx\n", name, VM, VK, VN, digest(c.data(), sizeof(C) * M * N));
    if constexpr (std::is_same_v<C, float>) {
        using B = Tile<TileType::Bias, C, 1, N, BLayout::RowMajor, 1, VN>;
        B bias;
        TASSIGN(bias, 0x0);
        fill(bias.data(), N);
        TMATMUL_BIAS(c, l, r, bias);
        std::printf("%s %dx%dx%d bias %016llx\n", name, VM, VK, VN, digest(c.data(), sizeof(C) * M * N));
    }
}
int main() {
#ifdef SCENE_PTO_FAST_MATMUL
    std::printf("fast path compiled in\n");
#endif
    one<float, float, 128, 128, 128, 128, 128, 128>("f32");
    one<float, float, 64, 64, 64, 37, 53, 19>("f32");
    one<float, float, 16, 16, 16, 3, 5, 9>("f32");
    one<float, half, 64, 64, 64, 64, 64, 64>("f16");
    one<float, half, 64, 64, 64, 33, 17, 31>("f16");
    one<float, bfloat16_t, 64, 64, 64, 64, 64, 64>("bf16");
    one<float, bfloat16_t, 32, 32, 32, 29, 31, 7>("bf16");
    one<int32_t, int8_t, 64, 64, 64, 64, 64, 64>("s8");
    one<int32_t, int8_t, 32, 64, 32, 5, 37, 18>("s8");
}
"#;

/// Against PTO-ISA's own code: skipped without a checkout
/// (`SCENE_PTO_ISA_ROOT`); the compiler is `SCENE_TEST_HOSTED_CXX`, else
/// `SCENE_HOSTED_CXX`, else `c++`.
#[test]
fn the_fast_matmul_is_bit_identical_to_pto_isas_own() {
    let Some(pto) = std::env::var_os("SCENE_PTO_ISA_ROOT").map(PathBuf::from) else {
        eprintln!(
            "skipped: set SCENE_PTO_ISA_ROOT to a PTO-ISA checkout to compare with its matmul"
        );
        return;
    };
    let cxx = std::env::var_os("SCENE_TEST_HOSTED_CXX")
        .or_else(|| std::env::var_os("SCENE_HOSTED_CXX"))
        .unwrap_or_else(|| "c++".into());
    let include = pto.join("include");
    let file = include.join("pto/cpu/TMatmul.hpp");
    let digest = blake3::hash(&std::fs::read(&file).expect("PTO-ISA's TMatmul.hpp"))
        .to_hex()
        .to_string();
    assert!(
        scene_kernels::PTO_FAST_REVIEWED
            .iter()
            .any(|(d, _)| *d == digest),
        "{} ({digest}) is not a reviewed one: review it, then add it to REVIEWED",
        file.display()
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let main = tmp.path().join("main.cpp");
    std::fs::write(&main, PTO_MAIN).expect("main");
    let over = overlay(tmp.path());
    // PTO's sim flags as the harness gives them (`--simpler-root`).
    let flags = [
        "-std=c++2b",
        "-O2",
        "-D__CPU_SIM",
        "-DPTO_CPU_MAX_THREADS=1",
        "-D__STDCPP_BFLOAT16_T__=1",
    ];
    let shim = tmp.path().join("shim");
    std::fs::create_dir_all(&shim).expect("mkdir");
    std::fs::write(shim.join("stdfloat"), scene_kernels::BF16_SHIM_HEADER).expect("shim");
    let own = build_and_run(&cxx, tmp.path(), "pto", &flags, &[&shim, &include], &main);
    let fast = build_and_run(
        &cxx,
        tmp.path(),
        "fast",
        &flags,
        &[&shim, &over, &include],
        &main,
    );
    assert!(fast.starts_with("fast path compiled in\n"), "{fast}");
    let fast: Vec<&str> = fast.lines().skip(1).collect();
    let own: Vec<&str> = own.lines().collect();
    assert_eq!(own.len(), 25, "{own:?}");
    assert_eq!(fast, own);
}
