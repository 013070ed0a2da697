//! The host's vector ISA for hosted kernels (issue 39 part 5): a hosted
//! kernel runs on this machine's cores, so it is compiled for what they
//! have (PTO-ISA's CPU backend is loops over tiles, which the compiler
//! vectorises: AVX2 and FMA roughly halve benchmark_bgemm's device time
//! against baseline x86-64). The level is a compiler flag in the
//! hosted flags, so it is in every hosted unit's key: a cache shared by
//! machines of different levels keeps one entry per level, and a machine
//! never loads code its cores cannot run.
//!
//! Levels are the psABI's (`x86-64-v2`, `-v3`), as gcc 11 and clang 12 on
//! spell them; `zig c++` takes `-march` as a zig CPU name and spells
//! them `x86_64_v3` (it refuses `x86-64-v3`: "unknown CPU: 'x86'"), so
//! each level has both spellings ([`host_march_flags`]) and the first the
//! compiler accepts (probed like `-fno-gnu-unique`) is used; a compiler
//! that refuses both builds for its default. `x86-64-v4` (AVX-512) is not
//! used: its wider vectors slow some cores' clocks and gain little on
//! these loops. Other architectures keep the compiler's default.

/// The `-march=` flags for this host's cores, best first, each level in
/// the psABI's spelling then zig's; empty when none is better than the
/// compiler's default.
pub fn host_march_flags() -> &'static [&'static str] {
    match host_march_flag() {
        Some("-march=x86-64-v3") => &["-march=x86-64-v3", "-march=x86_64_v3"],
        Some("-march=x86-64-v2") => &["-march=x86-64-v2", "-march=x86_64_v2"],
        _ => &[],
    }
}

/// The `-march=` flag for this host's cores in the psABI's spelling, if
/// one is better than the compiler's default.
pub fn host_march_flag() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let v2 = has!("sse3")
            && has!("ssse3")
            && has!("sse4.1")
            && has!("sse4.2")
            && has!("popcnt")
            && has!("cmpxchg16b");
        let v3 = v2
            && has!("avx")
            && has!("avx2")
            && has!("bmi1")
            && has!("bmi2")
            && has!("f16c")
            && has!("fma")
            && has!("lzcnt")
            && has!("movbe")
            && has!("xsave");
        if v3 {
            return Some("-march=x86-64-v3");
        }
        if v2 {
            return Some("-march=x86-64-v2");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_has_the_psabi_and_the_zig_spelling() {
        let flags = host_march_flags();
        assert_eq!(flags.first().copied(), host_march_flag());
        if let [psabi, zig] = flags {
            assert_eq!(psabi.replace('-', "_").replace("_march", "-march"), *zig);
        } else {
            assert!(flags.is_empty(), "{flags:?}");
        }
    }

    #[test]
    fn the_flag_names_a_psabi_level_or_nothing() {
        match host_march_flag() {
            None => {}
            Some(f) => assert!(f == "-march=x86-64-v2" || f == "-march=x86-64-v3", "{f}"),
        }
    }
}
