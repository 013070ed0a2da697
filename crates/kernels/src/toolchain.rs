//! Per-platform toolchains, described as data.
//!
//! Both simulator platforms compile with the host C compiler; they differ
//! only in the defines that let a kernel know what it was built for. Keeping
//! the table as plain data (rather than logic spread over the compile code)
//! means the unit key can hash "the toolchain" by hashing these fields.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::unit::CoreType;

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

/// Platforms this crate knows how to build for.
pub const PLATFORMS: &[&str] = &["a2a3sim", "a5sim"];

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
    #[error("unknown platform `{name}` (known platforms: {})", PLATFORMS.join(", "))]
    UnknownPlatform { name: String },
    #[error("{role} `{}` not found (set {env} to override)", path.display())]
    ToolNotFound {
        role: &'static str,
        env: &'static str,
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
    pub platform: String,
    pub compiler: PathBuf,
    pub linker: PathBuf,
    /// Flags for every incore compile (kernels and builtins).
    pub incore_flags: Vec<String>,
    pub aic_flags: Vec<String>,
    pub aiv_flags: Vec<String>,
    /// Extra flags for the builtins object only.
    pub builtins_flags: Vec<String>,
    pub orch_flags: Vec<String>,
    /// Linker flags for incore images; `-T <script>`, `-o` and inputs are added.
    pub link_flags: Vec<String>,
    pub link_script: String,
    pub builtins_source: String,
    pub extraction: Extraction,
    /// Directories (`PATH` syntax) where bare tool names such as `cc` are
    /// found. The entry point passes its `PATH`; this crate reads no
    /// environment. `None`: only tools given by path can be found.
    pub search_path: Option<OsString>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Toolchain {
    /// The built-in table entry for `platform`.
    pub fn builtin(platform: &str) -> Result<Self, ToolchainError> {
        let platform_define = match platform {
            "a2a3sim" => "-DSCENE_PLATFORM_A2A3=1",
            "a5sim" => "-DSCENE_PLATFORM_A5=1",
            other => {
                return Err(ToolchainError::UnknownPlatform {
                    name: other.to_owned(),
                });
            }
        };
        let extraction = Extraction::host();
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

        Ok(Toolchain {
            platform: platform.to_owned(),
            compiler: PathBuf::from("cc"),
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
            link_flags,
            link_script: link_script.to_owned(),
            builtins_source,
            extraction,
            search_path: None,
        })
    }

    pub fn with_compiler(mut self, compiler: impl Into<PathBuf>) -> Self {
        self.compiler = compiler.into();
        self
    }

    pub fn with_linker(mut self, linker: impl Into<PathBuf>) -> Self {
        self.linker = linker.into();
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

    /// Flags specific to one core type.
    pub fn core_flags(&self, core: CoreType) -> &[String] {
        match core {
            CoreType::Aic => &self.aic_flags,
            CoreType::Aiv => &self.aiv_flags,
        }
    }

    /// Fails early, naming the path, if the compiler or linker cannot be found.
    pub fn check(&self) -> Result<(), ToolchainError> {
        if self.resolve(&self.compiler).is_none() {
            return Err(ToolchainError::ToolNotFound {
                role: "compiler",
                env: "SCENE_CC",
                path: self.compiler.clone(),
            });
        }
        if self.resolve(&self.linker).is_none() {
            return Err(ToolchainError::ToolNotFound {
                role: "linker",
                env: "SCENE_LD",
                path: self.linker.clone(),
            });
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
    fn bare_names_are_looked_up_on_path() {
        let path = Some(OsStr::new("/usr/bin:/bin"));
        assert!(resolve_program(Path::new("sh"), path).is_some());
        assert!(resolve_program(Path::new("no-such-program-scene-xyz"), path).is_none());
        assert!(resolve_program(Path::new("sh"), None).is_none());
        assert!(resolve_program(Path::new("/bin/sh"), None).is_some());
    }
}
