//! The original project's toolchain, by name (issue 39): a checkout of
//! `hw-native-sys/simpler` given as `--simpler-root` / `SCENE_SIMPLER_ROOT`
//! makes the original's kernels compile here as its own simulator build
//! compiles them, with nobody typing its include roots into a platform
//! file.
//!
//! What its sim build gives a kernel (its `simpler_setup/kernel_compiler.py`
//! and `toolchain.py`, `Gxx15Toolchain` and `get_incore_include_dirs` /
//! `get_orchestration_include_dirs`, at 6ebaf7715) and what we give:
//!
//! - include dirs, in its order: `simpler_setup/incore`,
//!   `src/common/platform/include`, then the runtime's
//!   `src/<arch>/runtime/<runtime>/runtime` and `.../common`,
//!   `src/common/task_interface`, `src/common`, `src/<arch>/platform/include`
//!   (its list names `src/common/platform/include` twice; once here). The
//!   PTO-ISA root stays an include root of ours (`-isystem`, where it
//!   gets a precompiled preamble); the original puts it first with `-I`.
//! - defines: `__DAV_VEC__` (vector) or `__DAV_CUBE__` (cube), which `ccec`
//!   defines and its g++ build adds, `PTO_CPU_MAX_THREADS=1`, `NDEBUG`;
//!   `__CPU_SIM` is in every hosted compile of ours already.
//! - flags: its `-std=c++23` as `-std=c++2b` (the same standard, spelled so
//!   g++ >= 11, clang >= 13 and `zig c++` all accept it), `-fpermissive`,
//!   `-Wno-macro-redefined`, `-Wno-ignored-attributes`. Ours keep `-O2`
//!   (its too) and add `-fno-gnu-unique` where the compiler has it.
//!
//! These go to the hosted incores of the `chip_tensor` convention (the
//! original's) only, so a run with a checkout named leaves every other
//! unit and its cache key as they were.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use scene_kernels::{BuiltinPlatform, CoreType};

/// The original's device shape on its simulator of `platform` (AIC and
/// AIV cores: `PLATFORM_MAX_BLOCKDIM` clusters of one AIC and two AIV, its
/// `platform_config.h` at 6ebaf7715): what its tests expect of
/// `rt_available_cluster_count()`.
pub fn sim_cores(platform: BuiltinPlatform) -> (u32, u32) {
    match platform {
        BuiltinPlatform::A2a3Sim => (24, 48),
        BuiltinPlatform::A5Sim => (36, 72),
    }
}

/// The runtime variant a scene is written for (`runtime = "..."` in
/// `scene.toml`, the original's `@scene_test(runtime=...)`): it picks the
/// runtime's header directories in the original's tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SimplerRuntime {
    #[default]
    TensormapAndRingbuffer,
    HostBuildGraph,
}

impl SimplerRuntime {
    pub const ALL: [SimplerRuntime; 2] = [
        SimplerRuntime::TensormapAndRingbuffer,
        SimplerRuntime::HostBuildGraph,
    ];

    /// The name, as the original's tree and tests spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SimplerRuntime::TensormapAndRingbuffer => "tensormap_and_ringbuffer",
            SimplerRuntime::HostBuildGraph => "host_build_graph",
        }
    }
}

impl std::fmt::Display for SimplerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown runtime name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown runtime `{0}` (expected `tensormap_and_ringbuffer` or `host_build_graph`)")]
pub struct UnknownRuntime(pub String);

impl FromStr for SimplerRuntime {
    type Err = UnknownRuntime;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SimplerRuntime::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRuntime(s.to_owned()))
    }
}

/// Why a directory is not a checkout of the original.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not a checkout of hw-native-sys/simpler: {why}", dir.display())]
pub struct NotASimplerCheckout {
    pub dir: PathBuf,
    pub why: String,
}

/// What a checkout must hold for its kernels' headers to resolve.
const REQUIRED: [&str; 3] = [
    "src/common/task_interface/tensor.h",
    "src/common/platform/include",
    "simpler_setup/incore",
];

/// A checked checkout of the original (absolute).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimplerRoot {
    dir: PathBuf,
}

