//! A bit-identical fast path for PTO-ISA's CPU matmul (issue 39, part 5).
//!
//! On compute-bound scenes the sim's execution of PTO's `TMATMUL` is the
//! floor: PTO-ISA's CPU backend (`pto/cpu/TMatmul.hpp`, `TMatmulNzZn`)
//! computes each output element as one chain of `fma` over `k`, so a
//! 128x128x128 f32 tile waits on the FMA unit's latency 2 million times
//! (2.8 ms on an AMD EPYC guest). The order of those operations is the
//! result: a compiler may not reorder the sums, and we must not either.
//! What it may do is run many chains at once. [`OVERLAY_HEADER`] keeps
//! every chain exactly as PTO-ISA computes it (from zero, `k` ascending,
//! `fma` for a float accumulator and `sum + a * b` otherwise, then
//! `acc + sum` or `sum`) and computes a 4x16 block of them side by side:
//! the same bits, about 15x faster on that tile.
//!
//! How it reaches the kernel without touching PTO-ISA or the kernel: the
//! overlay is a directory holding only `pto/cpu/TMatmul.hpp`, put on the
//! system include path before the include roots. Its header includes
//! PTO-ISA's own file (`#include_next`), then declares an overload of
//! `pto::TMatmulNzZn` with the same signature and a C++20 constraint.
//! PTO's `TMATMUL_IMPL` calls `TMatmulNzZn` unqualified with tiles of
//! namespace `pto`, so argument-dependent lookup at instantiation sees
//! both, and the more constrained one is chosen. Before C++20 the overlay
//! is PTO-ISA's file and nothing else.
//!
//! It is used only over a PTO-ISA whose `TMatmul.hpp` is one we have
//! read and tested against ([`REVIEWED`], by content digest), and only
//! when that file is the one the compiler would find first: a newer
//! PTO-ISA whose matmul changed keeps its own code, slower but never
//! papered over. `hosted_fast_paths = false` in a platform entry or
//! `SCENE_HOSTED_FAST_PATHS=0` turns it off. Keys of units that get it
//! carry the overlay's digest (never its path), so flipping the switch
//! never serves one build for the other.
//!
//! Bit identity is checked against PTO-ISA's own code with a checkout
//! (`crates/kernels/tests/pto_fast.rs`, every dtype PTO's matmul takes,
//! tails, accumulate and bias) and, in CI, against our own reference
//! with a stand-in of PTO's tile API.

use std::path::{Path, PathBuf};

