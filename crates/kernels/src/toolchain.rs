//! Per-platform toolchains, described as data.
//!
//! Both simulator platforms compile with the host C compiler; they differ
//! only in the defines that let a kernel know what it was built for. Keeping
//! the table as plain data (rather than logic spread over the compile code)
//! means the unit key can hash "the toolchain" by hashing these fields.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::unit::{CoreType, Language};

/// Link script written into the work dir and passed to the linker with `-T`.
pub const KERNEL_LINK_SCRIPT: &str = include_str!("c/kernel.ld");

/// Freestanding helpers (memcpy, f16 conversions, ...) linked into every image.
pub const BUILTINS_SOURCE: &str = include_str!("c/builtins.c");

/// What the Mach-O toolchain writes where the ELF one writes its link script:
/// an ld64 order file, so `_kernel_entry` is laid out first in `__text`.
pub const MACHO_ORDER_FILE: &str = "_kernel_entry\n";

/// Read-only data sections clang emits for Mach-O, folded into `__text` so
/// the image carries the constants its PC-relative loads refer to (ld64's
/// stand-in for the ELF script's `*(.rodata*)` line).
const MACHO_FOLDED_SECTIONS: &[&str] = &[
    "__const",
    "__cstring",
    "__literal4",
    "__literal8",
    "__literal16",
];

/// Linker flags for a Mach-O incore image on `arch` (`x86_64` or `arm64`).
///
/// Checked against ld64.lld (tests/macho.rs). `-static` keeps Apple's ld64
/// from requiring libSystem for a main executable; ld64.lld only warns that
/// it is not implemented. The order file is `kernel.ld` relative to the
/// link's working directory, which is where the builder and the rendered
/// commands write the toolchain's link script.
pub fn macho_link_flags(arch: &str) -> Vec<String> {
    let mut flags = strings(&[
        "-arch",
        arch,
        "-platform_version",
        "macos",
        "11.0",
        "11.0",
        "-static",
        "-e",
        "_kernel_entry",
        "-dead_strip",
        "-order_file",
        "kernel.ld",
    ]);
    for section in MACHO_FOLDED_SECTIONS {
        flags.extend(strings(&[
            "-rename_section",
            "__TEXT",
            section,
            "__TEXT",
            "__text",
        ]));
    }
    flags
}

/// The host's architecture name as ld64 spells it.
fn macho_host_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "x86_64"
    }
}

/// Darwin's zeroing entry points, which clang calls for Mach-O targets where
/// it calls memset elsewhere (`bzero` on arm64, `__bzero` on x86_64).
pub const MACHO_EXTRA_BUILTINS: &str = "\n/* Darwin: clang zeroes through bzero (arm64) and __bzero (x86_64). */\n\
SCENE_BUILTIN void bzero(void *dst, size_t n) { memset(dst, 0, n); }\n\
SCENE_BUILTIN void __bzero(void *dst, size_t n) { memset(dst, 0, n); }\n";

/// The builtins source for Mach-O images: [`BUILTINS_SOURCE`] plus
/// [`MACHO_EXTRA_BUILTINS`].
pub fn macho_builtins_source() -> String {
    format!("{BUILTINS_SOURCE}{MACHO_EXTRA_BUILTINS}")
}

/// The platforms this crate has a built-in toolchain for: the names
/// `scene.toml` lists in `platforms`, and what every other platform entry
/// (a table row in the harness) runs the scenes of. One list, one type: the
/// scene validator, the toolchain table and the harness table all parse
/// names through [`BuiltinPlatform::from_str`](std::str::FromStr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BuiltinPlatform {
    A2a3Sim,
    A5Sim,
}

impl BuiltinPlatform {
    /// Every built-in platform, in the order help texts list them.
    pub const ALL: [BuiltinPlatform; 2] = [BuiltinPlatform::A2a3Sim, BuiltinPlatform::A5Sim];

    pub fn as_str(self) -> &'static str {
        match self {
            BuiltinPlatform::A2a3Sim => "a2a3sim",
            BuiltinPlatform::A5Sim => "a5sim",
        }
    }

    /// `a2a3sim, a5sim`: for "known platforms" messages.
    pub fn known() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }

    /// The define that tells a kernel which platform it was built for.
    fn define(self) -> &'static str {
        match self {
            BuiltinPlatform::A2a3Sim => "-DSCENE_PLATFORM_A2A3=1",
            BuiltinPlatform::A5Sim => "-DSCENE_PLATFORM_A5=1",
        }
    }
}

