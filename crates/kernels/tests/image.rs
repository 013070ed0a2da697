//! `.text` extraction against real ELF files from the host compiler/linker.

mod common;

use std::process::Command;

use common::{ManualLink, run};
use scene_kernels::{ImageError, extract_text_image};

const GOOD: &str = r#"#include "scene_kernel.h"
static float scale(float v) { return v * 2.0f + 1.0f; }
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = scale(x[i]) + scene_expf(x[i]); }
}
"#;

/// Large struct copies and zeroing make gcc call memcpy/memset; `_Float16`
/// conversions call the f16 helpers. All must come from the builtins.
const HELPERS: &str = r#"#include "scene_kernel.h"
typedef struct { float v[16384]; } Big;
SCENE_KERNEL_ENTRY(ka) {
    Big *d = SCENE_ARG_PTR(ka, 0, Big);
    const Big *s = SCENE_ARG_PTR(ka, 1, Big);
    *d = *s;
    Big z = {0};
    d[1] = z;
    uint16_t *h = SCENE_ARG_PTR(ka, 2, uint16_t);
    double *dp = SCENE_ARG_PTR(ka, 3, double);
    h[0] = scene_f32_to_f16(d->v[1]);
    _Float16 hv = (_Float16)dp[0];
    dp[1] = (double)hv + scene_f16_to_f32(h[1]);
    /* A NaN test on a widened half: gcc narrows it to a half compare. */
    float w = scene_f16_to_f32(h[2]);
    h[3] = w != w;
}
"#;

fn good_elf() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = ManualLink {
        source: GOOD,
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    (dir, bytes)
}

fn objcopy_text(dir: &std::path::Path) -> Vec<u8> {
    run(Command::new("objcopy")
        .current_dir(dir)
        .args(["-O", "binary", "-j", ".text", "k.elf", "k.bin"]));
    std::fs::read(dir.join("k.bin")).expect("read objcopy output")
}

fn undefined_symbols(object: &std::path::Path) -> String {
    let out = run(Command::new("nm").arg("-u").arg(object));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn good_kernel_matches_objcopy() {
    let (dir, bytes) = good_elf();
    let text = extract_text_image(&bytes, "good").expect("good kernel extracts");
    assert!(!text.is_empty());
    assert_eq!(text, objcopy_text(dir.path()));
}

#[test]
fn compiler_helper_calls_are_linked_from_builtins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = ManualLink {
        source: HELPERS,
        ..ManualLink::default()
    }
    .link(dir.path());
    // Guard against the test going vacuous if gcc stops emitting the calls.
    let undefined = undefined_symbols(&dir.path().join("k.o"));
    for helper in [
        "memcpy",
        "memset",
        "__truncsfhf2",
        "__truncdfhf2",
        "__nehf2",
    ] {
        assert!(
            undefined.contains(helper),
            "{helper} not called:\n{undefined}"
        );
    }
    let bytes = std::fs::read(elf).expect("read elf");
    let text = extract_text_image(&bytes, "helpers").expect("helpers kernel extracts");
    assert_eq!(text, objcopy_text(dir.path()));
}

#[test]
fn undefined_symbols_fail_the_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = r#"#include "scene_kernel.h"
float sinf(float);
SCENE_KERNEL_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = sinf(x[0]); }
"#;
    let err = ManualLink {
        source: src,
        ..ManualLink::default()
    }
    .try_link(dir.path())
    .expect_err("sinf is not in the image");
    assert!(err.contains("sinf"), "{err}");
}