/// The overlay's `pto/cpu/TMatmul.hpp`.
pub const OVERLAY_HEADER: &str = r#"// pto/cpu/TMatmul.hpp as scenes' hosted kernels see it: written by scenes
// (crates/kernels/src/pto_fast.rs). PTO-ISA's own file first; then, for
// C++20, an overload of its CPU matmul that the compiler prefers (it is
// more constrained) and that computes every output element with the same
// operations in the same order while keeping 4x16 chains in flight.
#include_next <pto/cpu/TMatmul.hpp>
#if __cplusplus >= 202002L && defined(__cpp_concepts) && !defined(SCENE_HOSTED_FAST_PATHS_OFF)
#ifndef SCENE_PTO_FAST_MATMUL
#define SCENE_PTO_FAST_MATMUL 1
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace pto {
namespace scene_fast {

// The tiles PTO's CPU matmul takes (CheckMadValid says which), with the
// accessors this file uses.
template <typename A, typename L, typename R>
concept MatmulTiles = (std::is_same_v<typename A::DType, float> ||
                       std::is_same_v<typename A::DType, int32_t>) &&
    requires(A& a, L& l, R& r) {
        l.GetValidRow();
        l.GetValidCol();
        r.GetValidCol();
        a.GetElement(0, 0);
        l.GetElement(0, 0);
        r.GetElement(0, 0);
        a.SetElement(0, 0, typename A::DType{});
        a.data();
        l.data();
        r.data();
    };

// One step of an output element's chain, as PTO-ISA's TMatmulNzZn takes it.
template <typename C>
inline C step(C a, C b, C sum)
{
    if constexpr (std::is_same_v<C, float>) {
        return std::fma(a, b, sum);
    } else {
        return sum + a * b;
    }
}

// Rows i..i+I-1, columns j..j+W-1 of dst: I*W chains, each the one PTO-ISA
// computes for its element, advanced together over k.
template <int I, int W, typename A, typename L, typename R>
inline void block(A& dst, A* acc, L& src0, R& src1, std::size_t i, std::size_t j, std::size_t K)
{
    using C = typename A::DType;
    C sum[I][W] = {};
    for (std::size_t k = 0; k < K; k++) {
        C b[W];
        for (int l = 0; l < W; l++) {
            b[l] = static_cast<C>(src1.GetElement(k, j + l));
        }
        for (int r = 0; r < I; r++) {
            const C a = static_cast<C>(src0.GetElement(i + r, k));
            for (int l = 0; l < W; l++) {
                sum[r][l] = step(a, b[l], sum[r][l]);
            }
        }
    }
    for (int r = 0; r < I; r++) {
        for (int l = 0; l < W; l++) {
            dst.SetElement(i + r, j + l, acc ? acc->GetElement(i + r, j + l) + sum[r][l] : sum[r][l]);
        }
    }
}

template <int I, typename A, typename L, typename R>
inline void rows(A& dst, A* acc, L& src0, R& src1, std::size_t i, std::size_t N, std::size_t K)
{
    constexpr int W = 16;
    std::size_t j = 0;
    for (; j + W <= N; j += W) {
        block<I, W>(dst, acc, src0, src1, i, j, K);
    }
    for (; j < N; j++) {
        block<I, 1>(dst, acc, src0, src1, i, j, K);
    }
}

// The bytes a tile's storage spans.
template <typename T>
inline const unsigned char* lo(T& t)
{
    return reinterpret_cast<const unsigned char*>(t.data());
}
template <typename T>
inline const unsigned char* hi(T& t)
{
    return lo(t) + sizeof(typename T::DType) * static_cast<std::size_t>(T::Rows) * static_cast<std::size_t>(T::Cols);
}
template <typename T, typename U>
inline bool overlap(T& t, U& u)
{
    return lo(t) < hi(u) && lo(u) < hi(t);
}

} // namespace scene_fast

template <typename TileAcc, typename TileLeft, typename TileRight>
    requires scene_fast::MatmulTiles<TileAcc, TileLeft, TileRight>
void TMatmulNzZn(TileAcc& dst, TileAcc* acc, TileLeft& src0, TileRight& src1)
{
    CheckMadValid<TileAcc, TileLeft, TileRight>();
    const std::size_t M = src0.GetValidRow();
    const std::size_t K = src0.GetValidCol();
    const std::size_t N = src1.GetValidCol();
    // PTO-ISA writes element (i, j) before it reads any operand of a later
    // element; if the output shared storage with an operand, the order of
    // the writes would be part of the result. Keep PTO's order then.
    const bool shared = scene_fast::overlap(dst, src0) || scene_fast::overlap(dst, src1) ||
                        (acc != nullptr && acc->data() != dst.data() && scene_fast::overlap(dst, *acc));
    if (shared) {
        for (std::size_t i = 0; i < M; i++) {
            for (std::size_t j = 0; j < N; j++) {
                scene_fast::block<1, 1>(dst, acc, src0, src1, i, j, K);
            }
        }
        return;
    }
    constexpr std::size_t I = 4;
    // PTO's own split of rows over threads (PTO_CPU_MAX_THREADS), by blocks.
    cpu::parallel_for_1d(0, (M + I - 1) / I, M * N * K, [&](std::size_t b) {
        const std::size_t i = b * I;
        if (i + I <= M) {
            scene_fast::rows<I>(dst, acc, src0, src1, i, N, K);
        } else {
            for (std::size_t r = i; r < M; r++) {
                scene_fast::rows<1>(dst, acc, src0, src1, r, N, K);
            }
        }
    });
}

} // namespace pto
#endif
#endif
"#;

