//! Shared helpers for the integration tests: a temp root with the device
//! headers, unit constructors, and a manual compile/link path for producing
//! deliberately bad ELF files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use scene_kernels::toolchain::{BUILTINS_SOURCE, KERNEL_LINK_SCRIPT};
use scene_kernels::{CallableSpec, CoreType, IncoreUnit, OrchUnit, Toolchain};

pub fn headers_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../device/include")
}

/// A temp dir used as the builder root, with the device headers copied into
/// `include/` so units can use a root-relative include dir.
pub struct Root {
    pub dir: tempfile::TempDir,
}

impl Root {
    pub fn new() -> Root {
        let dir = tempfile::tempdir().expect("tempdir");
        let include = dir.path().join("include");
        std::fs::create_dir_all(&include).expect("mkdir include");
        for entry in std::fs::read_dir(headers_dir()).expect("device headers") {
            let entry = entry.expect("dir entry");
            // The ABI headers; not `simpler/` (orchestrations on the
            // original's API, which these tests do not build).
            if entry.path().is_file() {
                std::fs::copy(entry.path(), include.join(entry.file_name())).expect("copy header");
            }
        }
        Root { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, contents).expect("write source");
        PathBuf::from(rel)
    }
}

pub fn toolchain() -> Toolchain {
    Toolchain::builtin("a2a3sim")
        .expect("a2a3sim toolchain")
        .with_search_path(std::env::var_os("PATH"))
}

pub fn incore(name: &str, func_id: u32, core: CoreType, source: &str) -> IncoreUnit {
    IncoreUnit {
        name: name.into(),
        func_id,
        core,
        kind: scene_kernels::IncoreKind::Image,
        source: source.into(),
        include_dirs: vec!["include".into()],
        defines: vec![],
        flags: vec![],
    }
}

pub fn orch(source: &str, function: &str) -> OrchUnit {
    OrchUnit {
        name: "orch".into(),
        source: source.into(),
        function: function.into(),
        include_dirs: vec!["include".into()],
        defines: vec![],
        flags: Vec::new(),
    }
}

pub fn spec(label: &str, orch: OrchUnit, incores: Vec<IncoreUnit>) -> CallableSpec {
    CallableSpec {
        label: label.into(),
        orchestration: orch,
        incores,
    }
}

pub const ORCH_SRC: &str = r#"
#include "scene_orch.h"
SCENE_ORCH_ENTRY(run_orch, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArg t[1] = { SCENE_INOUT(args[0]) };
    return scene_orch_submit(ctx, 0, 4, t, 1);
}
"#;

/// `x[i] = x[i] OP k` over the block's range.
pub fn kernel_src(op: &str) -> String {
    format!(
        r#"#include "scene_kernel.h"
SCENE_KERNEL_ENTRY(ka) {{
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) {{ x[i] = x[i] {op} 3.0f; }}
}}
"#
    )
}

pub fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().expect("spawn tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles and links a kernel by hand with the toolchain's flags, allowing a
/// different link script, extra compile flags and extra linker flags. Returns
/// the path of the linked ELF inside `dir`.
pub struct ManualLink<'a> {
    pub source: &'a str,
    pub script: &'a str,
    pub cflags: &'a [&'a str],
    pub ldflags: &'a [&'a str],
}

impl Default for ManualLink<'_> {
    fn default() -> Self {
        ManualLink {
            source: "",
            script: KERNEL_LINK_SCRIPT,
            cflags: &[],
            ldflags: &[],
        }
    }
}

impl ManualLink<'_> {
    pub fn try_link(&self, dir: &Path) -> Result<PathBuf, String> {
        let tc = toolchain();
        std::fs::write(dir.join("k.c"), self.source).expect("write k.c");
        std::fs::write(dir.join("builtins.c"), BUILTINS_SOURCE).expect("write builtins");
        std::fs::write(dir.join("test.ld"), self.script).expect("write script");
        run(Command::new(&tc.compiler)
            .current_dir(dir)
            .args(&tc.incore_flags)
            .args(tc.core_flags(CoreType::Aiv))
            .args(self.cflags)
            .arg("-I")
            .arg(headers_dir())
            .args(["-c", "k.c", "-o", "k.o"]));
        run(Command::new(&tc.compiler)
            .current_dir(dir)
            .args(&tc.incore_flags)
            .args(&tc.builtins_flags)
            .args(["-c", "builtins.c", "-o", "builtins.o"]));
        let out = Command::new(&tc.linker)
            .current_dir(dir)
            .args(&tc.link_flags)
            .args(["-T", "test.ld"])
            .args(self.ldflags)
            .args(["-o", "k.elf", "k.o", "builtins.o"])
            .output()
            .expect("spawn ld");
        if out.status.success() {
            Ok(dir.join("k.elf"))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    pub fn link(&self, dir: &Path) -> PathBuf {
        self.try_link(dir)
            .unwrap_or_else(|e| panic!("link failed:\n{e}"))
    }
}

/// A tool by name on `PATH`, else a Debian-versioned `name-NN` on `PATH`,
/// else `/usr/lib/llvm-*/bin/name` (where Debian's lld puts `ld64.lld`).
pub fn find_llvm_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        return Some(found);
    }
    let prefix = format!("{name}-");
    let mut versioned: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        for entry in entries.flatten() {
            let is_llvm = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("llvm-"));
            let candidate = entry.path().join("bin").join(name);
            if is_llvm && candidate.is_file() {
                versioned.push(candidate);
            }
        }
    }
    versioned.sort();
    versioned.pop()
}

