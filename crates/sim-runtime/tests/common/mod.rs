//! Test helpers: build real incore images and orchestration shared objects
//! with the system C toolchain, and thin wrappers over the C ABI.

#![allow(dead_code)]

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod programs;

use scene_kernels::{BuiltinPlatform, Extraction, Toolchain};
use scene_sim_runtime::*;

/// Kernel images whose func_ids are their indices, and an orchestration,
/// built once per test file (`orch_v2.rs`, `orch_v6.rs`).
pub struct Built {
    pub orch: Vec<u8>,
    pub kernels: Vec<Vec<u8>>,
}

impl Built {
    /// `kernels` (name, C source) as images, and `orch_src` as the
    /// orchestration `name`.
    pub fn new(kernels: &[(&str, &str)], name: &str, orch_src: &str) -> Built {
        let dir = tempfile::tempdir().unwrap();
        let kernels = kernels
            .iter()
            .map(|&(n, src)| kernel_image(dir.path(), n, src))
            .collect();
        let orch = orch_so(dir.path(), name, orch_src);
        Built { orch, kernels }
    }

    /// Every kernel as a vector (AIV) incore of its index.
    pub fn aiv_incores(&self) -> Vec<(u32, u32, &[u8])> {
        self.kernels
            .iter()
            .enumerate()
            .map(|(i, k)| (i as u32, SCENE_CORE_AIV, k.as_slice()))
            .collect()
    }
}

/// The device headers. The manifest dir is read at run time first: a nextest
/// archive run with `--workspace-remap` points it at the checkout it runs in.
pub fn include() -> String {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("../device/include").display().to_string()
}