/// PTO-ISA `pto/cpu/TMatmul.hpp` contents (blake3, hex) whose
/// `TMatmulNzZn` computes what [`OVERLAY_HEADER`] computes, each read and
/// checked bit for bit (`tests/pto_fast.rs`) before it was added here.
pub const REVIEWED: &[(&str, &str)] = &[(
    "e2b9e93663ad939c09d1ed2b93642963d0c68ac66547a3c712508d0118c95e8c",
    "PTO-ISA 646de3ff..cd4a3d3f (simpler's pto_isa.pin, 2026-08-19)",
)];

/// The relative path the overlay shadows.
pub const SHADOWED: &str = "pto/cpu/TMatmul.hpp";

/// The digest of [`OVERLAY_HEADER`], hex: the overlay's key field and the
/// name of its directory.
pub fn overlay_digest() -> String {
    blake3::hash(OVERLAY_HEADER.as_bytes()).to_hex().to_string()
}

/// Whether the overlay may stand before `roots`: the first of them that
/// has [`SHADOWED`] (the file the overlay's `#include_next` reaches) has a
/// [`REVIEWED`] content. `digest` reads a file's blake3 hex (memoised by
/// the caller), `None` when unreadable.
pub fn applies(roots: &[PathBuf], digest: impl Fn(&Path) -> Option<String>) -> bool {
    let Some(file) = roots.iter().map(|r| r.join(SHADOWED)).find(|f| f.is_file()) else {
        return false;
    };
    digest(&file).is_some_and(|d| REVIEWED.iter().any(|(known, _)| *known == d))
}

/// The compiler arguments that put the overlay in `dir` first on the
/// system include path.
pub fn overlay_flags(dir: &Path) -> [std::ffi::OsString; 2] {
    ["-isystem".into(), dir.as_os_str().to_owned()]
}

/// Writes the overlay under `base` (`<base>/pto-fast-<digest>/pto/cpu/
/// TMatmul.hpp`, once: the name is its content's digest) and returns its
/// directory.
pub fn materialise(base: &Path) -> std::io::Result<PathBuf> {
    let digest = overlay_digest();
    let dir = base.join(format!("pto-fast-{}", &digest[..16]));
    scene_util::write_atomically_if_changed(&dir.join(SHADOWED), OVERLAY_HEADER.as_bytes())?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlay_is_written_once_under_its_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = materialise(tmp.path()).unwrap();
        assert!(dir.ends_with(format!("pto-fast-{}", &overlay_digest()[..16])));
        let header = dir.join(SHADOWED);
        assert_eq!(std::fs::read_to_string(&header).unwrap(), OVERLAY_HEADER);
        std::fs::write(&header, "// damaged").unwrap();
        assert_eq!(materialise(tmp.path()).unwrap(), dir);
        assert_eq!(std::fs::read_to_string(&header).unwrap(), OVERLAY_HEADER);
    }

    #[test]
    fn the_overlay_stands_only_before_a_reviewed_matmul_found_first() {
        let tmp = tempfile::tempdir().unwrap();
        let (known, other, none) = (
            tmp.path().join("known"),
            tmp.path().join("other"),
            tmp.path().join("none"),
        );
        for (root, text) in [(&known, "reviewed"), (&other, "changed upstream")] {
            std::fs::create_dir_all(root.join("pto/cpu")).unwrap();
            std::fs::write(root.join(SHADOWED), text).unwrap();
        }
        std::fs::create_dir_all(&none).unwrap();
        let digest = |f: &Path| {
            let text = std::fs::read_to_string(f).ok()?;
            Some(if text == "reviewed" {
                REVIEWED[0].0.to_owned()
            } else {
                blake3::hash(text.as_bytes()).to_hex().to_string()
            })
        };
        assert!(applies(&[none.clone(), known.clone()], digest));
        assert!(applies(&[known.clone(), other.clone()], digest));
        // The compiler would reach the changed file first.
        assert!(!applies(&[other, known], digest));
        assert!(!applies(&[none], digest));
        assert!(!applies(&[], digest));
    }
}