#[test]
fn leftover_text_subsection_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = r#"#include "scene_kernel.h"
__attribute__((section(".text.hot"), noinline)) float hot(float v) { return v * 3.0f; }
SCENE_KERNEL_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = hot(x[0]); }
"#;
    let script = "ENTRY(kernel_entry)\nSECTIONS {\n . = 0;\n .text 0 : { KEEP(*(.text.kernel_entry)) *(.text) *(.rodata .rodata.*) }\n /DISCARD/ : { *(.comment) *(.note*) *(.eh_frame*) }\n}\n";
    let elf = ManualLink {
        source: src,
        script,
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    let err = extract_text_image(&bytes, "hot").expect_err("two code sections");
    assert!(
        matches!(&err, ImageError::ExtraCodeSection { section, .. } if section == ".text.hot"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("`hot`") && msg.contains("`.text.hot`"),
        "{msg}"
    );
}

#[test]
fn relocations_against_text_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = ManualLink {
        source: GOOD,
        ldflags: &["--emit-relocs"],
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    let err = extract_text_image(&bytes, "relocs").expect_err("relocations left");
    assert!(
        matches!(&err, ImageError::TextRelocations { section, .. } if section.starts_with(".rela.text")),
        "{err:?}"
    );
}

#[test]
fn entry_not_first_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = r#"#include "scene_kernel.h"
__attribute__((section(".text.first"), noinline)) float first(float v) { return v + 1.0f; }
SCENE_KERNEL_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = first(x[0]); }
"#;
    let script = "ENTRY(kernel_entry)\nSECTIONS {\n . = 0;\n .text 0 : { *(.text.first) KEEP(*(.text.kernel_entry)) *(.text .text.*) *(.rodata .rodata.*) }\n /DISCARD/ : { *(.comment) *(.note*) *(.eh_frame*) }\n}\n";
    let elf = ManualLink {
        source: src,
        script,
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    let err = extract_text_image(&bytes, "late").expect_err("entry is second");
    match &err {
        ImageError::EntryNotFirst {
            section,
            entry,
            text_addr,
            ..
        } => {
            assert_eq!(section, ".text");
            assert!(entry > text_addr, "{err}");
        }
        other => panic!("expected EntryNotFirst, got {other:?}"),
    }
}

#[test]
fn missing_entry_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = r#"#include "scene_kernel.h"
__attribute__((visibility("default"))) void not_the_entry(const SceneKernelArgs *ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = 1.0f;
}
"#;
    let elf = ManualLink {
        source: src,
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    let err = extract_text_image(&bytes, "noentry").expect_err("no kernel_entry");
    assert!(matches!(err, ImageError::MissingEntry { .. }), "{err:?}");
}

#[test]
fn pointer_tables_leave_dynamic_relocations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = r#"#include "scene_kernel.h"
static const float a = 1.0f, b = 2.0f;
static const float *const tbl[] = {&a, &b};
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    x[0] = *tbl[ka->block_idx & 1];
}
"#;
    let elf = ManualLink {
        source: src,
        ..ManualLink::default()
    }
    .link(dir.path());
    let bytes = std::fs::read(elf).expect("read elf");
    let err = extract_text_image(&bytes, "table").expect_err("R_X86_64_RELATIVE left");
    assert!(
        matches!(&err, ImageError::DynamicRelocations { section, .. } if section.contains(".rel")),
        "{err:?}"
    );
    assert!(err.to_string().contains("`table`"), "{err}");
}