impl fmt::Display for BuiltinPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BuiltinPlatform {
    type Err = ToolchainError;

    fn from_str(name: &str) -> Result<Self, ToolchainError> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| ToolchainError::UnknownPlatform {
                name: name.to_owned(),
            })
    }
}

/// How the incore image is taken out of the linked file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extraction {
    /// ELF `.text` (Linux hosts).
    Elf,
    /// Mach-O `__TEXT,__text` (macOS hosts).
    MachO,
}

impl Extraction {
    /// The object format the host linker produces.
    pub fn host() -> Self {
        if cfg!(target_os = "macos") {
            Extraction::MachO
        } else {
            Extraction::Elf
        }
    }
}

/// An extraction name that is neither `elf` nor `macho`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown extraction `{name}` (one of: elf, macho)")]
pub struct UnknownExtraction {
    pub name: String,
}

impl std::str::FromStr for Extraction {
    type Err = UnknownExtraction;

    /// `elf`, `macho` (or `mach-o`, as [`Display`](fmt::Display) writes it).
    fn from_str(s: &str) -> Result<Self, UnknownExtraction> {
        match s {
            "elf" => Ok(Extraction::Elf),
            "macho" | "mach-o" => Ok(Extraction::MachO),
            other => Err(UnknownExtraction {
                name: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Extraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Extraction::Elf => "elf",
            Extraction::MachO => "mach-o",
        })
    }
}

/// Errors choosing or checking a toolchain.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error(
        "unknown platform `{name}` (known platforms: {})",
        BuiltinPlatform::known()
    )]
    UnknownPlatform { name: String },
    /// One line naming the platform entry and the tool, so a table entry
    /// whose toolchain is not installed says which one before anything runs.
    #[error("platform `{platform}`: {role} `{}` not found", path.display())]
    ToolNotFound {
        platform: String,
        role: &'static str,
        path: PathBuf,
    },
}

/// Everything needed to turn sources into images for one platform.
///
/// Fields are public so callers (and tests) can swap the compiler or add
/// flags; anything changed here changes the unit key, so stale artifacts are
/// never reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// The platform entry this toolchain belongs to (`a2a3sim`, or a table
    /// entry's name such as `a2a3sim-clang`).
    pub platform: String,
    /// C compiler for incores, builtins and the orchestration.
    pub compiler: PathBuf,
    /// C++ compiler for `.cpp` / `.cc` / `.cxx` sources (incores and the
    /// orchestration); in the key of those units only. Not part of
    /// [`Toolchain::check`]: a C-only run needs no C++ compiler, and a
    /// missing one fails the first C++ unit naming it.
    pub cxx: PathBuf,
    pub linker: PathBuf,
    /// Flags for every incore compile (kernels and builtins).
    pub incore_flags: Vec<String>,
    pub aic_flags: Vec<String>,
    pub aiv_flags: Vec<String>,
    /// Extra flags for the builtins object only.
    pub builtins_flags: Vec<String>,
    pub orch_flags: Vec<String>,
    /// Extra flags for every C++ compile (incore and orchestration), after
    /// the incore or orchestration flags: the language features a kernel
    /// image cannot carry (exceptions, RTTI, guarded local statics).
    pub cxx_flags: Vec<String>,
    /// C++ compiler for hosted incores ([`crate::IncoreKind::Hosted`]):
    /// C++20 with a hosted standard library, linking shared objects
    /// against its own C++ runtime (`c++`, `g++-13`, `clang++-16`, `zig
    /// c++` through a wrapper script...). Checked when first used
    /// (`probe_hosted`).
    pub hosted_cxx: PathBuf,
    /// Flags of every hosted incore compile (`-shared -fPIC -std=c++20
    /// -D__CPU_SIM ...`); `-isystem` for each include root, the unit's
    /// defines and include dirs, `-o` are added.
    pub hosted_flags: Vec<String>,
    /// System include directories of hosted incores (a PTO-ISA checkout's
    /// `include`, ...), absolute; every header a compile reads from them is
    /// in the unit's recorded dependencies like any other.
    pub include_roots: Vec<PathBuf>,
    /// Hosted incores whose opening directives include a header from an
    /// include root compile from a precompiled preamble (built once per
    /// preamble text and flags, cached like a unit; see `preamble.rs`).
    /// `false`: every hosted compile parses its headers itself.
    pub hosted_pch: bool,
    /// Hosted kernels are compiled for this machine's vector ISA
    /// (`-march=x86-64-v3` ..., [`crate::host_march_flag`]) when the hosted
    /// compiler accepts it and `hosted_flags` choose none; in their keys.
    /// `false`: the compiler's default (a cache for older machines).
    pub hosted_isa: bool,
    /// The directory of our `<stdfloat>` when the hosted compiler has
    /// `__bf16` but no `std::bfloat16_t` (`crate::bf16`): every hosted
    /// compile then gets `-isystem <it> -D__STDCPP_BFLOAT16_T__=1`, and the
    /// keys the shim's digest. Decided by the builder's probe; `None` in a
    /// toolchain as configured.
    pub hosted_bf16_shim: Option<PathBuf>,
    /// Hosted kernels over a PTO-ISA whose CPU matmul we have reviewed
    /// compile with our bit-identical fast path for it first on the
    /// include path (`crate::pto_fast`). `false`: PTO-ISA's own code only.
    pub hosted_fast_paths: bool,
    /// The fast paths' overlay directory when `hosted_fast_paths` holds
    /// and the include roots qualify (`crate::pto_fast::applies`): every
    /// hosted compile then gets `-isystem <it>` before the roots, and the
    /// keys the overlay's digest. Decided by the builder; `None` in a
    /// toolchain as configured.
    pub hosted_pto_overlay: Option<PathBuf>,
    /// Linker flags for incore images; `-T <script>`, `-o` and inputs are added.
    pub link_flags: Vec<String>,
    pub link_script: String,
    pub builtins_source: String,
    pub extraction: Extraction,
    /// The compilers write make-style dependency files with `-MD -MF
    /// <file>` (gcc, clang and compilers built on them): what a cache entry
    /// records and a hit re-checks. `false`: entries rest on the key's
    /// include scanner alone, and `--explain` says so.
    pub dep_file: bool,
    /// Directories (`PATH` syntax) where bare tool names such as `cc` are
    /// found. The entry point passes its `PATH`; this crate reads no
    /// environment. `None`: only tools given by path can be found.
    pub search_path: Option<OsString>,
}

