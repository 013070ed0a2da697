//! Objects a shared object would share with every other library of the
//! process: `STB_GNU_UNIQUE` (issue 38).
//!
//! g++ gives the static locals of inline functions, C++17 inline
//! variables, template static data members and `inline thread_local`
//! variables the binding `STB_GNU_UNIQUE`. glibc binds such a symbol
//! process-wide by name, across `RTLD_LOCAL`, and never unloads a library
//! that defines one. A device worker loads the hosted kernels (and C++
//! orchestrations) of every scene it serves into one process, so with that
//! binding a kernel would use another scene's object of the same name (a
//! wrong kernel passing because a right one ran first), and a reset would
//! not give it fresh ones. So C++ shared objects are keyed and built with
//! [`NO_GNU_UNIQUE`] by a compiler that accepts it (g++; clang never emits
//! the binding and refuses the flag), and a built one that still defines
//! such a symbol is refused ([`refuse_gnu_unique`]): a static library
//! compiled without the flag (`-static-libstdc++`), `-fgnu-unique` in
//! the platform's flags, a compiler that takes the flag and ignores it.

use std::path::Path;

use goblin::elf::Elf;
use goblin::elf::sym::STB_GNU_UNIQUE;

use crate::error::CompileError;
use crate::toolchain::Toolchain;

/// g++'s flag that gives those objects the binding `STB_WEAK` instead:
/// each library then binds its own (`RTLD_LOCAL` keeps them apart), and
/// `dlclose` unloads it.
pub const NO_GNU_UNIQUE: &str = "-fno-gnu-unique";

/// `tc` as hosted kernels and C++ orchestrations are keyed and built with
/// it: [`NO_GNU_UNIQUE`] appended to `hosted_flags` when the hosted
/// compiler accepts it, and to `cxx_flags` when the C++ compiler does
/// (`cxx_flags` reach orchestrations through `orch_args`; image units keep
/// the toolchain as configured). `accepts` answers for a compiler (the
/// builder's memoised probe, so the keys follow the compiler's identity).
pub(crate) fn isolated(tc: &Toolchain, accepts: impl Fn(&Path, &str) -> bool) -> Toolchain {
    let mut tc = tc.clone();
    let has = |flags: &[String]| flags.iter().any(|f| f == NO_GNU_UNIQUE);
    if !has(&tc.hosted_flags) && accepts(&tc.hosted_cxx, NO_GNU_UNIQUE) {
        tc.hosted_flags.push(NO_GNU_UNIQUE.to_owned());
    }
    if !has(&tc.cxx_flags) && accepts(&tc.cxx, NO_GNU_UNIQUE) {
        tc.cxx_flags.push(NO_GNU_UNIQUE.to_owned());
    }
    // Hosted kernels run on this machine's cores: compile them for its
    // vector ISA (crate::isa), unless the flags already choose one.
    if tc.hosted_isa
        && !tc.hosted_flags.iter().any(|f| f.starts_with("-march="))
        && let Some(march) = crate::isa::host_march_flags()
            .iter()
            .find(|march| accepts(&tc.hosted_cxx, march))
    {
        tc.hosted_flags.push((*march).to_owned());
    }
    tc
}

/// The names of the symbols the ELF shared object `bytes` defines with
/// the binding `STB_GNU_UNIQUE`, in the order of its dynamic symbol table.
/// Empty for anything that is not ELF (Mach-O has no such binding).
pub fn gnu_unique_symbols(bytes: &[u8]) -> Vec<String> {
    let Ok(elf) = Elf::parse(bytes) else {
        return Vec::new();
    };
    elf.dynsyms
        .iter()
        .filter(|s| s.st_bind() == STB_GNU_UNIQUE && s.st_shndx != 0)
        .map(|s| elf.dynstrtab.get_at(s.st_name).unwrap_or("?").to_owned())
        .collect()
}

/// Refuses the shared object `bytes` built by `compiler` if it defines a
/// symbol with the binding `STB_GNU_UNIQUE` (see the module docs), naming
/// the symbols.
pub(crate) fn refuse_gnu_unique(bytes: &[u8], compiler: &Path) -> Result<(), CompileError> {
    let symbols = gnu_unique_symbols(bytes);
    if symbols.is_empty() {
        return Ok(());
    }
    Err(CompileError::GnuUnique {
        compiler: compiler.to_path_buf(),
        symbols,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_but_an_elf_object_has_no_unique_symbols() {
        assert!(gnu_unique_symbols(b"").is_empty());
        assert!(gnu_unique_symbols(b"not an object at all").is_empty());
        assert!(gnu_unique_symbols(b"\x7fELF\x02\x01\x01").is_empty());
    }

    /// The host's ISA flag goes to hosted kernels only (never to
    /// orchestrations or images), only when the hosted compiler takes
    /// it (in the psABI's spelling, else zig's), and never over a `-march` the flags chose or with `hosted_isa`
    /// off.
    #[test]
    fn hosted_kernels_get_the_hosts_isa_when_their_compiler_takes_it() {
        let base = Toolchain::builtin("a2a3sim").expect("builtin");
        let Some(march) = crate::isa::host_march_flag() else {
            // Not x86-64: nothing to add, whatever the compiler takes.
            assert!(
                !isolated(&base, |_, _| true)
                    .hosted_flags
                    .iter()
                    .any(|f| f.starts_with("-march="))
            );
            return;
        };
        let tc = isolated(&base, |_, _| true);
        assert_eq!(
            tc.hosted_flags.iter().filter(|f| *f == march).count(),
            1,
            "{:?}",
            tc.hosted_flags
        );
        assert!(!tc.cxx_flags.iter().any(|f| f.starts_with("-march=")));
        assert!(!tc.incore_flags.iter().any(|f| f.starts_with("-march=")));
        // `zig c++` refuses the psABI spelling and takes its own.
        let zig = crate::isa::host_march_flags()[1];
        let zig_only = isolated(&base, |_, flag| flag != march);
        let marches = |tc: &Toolchain| -> Vec<String> {
            tc.hosted_flags
                .iter()
                .filter(|f| f.starts_with("-march="))
                .cloned()
                .collect()
        };
        assert_eq!(marches(&zig_only), [zig]);
        let refused = isolated(&base, |_, flag| !flag.starts_with("-march="));
        assert!(marches(&refused).is_empty());
        let mut off = base.clone();
        off.hosted_isa = false;
        assert!(
            !isolated(&off, |_, _| true)
                .hosted_flags
                .iter()
                .any(|f| f.starts_with("-march="))
        );
        let mut chosen = base;
        chosen.hosted_flags.push("-march=x86-64".into());
        let tc = isolated(&chosen, |_, _| true);
        assert_eq!(
            tc.hosted_flags
                .iter()
                .filter(|f| f.starts_with("-march="))
                .count(),
            1
        );
    }
}