#[test]
fn writable_globals_are_rejected() {
    for (what, decl, section) in [
        ("bss", "static float acc;", ".bss"),
        ("data", "static float acc = 5.0f;", ".data"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = format!(
            "#include \"scene_kernel.h\"\n{decl}\nSCENE_KERNEL_ENTRY(ka) {{ float *x = SCENE_ARG_PTR(ka, 0, float); acc += x[0]; x[0] = acc; }}\n"
        );
        let elf = ManualLink {
            source: &src,
            ..ManualLink::default()
        }
        .link(dir.path());
        let bytes = std::fs::read(elf).expect("read elf");
        let err = extract_text_image(&bytes, what).expect_err("writable data");
        match &err {
            ImageError::WritableData { section: s, .. } => assert!(s.starts_with(section), "{err}"),
            other => panic!("{what}: expected WritableData, got {other:?}"),
        }
        assert!(err.to_string().contains("has writable data"), "{err}");
    }
}

#[test]
fn truncated_files_are_errors() {
    let (_dir, bytes) = good_elf();
    let mut lengths: Vec<usize> = vec![0, 1, 4, 16, 63, 64, 65, bytes.len() / 2, bytes.len() - 1];
    lengths.extend((0..bytes.len()).step_by(97));
    for len in lengths {
        let result = extract_text_image(&bytes[..len], "cut");
        assert!(
            result.is_err(),
            "truncated to {len} of {} still extracted",
            bytes.len()
        );
    }
}

#[test]
fn garbage_is_rejected() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut garbage = vec![0u8; 4096];
    for byte in &mut garbage {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    assert!(extract_text_image(&garbage, "noise").is_err());
    garbage[..4].copy_from_slice(b"\x7fELF");
    assert!(extract_text_image(&garbage, "noise").is_err());
}

/// Offsets of the ELF64 header fields the loader must not trust.
const E_SHOFF: usize = 0x28;
const E_SHNUM: usize = 0x3c;
const E_SHSTRNDX: usize = 0x3e;

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[test]
fn corrupt_headers_are_errors() {
    let (_dir, bytes) = good_elf();
    let shnum = u16::from_le_bytes([bytes[E_SHNUM], bytes[E_SHNUM + 1]]);

    let mut bad_strndx = bytes.clone();
    bad_strndx[E_SHSTRNDX..E_SHSTRNDX + 2].copy_from_slice(&shnum.to_le_bytes());
    let err = extract_text_image(&bad_strndx, "k").expect_err("shstrndx >= shnum");
    assert!(
        err.to_string().contains("section name table index"),
        "{err}"
    );

    let mut bad_shoff = bytes.clone();
    bad_shoff[E_SHOFF..E_SHOFF + 8].copy_from_slice(&(bytes.len() as u64 - 8).to_le_bytes());
    let err = extract_text_image(&bad_shoff, "k").expect_err("table out of bounds");
    assert!(matches!(err, ImageError::Malformed { .. }), "{err:?}");

    let mut huge_shoff = bytes.clone();
    huge_shoff[E_SHOFF..E_SHOFF + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(extract_text_image(&huge_shoff, "k").is_err());

    // Point `.text` (section 1 in our layout) past the end of the file.
    let shoff = read_u64(&bytes, E_SHOFF) as usize;
    let text_hdr = shoff + 64;
    let mut bad_text = bytes.clone();
    let sh_offset = text_hdr + 0x18;
    bad_text[sh_offset..sh_offset + 8].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
    let err = extract_text_image(&bad_text, "k").expect_err("text out of bounds");
    assert!(
        matches!(&err, ImageError::SectionOutOfBounds { section, .. } if section == ".text"),
        "{err:?}"
    );
}

#[test]
fn mutated_elves_never_panic() {
    let (_dir, bytes) = good_elf();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut accepted = 0;
    for round in 0..3000 {
        let mut mutated = bytes.clone();
        let flips = 1 + (next() % 8) as usize;
        for _ in 0..flips {
            // Bias towards the headers, where the interesting offsets live.
            let len = mutated.len() as u64;
            let at = if next() % 2 == 0 {
                (next() % 64) as usize
            } else {
                let shoff = read_u64(&bytes, E_SHOFF);
                (shoff + next() % (len - shoff)) as usize
            };
            mutated[at] ^= 1 << (next() % 8);
        }
        if round % 5 == 0 {
            let cut = (next() % mutated.len() as u64) as usize;
            mutated.truncate(cut);
        }
        if extract_text_image(&mutated, "fuzz").is_ok() {
            accepted += 1;
        }
    }
    // Some flips hit bytes nobody reads; most must be caught or harmless.
    assert!(
        accepted < 3000,
        "every mutation accepted: validation is not running"
    );
}