/// The built-in [`Toolchain::cxx_flags`].
pub const CXX_FLAGS: [&str; 3] = ["-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics"];

/// The built-in hosted flags: a shared object of hosted C++20, with
/// PTO-ISA's CPU backend selected (`__CPU_SIM`).
fn hosted_flags(platform_define: &str, extraction: Extraction) -> Vec<String> {
    let mut flags = strings(&["-shared", "-fPIC", "-O2", "-std=c++20", "-D__CPU_SIM"]);
    if extraction == Extraction::Elf {
        flags.push("-Wl,--build-id=sha1".to_owned());
    }
    flags.push(platform_define.to_owned());
    flags
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Toolchain {
    /// The built-in table entry for `platform`, for the host's object
    /// format.
    pub fn builtin(platform: &str) -> Result<Self, ToolchainError> {
        let platform: BuiltinPlatform = platform.parse()?;
        Ok(Self::builtin_for(platform, Extraction::host()))
    }

    /// The built-in toolchain of `platform` producing `extraction` images:
    /// the flags, link script and builtins that depend on the object format
    /// follow it, so a platform entry that only switches the format gets a
    /// consistent toolchain.
    pub fn builtin_for(platform: BuiltinPlatform, extraction: Extraction) -> Self {
        let platform_define = platform.define();
        let mut incore_flags = strings(&[
            "-O2",
            "-ffreestanding",
            "-fno-builtin",
            "-nostdlib",
            "-fPIE",
            "-fvisibility=hidden",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
            "-fno-jump-tables",
            "-fno-math-errno",
            "-ffunction-sections",
            "-fdata-sections",
            "-fno-common",
        ]);
        // Apple clang rejects these; on Linux they keep endbr64 and PLT stubs
        // out of images that have no dynamic linker behind them.
        if extraction == Extraction::Elf {
            incore_flags.extend(strings(&["-fcf-protection=none", "-fno-plt"]));
        }
        incore_flags.push(platform_define.to_owned());

        let link_flags = match extraction {
            Extraction::Elf => strings(&[
                "-pie",
                "--no-dynamic-linker",
                "-e",
                "kernel_entry",
                "--gc-sections",
                "-z",
                "noexecstack",
                "-z",
                "norelro",
                "--no-warn-rwx-segments",
            ]),
            Extraction::MachO => macho_link_flags(macho_host_arch()),
        };
        // clang (the macOS `cc`) rejects gcc's loop-pattern flag; its
        // `-fno-builtin` already keeps memcpy/memset loops from becoming calls.
        let builtins_flags = match extraction {
            Extraction::Elf => strings(&["-fno-tree-loop-distribute-patterns"]),
            Extraction::MachO => Vec::new(),
        };
        let builtins_source = match extraction {
            Extraction::Elf => BUILTINS_SOURCE.to_owned(),
            Extraction::MachO => macho_builtins_source(),
        };
        let link_script = match extraction {
            Extraction::Elf => KERNEL_LINK_SCRIPT,
            Extraction::MachO => MACHO_ORDER_FILE,
        };

        Toolchain {
            platform: platform.as_str().to_owned(),
            compiler: PathBuf::from("cc"),
            cxx: PathBuf::from("c++"),
            linker: PathBuf::from("ld"),
            incore_flags,
            aic_flags: strings(&["-DSCENE_CORE_AIC=1"]),
            aiv_flags: strings(&["-DSCENE_CORE_AIV=1"]),
            builtins_flags,
            orch_flags: vec![
                "-shared".to_owned(),
                "-fPIC".to_owned(),
                "-O2".to_owned(),
                "-Wl,--build-id=sha1".to_owned(),
                platform_define.to_owned(),
            ],
            cxx_flags: strings(&CXX_FLAGS),
            hosted_cxx: PathBuf::from("c++"),
            hosted_flags: hosted_flags(platform_define, extraction),
            include_roots: Vec::new(),
            hosted_pch: true,
            hosted_isa: true,
            hosted_bf16_shim: None,
            hosted_fast_paths: true,
            hosted_pto_overlay: None,
            link_flags,
            link_script: link_script.to_owned(),
            builtins_source,
            extraction,
            dep_file: true,
            search_path: None,
        }
    }

    pub fn with_compiler(mut self, compiler: impl Into<PathBuf>) -> Self {
        self.compiler = compiler.into();
        self
    }

    pub fn with_linker(mut self, linker: impl Into<PathBuf>) -> Self {
        self.linker = linker.into();
        self
    }

    pub fn with_cxx(mut self, cxx: impl Into<PathBuf>) -> Self {
        self.cxx = cxx.into();
        self
    }

    /// Where bare tool names are looked up (a `PATH` value).
    pub fn with_search_path(mut self, search_path: Option<OsString>) -> Self {
        self.search_path = search_path;
        self
    }

    /// Where `program` (one of this toolchain's tools) would be run from.
    pub fn resolve(&self, program: &Path) -> Option<PathBuf> {
        resolve_program(program, self.search_path.as_deref())
    }

    /// The compiler for a source of `language`.
    pub fn compiler_for(&self, language: Language) -> &PathBuf {
        match language {
            Language::C => &self.compiler,
            Language::Cxx => &self.cxx,
        }
    }

    /// Flags specific to one core type.
    pub fn core_flags(&self, core: CoreType) -> &[String] {
        match core {
            CoreType::Aic => &self.aic_flags,
            CoreType::Aiv => &self.aiv_flags,
        }
    }

    /// Fails early, naming the platform and the tool, if the compiler or
    /// the linker cannot be found (bare names on [`Toolchain::search_path`]).
    pub fn check(&self) -> Result<(), ToolchainError> {
        for (role, tool) in [("compiler", &self.compiler), ("linker", &self.linker)] {
            if self.resolve(tool).is_none() {
                return Err(ToolchainError::ToolNotFound {
                    platform: self.platform.clone(),
                    role,
                    path: tool.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Where `program` would be found by `Command::new` with `search_path` as
/// its `PATH`, if anywhere.
pub(crate) fn resolve_program(program: &Path, search_path: Option<&OsStr>) -> Option<PathBuf> {
    if program.components().count() > 1 || program.is_absolute() {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::split_paths(search_path?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_platforms_differ_only_in_defines() {
        let a = Toolchain::builtin("a2a3sim").expect("a2a3sim");
        let b = Toolchain::builtin("a5sim").expect("a5sim");
        assert!(
            a.incore_flags
                .iter()
                .any(|f| f == "-DSCENE_PLATFORM_A2A3=1")
        );
        assert!(b.incore_flags.iter().any(|f| f == "-DSCENE_PLATFORM_A5=1"));
        assert_eq!(a.aic_flags, b.aic_flags);
        assert_eq!(a.core_flags(CoreType::Aiv), ["-DSCENE_CORE_AIV=1"]);
        assert_ne!(a.incore_flags, b.incore_flags);
    }

    #[test]
    fn unknown_platform_lists_known_ones() {
        let err = Toolchain::builtin("a9").expect_err("unknown");
        let msg = err.to_string();
        assert!(msg.contains("`a9`"), "{msg}");
        assert!(msg.contains("a2a3sim") && msg.contains("a5sim"), "{msg}");
    }

    #[test]
    fn missing_compiler_is_named() {
        let tc = Toolchain::builtin("a5sim")
            .expect("a5sim")
            .with_compiler("/definitely/not/here/cc");
        let msg = tc.check().expect_err("missing").to_string();
        assert!(msg.contains("/definitely/not/here/cc"), "{msg}");
        assert!(msg.contains("compiler"), "{msg}");
    }

    #[test]
    fn missing_tool_is_one_line_naming_platform_and_tool() {
        let mut tc = Toolchain::builtin("a2a3sim")
            .expect("a2a3sim")
            .with_compiler("/bin/sh")
            .with_linker("no-such-linker-scene-xyz")
            .with_search_path(Some("/usr/bin:/bin".into()));
        tc.platform = "a2a3sim-clang".to_owned();
        let msg = tc.check().expect_err("missing").to_string();
        assert_eq!(
            msg,
            "platform `a2a3sim-clang`: linker `no-such-linker-scene-xyz` not found"
        );
        // Bare names are found on the search path given, not the process's.
        let found = tc.clone().with_linker("sh").check();
        assert!(found.is_ok(), "{found:?}");
        let none = tc.with_linker("sh").with_search_path(None).check();
        assert!(none.is_err());
    }

    #[test]
    fn cxx_defaults_to_cpp_and_is_not_checked_up_front() {
        let tc = Toolchain::builtin("a2a3sim").expect("a2a3sim");
        assert_eq!(tc.cxx, PathBuf::from("c++"));
        assert!(tc.cxx_flags.iter().any(|f| f == "-fno-exceptions"));
        assert!(tc.cxx_flags.iter().any(|f| f == "-fno-rtti"));
        // Only C++ units use it, so a C-only run does not need one.
        let tc = tc
            .with_compiler("/bin/sh")
            .with_linker("/bin/sh")
            .with_cxx("/definitely/not/here/c++");
        assert!(tc.check().is_ok());
    }

    #[test]
    fn builtin_platform_names_round_trip() {
        for p in BuiltinPlatform::ALL {
            assert_eq!(p.to_string().parse::<BuiltinPlatform>().expect("parses"), p);
        }
        assert_eq!(BuiltinPlatform::known(), "a2a3sim, a5sim");
        let e = "a9"
            .parse::<BuiltinPlatform>()
            .expect_err("unknown")
            .to_string();
        assert!(e.contains("`a9`") && e.contains("a2a3sim, a5sim"), "{e}");
    }

    #[test]
    fn extraction_mode_is_data() {
        assert_eq!("elf".parse::<Extraction>(), Ok(Extraction::Elf));
        assert_eq!("macho".parse::<Extraction>(), Ok(Extraction::MachO));
        assert_eq!("mach-o".parse::<Extraction>(), Ok(Extraction::MachO));
        assert!("coff".parse::<Extraction>().is_err());
        // The format-dependent parts follow the mode, whatever the host.
        let elf = Toolchain::builtin_for(BuiltinPlatform::A2a3Sim, Extraction::Elf);
        let macho = Toolchain::builtin_for(BuiltinPlatform::A2a3Sim, Extraction::MachO);
        assert_eq!(elf.link_script, KERNEL_LINK_SCRIPT);
        assert_eq!(macho.link_script, MACHO_ORDER_FILE);
        assert!(elf.link_flags.iter().any(|f| f == "kernel_entry"));
        assert!(macho.link_flags.iter().any(|f| f == "_kernel_entry"));
        assert!(macho.builtins_source.contains("__bzero"));
        assert!(!macho.incore_flags.iter().any(|f| f == "-fno-plt"));
        assert_eq!(elf.extraction, Extraction::Elf);
        assert_eq!(macho.extraction, Extraction::MachO);
    }

    #[test]
    fn bare_names_are_looked_up_on_path() {
        let path = Some(OsStr::new("/usr/bin:/bin"));
        assert!(resolve_program(Path::new("sh"), path).is_some());
        assert!(resolve_program(Path::new("no-such-program-scene-xyz"), path).is_none());
        assert!(resolve_program(Path::new("sh"), None).is_none());
        assert!(resolve_program(Path::new("/bin/sh"), None).is_some());
    }
}
