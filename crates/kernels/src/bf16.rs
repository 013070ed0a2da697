//! A real `std::bfloat16_t` for hosted kernels (issue 39).
//!
//! PTO-ISA's `pto/common/type.hpp` takes `std::bfloat16_t` from C++23's
//! `<stdfloat>` only when the compiler defines `__STDCPP_BFLOAT16_T__`;
//! otherwise it falls back, silently, to `typedef _Float16 bfloat16_t`: a
//! bf16 tensor is then read as IEEE half, and a kernel computes nonsense
//! that can still pass loose tolerances. g++ >= 14 with libstdc++ has the
//! real type; clang (so `zig c++`, whose libc++ has no `<stdfloat>`) has
//! the arithmetic type `__bf16` but not the standard name. Where the CPU
//! has no bf16 conversion instruction clang calls `__truncsfbf2` for a
//! float-to-bf16 conversion, which `zig c++`'s compiler-rt lacks: a
//! kernel would link as a shared object and fail to load. So the shim
//! also defines it (weak and hidden, round to nearest even, NaN kept
//! quiet: what libgcc's does), and its probe links an executable.
//!
//! So before the first hosted unit of each distinct set of unit flags
//! (the language standard is one) the builder asks the hosted compiler,
//! with the hosted flags and those, two questions ([`NATIVE_PROBE`], then
//! [`SHIM_PROBE`]): does PTO's condition hold as it is? If not, does it
//! hold with our `<stdfloat>` ([`SHIM_HEADER`]: `std::bfloat16_t` as
//! `__bf16`) first on the system include path and the macro defined? In
//! the second case every hosted compile gets both ([`shim_flags`]) and the
//! keys get the shim's digest (`hosted_bf16_shim`), never its path, so
//! caches stay shared across checkouts. A compiler with neither keeps its
//! own behaviour (PTO's fallback), as the original's sim would on it.
//!
//! The answers are memoised per compiler identity like flag probes
//! (`KeyContext::accepts`): a warm run starts no compiler for them.

use std::path::{Path, PathBuf};

/// Our `<stdfloat>`: the standard name for the compiler's `__bf16` (and
/// whatever the library's own `<stdfloat>` has, when it has one).
pub const SHIM_HEADER: &str = "\
// <stdfloat> for a C++ library without std::bfloat16_t: written by scenes
// (crates/kernels/src/bf16.rs) for hosted kernels whose compiler has the
// arithmetic type __bf16 but not its standard name.
#pragma once
#if __has_include_next(<stdfloat>)
#include_next <stdfloat>
#endif
namespace std {
using bfloat16_t = __bf16;
}
// The float-to-bf16 conversion the compiler calls where the CPU has no
// instruction for it, for runtime libraries without one: round to nearest
// even, a NaN stays a quiet NaN. Weak and hidden: one per shared object.
extern \"C\" __attribute__((weak, visibility(\"hidden\"))) __bf16 __truncsfbf2(float f) {
    unsigned int u;
    __builtin_memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        u = (u >> 16) | 0x40u;
    } else {
        u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    }
    unsigned short bits = static_cast<unsigned short>(u);
    __bf16 r;
    __builtin_memcpy(&r, &bits, sizeof r);
    return r;
}
";

/// The macro C++23 defines when `std::bfloat16_t` exists; PTO-ISA tests it.
pub const SHIM_DEFINE: &str = "-D__STDCPP_BFLOAT16_T__=1";

/// What PTO-ISA's `type.hpp` requires of the compiler to use the real
/// type, and a conversion each way through it.
pub const NATIVE_PROBE: &str = r#"
#if defined(__has_include) && __has_include(<stdfloat>)
#include <stdfloat>
#endif
#if !(__cplusplus >= 202302L && defined(__STDCPP_BFLOAT16_T__))
#error "no std::bfloat16_t"
#endif
static_assert(sizeof(std::bfloat16_t) == 2);
float scene_bf16_widen(std::bfloat16_t x) { return static_cast<float>(x) + 1.0f; }
std::bfloat16_t scene_bf16_narrow(float x) { return static_cast<std::bfloat16_t>(x); }
"#;

