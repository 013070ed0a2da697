//! The C headers in `include/` and the Rust ABI of `scene-abi` say the same
//! thing: every integer `#define` of the headers has a Rust constant of the
//! same name and value (and the other way round), and every struct has the
//! same size and field offsets as compiled by the host C compiler.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use scene_device::abi::*;

const HEADERS: [&str; 5] = [
    "scene_runtime.h",
    "scene_comm.h",
    "scene_kernel.h",
    "scene_orch.h",
    "scene_tensor.h",
];

/// Every Rust constant of the ABI, by its C name.
fn rust_constants() -> BTreeMap<&'static str, i64> {
    BTreeMap::from([
        (
            "SCENE_RUNTIME_ABI_VERSION",
            i64::from(SCENE_RUNTIME_ABI_VERSION),
        ),
        (
            "SCENE_KERNEL_ABI_VERSION",
            i64::from(SCENE_KERNEL_ABI_VERSION),
        ),
        ("SCENE_ORCH_ABI_VERSION", i64::from(SCENE_ORCH_ABI_VERSION)),
        ("SCENE_MAX_ARGS", SCENE_MAX_ARGS as i64),
        ("SCENE_MAX_FUNC_IDS", i64::from(SCENE_MAX_FUNC_IDS)),
        ("SCENE_RT_OK", i64::from(SCENE_RT_OK)),
        ("SCENE_RT_E_INVALID", i64::from(SCENE_RT_E_INVALID)),
        ("SCENE_RT_E_ABI", i64::from(SCENE_RT_E_ABI)),
        ("SCENE_RT_E_NO_DEVICE", i64::from(SCENE_RT_E_NO_DEVICE)),
        ("SCENE_RT_E_OOM", i64::from(SCENE_RT_E_OOM)),
        (
            "SCENE_RT_E_OUT_OF_BOUNDS",
            i64::from(SCENE_RT_E_OUT_OF_BOUNDS),
        ),
        ("SCENE_RT_E_FUNC_ID", i64::from(SCENE_RT_E_FUNC_ID)),
        ("SCENE_RT_E_CORE_TYPE", i64::from(SCENE_RT_E_CORE_TYPE)),
        ("SCENE_RT_E_LOAD", i64::from(SCENE_RT_E_LOAD)),
        ("SCENE_RT_E_ORCH", i64::from(SCENE_RT_E_ORCH)),
        ("SCENE_RT_E_TIMEOUT", i64::from(SCENE_RT_E_TIMEOUT)),
        ("SCENE_RT_E_COMM", i64::from(SCENE_RT_E_COMM)),
        ("SCENE_COMM_MAX_RANKS", SCENE_COMM_MAX_RANKS as i64),
        (
            "SCENE_COMM_SIGNAL_SLOTS",
            i64::from(SCENE_COMM_SIGNAL_SLOTS),
        ),
        (
            "SCENE_RT_E_DEVICE_FATAL",
            i64::from(SCENE_RT_E_DEVICE_FATAL),
        ),
        ("SCENE_CORE_AIC", i64::from(SCENE_CORE_AIC)),
        ("SCENE_CORE_AIV", i64::from(SCENE_CORE_AIV)),
        (
            "SCENE_RT_TRACE_TIMELINE",
            i64::from(SCENE_RT_TRACE_TIMELINE),
        ),
        ("SCENE_RT_TRACE_DEPS", i64::from(SCENE_RT_TRACE_DEPS)),
        ("SCENE_DIR_IN", i64::from(SCENE_DIR_IN)),
        ("SCENE_DIR_OUT", i64::from(SCENE_DIR_OUT)),
        ("SCENE_DIR_INOUT", i64::from(SCENE_DIR_INOUT)),
        ("SCENE_DIR_SCALAR", i64::from(SCENE_DIR_SCALAR)),
        ("SCENE_MAX_RANK", SCENE_MAX_RANK as i64),
        ("SCENE_DTYPE_F32", i64::from(SCENE_DTYPE_F32)),
        ("SCENE_DTYPE_F64", i64::from(SCENE_DTYPE_F64)),
        ("SCENE_DTYPE_F16", i64::from(SCENE_DTYPE_F16)),
        ("SCENE_DTYPE_BF16", i64::from(SCENE_DTYPE_BF16)),
        ("SCENE_DTYPE_I8", i64::from(SCENE_DTYPE_I8)),
        ("SCENE_DTYPE_U8", i64::from(SCENE_DTYPE_U8)),
        ("SCENE_DTYPE_I16", i64::from(SCENE_DTYPE_I16)),
        ("SCENE_DTYPE_I32", i64::from(SCENE_DTYPE_I32)),
        ("SCENE_DTYPE_I64", i64::from(SCENE_DTYPE_I64)),
        ("SCENE_DTYPE_BOOL", i64::from(SCENE_DTYPE_BOOL)),
        ("SCENE_DTYPE_BYTES", i64::from(SCENE_DTYPE_BYTES)),
    ])
}

