//! Shared helpers for the integration tests: a temp root with the device
//! headers, unit constructors, and a manual compile/link path for producing
//! deliberately bad ELF files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use scene_kernels::toolchain::{BUILTINS_SOURCE, KERNEL_LINK_SCRIPT};
use scene_kernels::{CallableSpec, CoreType, IncoreUnit, OrchUnit, Toolchain};

pub fn headers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../device/include")
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
            std::fs::copy(entry.path(), include.join(entry.file_name())).expect("copy header");
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
        source: source.into(),
        include_dirs: vec!["include".into()],
        defines: vec![],
    }
}

pub fn orch(source: &str, function: &str) -> OrchUnit {
    OrchUnit {
        name: "orch".into(),
        source: source.into(),
        function: function.into(),
        include_dirs: vec!["include".into()],
        defines: vec![],
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