/// clang, ld64.lld and llvm-objcopy for building and checking Mach-O kernels.
pub struct MachOTools {
    pub clang: PathBuf,
    pub ld64: PathBuf,
    pub objcopy: PathBuf,
    pub nm: PathBuf,
}

impl MachOTools {
    /// `Err` names what is missing.
    pub fn find() -> Result<MachOTools, String> {
        let mut missing = Vec::new();
        let mut get = |name: &str| {
            let found = find_llvm_tool(name);
            if found.is_none() {
                missing.push(name.to_owned());
            }
            found.unwrap_or_default()
        };
        let tools = MachOTools {
            clang: get("clang"),
            ld64: get("ld64.lld"),
            objcopy: get("llvm-objcopy"),
            nm: get("llvm-nm"),
        };
        if missing.is_empty() {
            Ok(tools)
        } else {
            Err(format!("{} not installed", missing.join(", ")))
        }
    }
}

/// Includes the kernel header; `MACHO_ENTRY` defines the entry without a
/// section attribute (the header's `SCENE_KERNEL_ENTRY` names
/// `__TEXT,__text` on Mach-O; `good_kernels_written_with_scene_kernel_entry_extract`
/// in `tests/macho.rs` uses that).
pub const MACHO_ENTRY_PRELUDE: &str = "#include \"scene_kernel.h\"\n\
#define MACHO_ENTRY(ka) __attribute__((used, visibility(\"default\"))) \
void kernel_entry(const SceneKernelArgs *ka)\n";

/// Compiles and links a kernel for a Mach-O target with clang and ld64.lld,
/// using the toolchain's incore flags (minus the ELF-only ones) and
/// [`scene_kernels::toolchain::macho_link_flags`] unless `link_flags` is set.
pub struct MachOLink<'a> {
    pub arch: &'a str,
    /// Appended to [`MACHO_ENTRY_PRELUDE`].
    pub source: &'a str,
    pub order_file: &'a str,
    pub cflags: &'a [&'a str],
    pub link_flags: Option<Vec<String>>,
    pub extra_ldflags: &'a [&'a str],
}

impl<'a> MachOLink<'a> {
    pub fn new(arch: &'a str, source: &'a str) -> Self {
        MachOLink {
            arch,
            source,
            order_file: scene_kernels::toolchain::MACHO_ORDER_FILE,
            cflags: &[],
            link_flags: None,
            extra_ldflags: &[],
        }
    }

    fn compile(&self, tools: &MachOTools, dir: &Path, src: &str, obj: &str, extra: &[String]) {
        let tc = toolchain();
        let elf_only = ["-fcf-protection=none", "-fno-plt"];
        run(Command::new(&tools.clang)
            .current_dir(dir)
            .arg("-target")
            .arg(format!("{}-apple-macos11", self.arch))
            .args(
                tc.incore_flags
                    .iter()
                    .filter(|f| !elf_only.contains(&f.as_str())),
            )
            .args(extra)
            .args(self.cflags)
            .arg("-I")
            .arg(headers_dir())
            .args(["-c", src, "-o", obj]));
    }

    /// Compiles `k.c` to `k.o` and `builtins.c` to `builtins.o` in `dir`.
    pub fn compile_all(&self, tools: &MachOTools, dir: &Path) {
        let tc = toolchain();
        std::fs::write(
            dir.join("k.c"),
            format!("{MACHO_ENTRY_PRELUDE}{}", self.source),
        )
        .expect("write k.c");
        std::fs::write(
            dir.join("builtins.c"),
            scene_kernels::toolchain::macho_builtins_source(),
        )
        .expect("write builtins");
        self.compile(tools, dir, "k.c", "k.o", tc.core_flags(CoreType::Aiv));
        self.compile(tools, dir, "builtins.c", "builtins.o", &[]);
    }

    pub fn try_link(&self, tools: &MachOTools, dir: &Path) -> Result<PathBuf, String> {
        self.compile_all(tools, dir);
        std::fs::write(dir.join("kernel.ld"), self.order_file).expect("write order file");
        let flags = self
            .link_flags
            .clone()
            .unwrap_or_else(|| scene_kernels::toolchain::macho_link_flags(self.arch));
        let out = Command::new(&tools.ld64)
            .current_dir(dir)
            .args(&flags)
            .args(self.extra_ldflags)
            .args(["-o", "k.macho", "k.o", "builtins.o"])
            .output()
            .expect("spawn ld64.lld");
        if out.status.success() {
            Ok(dir.join("k.macho"))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    pub fn link(&self, tools: &MachOTools, dir: &Path) -> PathBuf {
        self.try_link(tools, dir)
            .unwrap_or_else(|e| panic!("ld64.lld failed:\n{e}"))
    }
}