const KERNEL_LD: &str = "ENTRY(kernel_entry) SECTIONS { . = 0; .text 0 : { KEEP(*(.text.kernel_entry)) *(.text .text.*) *(.rodata .rodata.*) } /DISCARD/ : { *(.comment) *(.note*) *(.eh_frame*) } }";

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles one kernel (C source defining `SCENE_KERNEL_ENTRY`) to a raw `.text` image.
pub fn kernel_image(dir: &Path, name: &str, src: &str) -> Vec<u8> {
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    let elf = dir.join(format!("{name}.elf"));
    let bin = dir.join(format!("{name}.bin"));
    let ld = dir.join("kernel.ld");
    std::fs::write(&c, format!("#include \"scene_kernel.h\"\n{src}\n")).unwrap();
    std::fs::write(&ld, KERNEL_LD).unwrap();
    // The flags every scene kernel compiles and links with, from the one
    // definition (the kernels crate's ELF toolchain).
    let tc = Toolchain::builtin_for(BuiltinPlatform::A2a3Sim, Extraction::Elf);
    run(Command::new("cc")
        .args(&tc.incore_flags)
        .args(["-I", &include(), "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&o));
    run(Command::new("ld")
        .args(&tc.link_flags)
        .arg("-T")
        .arg(&ld)
        .arg("-o")
        .arg(&elf)
        .arg(&o));
    run(Command::new("objcopy")
        .args(["-O", "binary", "-j", ".text"])
        .arg(&elf)
        .arg(&bin));
    let img = std::fs::read(&bin).unwrap();
    assert!(!img.is_empty(), "{name}: empty image");
    img
}

/// Compiles an orchestration shared object and returns its bytes.
pub fn orch_so(dir: &Path, name: &str, src: &str) -> Vec<u8> {
    let c = dir.join(format!("{name}.c"));
    let so: PathBuf = dir.join(format!("{name}.so"));
    std::fs::write(&c, format!("#include \"scene_orch.h\"\n{src}\n")).unwrap();
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I", &include()])
        .arg(&c)
        .arg("-o")
        .arg(&so));
    std::fs::read(&so).unwrap()
}

/// Compiles a hosted kernel (C++20 source; `scene_kernel.h` included) to a
/// host shared object with the host C++ compiler and returns its bytes
/// (issue 29: what `SCENE_INCORE_HOSTED` registers).
pub fn hosted_so(dir: &Path, name: &str, src: &str) -> Vec<u8> {
    let cpp = dir.join(format!("{name}.cpp"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&cpp, format!("#include \"scene_kernel.h\"\n{src}\n")).unwrap();
    run(Command::new("c++")
        .args(["-std=c++20", "-shared", "-fPIC", "-O1", "-I", &include()])
        .arg(&cpp)
        .arg("-o")
        .arg(&so));
    std::fs::read(&so).unwrap()
}

/// An open device, closed on drop.
pub struct Dev(pub *mut SceneDevice);

impl Dev {
    pub fn open(opts: &str) -> Dev {
        let mut d = std::ptr::null_mut();
        let o = CString::new(opts).unwrap();
        let rc = scene_rt_open(0, o.as_ptr(), &mut d);
        assert_eq!(rc, SCENE_RT_OK, "open({opts}): {}", last_error_message());
        assert!(!d.is_null());
        Dev(d)
    }

    pub fn malloc(&self, size: u64) -> u64 {
        let mut a = 0;
        let rc = scene_rt_malloc(self.0, size, &mut a);
        assert_eq!(rc, SCENE_RT_OK, "malloc: {}", last_error_message());
        a
    }

    pub fn put<T: Copy>(&self, addr: u64, data: &[T]) {
        let rc = scene_rt_copy_to_device(
            self.0,
            addr,
            data.as_ptr().cast(),
            std::mem::size_of_val(data) as u64,
        );
        assert_eq!(rc, SCENE_RT_OK, "copy_to_device: {}", last_error_message());
    }

    pub fn get<T: Copy + Default>(&self, addr: u64, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        let rc = scene_rt_copy_from_device(
            self.0,
            v.as_mut_ptr().cast(),
            addr,
            std::mem::size_of_val(&v[..]) as u64,
        );
        assert_eq!(
            rc,
            SCENE_RT_OK,
            "copy_from_device: {}",
            last_error_message()
        );
        v
    }

    /// Registers a callable; returns (status, handle).
    pub fn try_register(
        &self,
        orch: &[u8],
        sym: &str,
        incores: &[(u32, u32, &[u8])],
    ) -> (i32, u32) {
        let descs: Vec<SceneIncoreDesc> = incores
            .iter()
            .map(|&(func_id, core_type, img)| SceneIncoreDesc {
                func_id,
                core_type,
                image: img.as_ptr(),
                image_len: img.len() as u64,
            })
            .collect();
        let sym = CString::new(sym).unwrap();
        let desc = SceneCallableDesc {
            orch_so: orch.as_ptr(),
            orch_so_len: orch.len() as u64,
            orch_symbol: sym.as_ptr(),
            incores: descs.as_ptr(),
            num_incores: descs.len() as u32,
        };
        let mut h = 0;
        let rc = scene_rt_register_callable(self.0, &desc, &mut h);
        (rc, h)
    }

    pub fn register(&self, orch: &[u8], sym: &str, incores: &[(u32, u32, &[u8])]) -> u32 {
        let (rc, h) = self.try_register(orch, sym, incores);
        assert_eq!(rc, SCENE_RT_OK, "register {sym}: {}", last_error_message());
        h
    }

    pub fn try_run(&self, h: u32, args: &[SceneRunArg]) -> i32 {
        scene_rt_run(self.0, h, args.as_ptr(), args.len() as u32)
    }

    pub fn run(&self, h: u32, args: &[SceneRunArg]) {
        let rc = self.try_run(h, args);
        assert_eq!(rc, SCENE_RT_OK, "run: {}", last_error_message());
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let rc = scene_rt_close(self.0);
        if !std::thread::panicking() {
            assert_eq!(rc, SCENE_RT_OK, "close: {}", last_error_message());
        }
    }
}

pub fn tensor(dir: u32, addr: u64, size: u64) -> SceneRunArg {
    SceneRunArg {
        direction: dir,
        reserved: 0,
        value: addr,
        size,
    }
}

pub fn scalar(v: u64) -> SceneRunArg {
    SceneRunArg {
        direction: SCENE_DIR_SCALAR,
        reserved: 0,
        value: v,
        size: 0,
    }
}