impl SimplerRoot {
    /// `dir`, made absolute, if it holds what the original's kernels
    /// include.
    pub fn new(dir: &Path) -> Result<SimplerRoot, NotASimplerCheckout> {
        let not = |why: String| NotASimplerCheckout {
            dir: dir.to_path_buf(),
            why,
        };
        let dir = std::path::absolute(dir).map_err(|e| not(e.to_string()))?;
        if !dir.is_dir() {
            return Err(not("no such directory".to_owned()));
        }
        if let Some(missing) = REQUIRED.iter().find(|p| !dir.join(p).exists()) {
            return Err(not(format!("it has no {missing}")));
        }
        Ok(SimplerRoot { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The PTO-ISA checkout the original manages for itself
    /// (`build/pto-isa`, cloned at its `pto_isa.pin` by its install), if
    /// there is one: the include root when none is named.
    pub fn managed_pto_isa(&self) -> Option<PathBuf> {
        let pto = self.dir.join("build").join("pto-isa");
        pto.join("include").join("pto").is_dir().then_some(pto)
    }

    /// The include dirs the original's sim build gives a kernel of
    /// `runtime` on `platform`, in its order (see the module docs).
    pub fn incore_include_dirs(
        &self,
        platform: BuiltinPlatform,
        runtime: SimplerRuntime,
    ) -> Vec<PathBuf> {
        let arch = arch(platform);
        let d = &self.dir;
        let rt = d
            .join("src")
            .join(arch)
            .join("runtime")
            .join(runtime.as_str());
        vec![
            d.join("simpler_setup/incore"),
            d.join("src/common/platform/include"),
            rt.join("runtime"),
            rt.join("common"),
            d.join("src/common/task_interface"),
            d.join("src/common"),
            d.join("src").join(arch).join("platform/include"),
        ]
    }
}

/// The original's architecture directory of a platform.
fn arch(platform: BuiltinPlatform) -> &'static str {
    match platform {
        BuiltinPlatform::A2a3Sim => "a2a3",
        BuiltinPlatform::A5Sim => "a5",
    }
}

/// The defines the original's sim build gives a kernel of `core`.
pub fn incore_defines(core: CoreType) -> Vec<(String, String)> {
    let dav = match core {
        CoreType::Aic => "__DAV_CUBE__",
        CoreType::Aiv => "__DAV_VEC__",
    };
    vec![
        (dav.to_owned(), String::new()),
        ("PTO_CPU_MAX_THREADS".to_owned(), "1".to_owned()),
        ("NDEBUG".to_owned(), String::new()),
    ]
}

/// The language flags the original's sim build gives a kernel.
pub const INCORE_FLAGS: [&str; 4] = [
    "-std=c++2b",
    "-fpermissive",
    "-Wno-macro-redefined",
    "-Wno-ignored-attributes",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for p in REQUIRED {
            let p = dir.path().join(p);
            if p.extension().is_some() {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "").unwrap();
            } else {
                std::fs::create_dir_all(p).unwrap();
            }
        }
        dir
    }

    #[test]
    fn a_checkout_gives_the_runtime_and_arch_dirs_in_the_originals_order() {
        let dir = checkout();
        let root = SimplerRoot::new(dir.path()).unwrap();
        let dirs = root.incore_include_dirs(BuiltinPlatform::A5Sim, SimplerRuntime::HostBuildGraph);
        let rel: Vec<_> = dirs
            .iter()
            .map(|d| {
                d.strip_prefix(dir.path())
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            rel,
            [
                "simpler_setup/incore",
                "src/common/platform/include",
                "src/a5/runtime/host_build_graph/runtime",
                "src/a5/runtime/host_build_graph/common",
                "src/common/task_interface",
                "src/common",
                "src/a5/platform/include",
            ]
        );
        assert_eq!(root.managed_pto_isa(), None);
        std::fs::create_dir_all(dir.path().join("build/pto-isa/include/pto")).unwrap();
        assert_eq!(
            root.managed_pto_isa(),
            Some(dir.path().join("build/pto-isa"))
        );
    }

    #[test]
    fn what_is_not_a_checkout_is_named_with_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let e = SimplerRoot::new(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("src/common/task_interface/tensor.h"),
            "{e}"
        );
        let e = SimplerRoot::new(&dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().ends_with("no such directory"), "{e}");
    }

    #[test]
    fn runtimes_parse_by_the_originals_names() {
        for r in SimplerRuntime::ALL {
            assert_eq!(r.as_str().parse::<SimplerRuntime>(), Ok(r));
        }
        assert!("ringbuffer".parse::<SimplerRuntime>().is_err());
        assert_eq!(
            incore_defines(CoreType::Aic)[0],
            ("__DAV_CUBE__".to_owned(), String::new())
        );
    }
}