/// `#define NAME <integer>` lines of `text` (a trailing comment allowed);
/// include guards and function-like macros have no integer value and are
/// skipped.
fn integer_defines(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("#define")?;
            let mut words = rest.split_whitespace();
            let name = words.next()?;
            let value = words.next()?.parse::<i64>().ok()?;
            match words.next() {
                None => {}
                Some(w) if w.starts_with("/*") || w.starts_with("//") => {}
                Some(_) => return None,
            }
            Some((name.to_owned(), value))
        })
        .collect()
}

#[test]
fn define_parser_reads_values_and_skips_the_rest() {
    let text = "#define A 1\n#define B -100 /* x */\n#define GUARD_H\n#define F(x) (x)\n#define C 2 + 3\n  #define D 7\n";
    assert_eq!(
        integer_defines(text),
        [("A".into(), 1), ("B".into(), -100), ("D".into(), 7)]
    );
}

#[test]
fn header_defines_match_the_rust_constants() {
    let mut in_headers = BTreeMap::new();
    for h in HEADERS {
        let text = std::fs::read_to_string(include_dir().join(h)).unwrap();
        for (name, value) in integer_defines(&text) {
            assert!(
                in_headers.insert(name.clone(), value).is_none(),
                "{name} is defined twice in the headers"
            );
        }
    }
    let rust: BTreeMap<String, i64> = rust_constants()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert!(
        in_headers.len() >= 20,
        "parsed too few defines: {in_headers:?}"
    );
    assert_eq!(
        in_headers, rust,
        "headers (left) and scene-abi (right) disagree"
    );
}

/// `(struct, field or "", value)`: sizes (field "") and field offsets.
type Layout = Vec<(String, String, usize)>;

fn rust_layout() -> Layout {
    macro_rules! layout {
        ($($ty:ident { $($field:ident),* })*) => {
            vec![$(
                (stringify!($ty).to_owned(), String::new(), size_of::<$ty>()),
                $((stringify!($ty).to_owned(), stringify!($field).to_owned(), offset_of!($ty, $field)),)*
            )*]
        };
    }
    layout! {
        SceneIncoreDesc { func_id, core_type, image, image_len }
        SceneCallableDesc { orch_so, orch_so_len, orch_symbol, incores, num_incores }
        SceneRunArg { direction, reserved, value, size }
        SceneOrchArg { direction, reserved, value, size }
        SceneKernelArgs { abi_version, block_idx, block_num, num_args, args, arg_sizes, descs, comm }
        SceneCommCtx { rank, nranks, window_size, windows, signals, num_signals, reserved, domain, signal, wait }
        SceneOrchOps { abi_version, alloc, submit, fail, arg_desc, submit_v2, read, write, fill, free, begin_scope, end_scope }
        SceneTensorDesc { dtype, rank, offset, shape, strides }
        SceneTaskArgV2 { direction, reserved, value, size, desc }
        SceneOrchCtx { ops, runtime }
    }
}