/// The same with the shim, linked into an executable (every conversion
/// it calls defined): it must also be a bf16 (8 exponent bits), not a
/// half: 2^100 survives the round trip.
pub const SHIM_PROBE: &str = r#"
#include <stdfloat>
#if !(__cplusplus >= 202302L && defined(__STDCPP_BFLOAT16_T__))
#error "no std::bfloat16_t"
#endif
static_assert(sizeof(std::bfloat16_t) == 2);
static_assert(static_cast<float>(static_cast<std::bfloat16_t>(0x1p100f)) == 0x1p100f);
float scene_bf16_widen(std::bfloat16_t x) { return static_cast<float>(x) + 1.0f; }
std::bfloat16_t scene_bf16_narrow(float x) { return static_cast<std::bfloat16_t>(x); }
int main() {
    volatile float f = 3.0f;
    return scene_bf16_widen(scene_bf16_narrow(f)) == 4.0f ? 0 : 1;
}
"#;

/// The digest of [`SHIM_HEADER`], hex: the shim's key field and the name
/// of its directory.
pub fn shim_digest() -> String {
    blake3::hash(SHIM_HEADER.as_bytes()).to_hex().to_string()
}

/// The compiler arguments that put the shim in `dir` before the library's
/// headers and declare the type.
pub fn shim_flags(dir: &Path) -> [std::ffi::OsString; 3] {
    [
        "-isystem".into(),
        dir.as_os_str().to_owned(),
        SHIM_DEFINE.into(),
    ]
}

/// Writes the shim under `base` (`<base>/bf16-<digest>/stdfloat`, once:
/// the name is its content's digest) and returns its directory.
pub fn materialise(base: &Path) -> std::io::Result<PathBuf> {
    let digest = shim_digest();
    let dir = base.join(format!("bf16-{}", &digest[..16]));
    scene_util::write_atomically_if_changed(&dir.join("stdfloat"), SHIM_HEADER.as_bytes())?;
    Ok(dir)
}

/// How the hosted compiler gets `std::bfloat16_t`, from the two probes'
/// answers (`native` asked first; `shim` only if it says no).
pub fn decide(native: impl FnOnce() -> bool, shim: impl FnOnce() -> bool) -> HostedBf16 {
    if native() {
        HostedBf16::Native
    } else if shim() {
        HostedBf16::Shim
    } else {
        HostedBf16::Missing
    }
}

/// The outcome of `decide` (the builder's two probes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostedBf16 {
    /// The compiler and library have it: nothing to add.
    Native,
    /// `__bf16` under our `<stdfloat>`.
    Shim,
    /// Neither: PTO-ISA falls back to `_Float16`, as it would there.
    Missing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_is_written_once_under_its_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = materialise(tmp.path()).unwrap();
        assert!(dir.ends_with(format!("bf16-{}", &shim_digest()[..16])));
        assert_eq!(
            std::fs::read_to_string(dir.join("stdfloat")).unwrap(),
            SHIM_HEADER
        );
        // A damaged copy is rewritten, not trusted.
        std::fs::write(dir.join("stdfloat"), "namespace std {}").unwrap();
        assert_eq!(materialise(tmp.path()).unwrap(), dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("stdfloat")).unwrap(),
            SHIM_HEADER
        );
    }

    #[test]
    fn the_shim_is_asked_only_when_the_native_type_is_missing() {
        assert_eq!(decide(|| true, || panic!("not asked")), HostedBf16::Native);
        assert_eq!(decide(|| false, || true), HostedBf16::Shim);
        assert_eq!(decide(|| false, || false), HostedBf16::Missing);
    }
}