/// The same table, as the host C compiler lays the header structs out.
fn c_layout(dir: &std::path::Path) -> Layout {
    let mut prog = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"scene_kernel.h\"\n#include \"scene_orch.h\"\nint main(void) {\n",
    );
    for (ty, field, _) in rust_layout() {
        if field.is_empty() {
            prog.push_str(&format!("    printf(\"{ty} - %zu\\n\", sizeof({ty}));\n"));
        } else {
            prog.push_str(&format!(
                "    printf(\"{ty} {field} %zu\\n\", offsetof({ty}, {field}));\n"
            ));
        }
    }
    prog.push_str("    return 0;\n}\n");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, prog).unwrap();
    let out = Command::new("cc")
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running the host C compiler `cc`");
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let field = if w[1] == "-" { "" } else { w[1] };
            (w[0].to_owned(), field.to_owned(), w[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn header_structs_match_the_rust_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let rust = rust_layout();
    let c = c_layout(dir.path());
    assert_eq!(rust.len(), c.len());
    for (r, c) in rust.iter().zip(&c) {
        assert_eq!(r, c, "Rust (left) and C (right) layouts differ");
    }
    // The table covers what it claims: a size and an offset per struct.
    assert!(
        rust.iter()
            .any(|(t, f, _)| t == "SceneKernelArgs" && f == "arg_sizes")
    );
}

/// The indented example blocks of a header's comments (`" *     code"`).
fn examples(header: &str) -> Vec<String> {
    let text = std::fs::read_to_string(include_dir().join(header)).unwrap();
    let mut blocks: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        match line.strip_prefix(" *     ") {
            Some(code) => {
                current.push_str(code);
                current.push('\n');
            }
            None if !current.is_empty() => blocks.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    blocks
}

/// Compiles `src` with `compiler` (and `flags`) in `dir`; panics with the
/// diagnostics on failure.
fn compiles(dir: &std::path::Path, compiler: &str, flags: &[&str], name: &str, src: &str) {
    let path = dir.join(name);
    std::fs::write(&path, src).unwrap();
    let out = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(include_dir())
        .arg("-c")
        .arg(&path)
        .arg("-o")
        .arg(dir.join(format!("{name}.o")))
        .output()
        .unwrap_or_else(|e| panic!("running `{compiler}`: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {flags:?} rejects the example {name}:\n{src}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The examples in the headers' comments compile, as C and as C++, so the
/// documentation cannot rot and the headers stay usable from C++ sources.
#[test]
fn header_examples_compile_as_c_and_cxx() {
    let dir = tempfile::tempdir().unwrap();
    let orch = examples("scene_orch.h");
    assert!(orch.len() >= 2, "v1 and v2 examples expected: {orch:?}");
    for (i, block) in orch.iter().enumerate() {
        let src = format!("#include \"scene_orch.h\"\n{block}");
        compiles(
            dir.path(),
            "cc",
            &["-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC"],
            &format!("orch{i}.c"),
            &src,
        );
        compiles(
            dir.path(),
            "c++",
            &["-x", "c++", "-std=c++17", "-Wall", "-Werror", "-fPIC"],
            &format!("orch{i}.cpp"),
            &src,
        );
    }
    let kernel = examples("scene_kernel.h");
    assert_eq!(kernel.len(), 1, "{kernel:?}");
    let freestanding = [
        "-ffreestanding",
        "-fno-builtin",
        "-Wall",
        "-Wextra",
        "-Werror",
    ];
    compiles(
        dir.path(),
        "cc",
        &[&["-std=c11"], &freestanding[..]].concat(),
        "kernel.c",
        &kernel[0],
    );
    compiles(
        dir.path(),
        "c++",
        &[&["-x", "c++", "-std=c++17"], &freestanding[..]].concat(),
        "kernel.cpp",
        &kernel[0],
    );
}

/// The device headers of the checkout the test runs in: the manifest dir is
/// read at run time first (a nextest archive run with `--workspace-remap`
/// points it at the checkout it runs in; `scene_device::include_dir()` is
/// the build machine's).
fn include_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("include")
}
