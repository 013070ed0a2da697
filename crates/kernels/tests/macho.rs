//! `__TEXT,__text` extraction against real Mach-O files from clang and
//! ld64.lld, for both macOS architectures, linked with the toolchain's
//! Mach-O flags. Skips (with a message) only where the LLVM tools are absent.

mod common;

use std::path::Path;
use std::process::Command;

use common::{MachOLink, MachOTools, run};
use scene_kernels::toolchain::macho_link_flags;
use scene_kernels::{ImageError, extract_text_image};

const ARCHS: [&str; 2] = ["x86_64", "arm64"];

/// Float constants: on x86_64 these land in `__literal4/16` unless folded.
const GOOD: &str = r#"
static float scale(float v) { return v * 2.0f + 1.0f; }
MACHO_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = scale(x[i]) + scene_expf(x[i]); }
}
"#;

const COPY: &str = r#"
typedef struct { float v[16384]; } Big;
MACHO_ENTRY(ka) { *SCENE_ARG_PTR(ka, 0, Big) = *SCENE_ARG_PTR(ka, 1, Big); }
"#;

macro_rules! tools_or_skip {
    () => {
        match MachOTools::find() {
            Ok(tools) => tools,
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        }
    };
}

fn link_bytes(tools: &MachOTools, link: &MachOLink<'_>) -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = link.link(tools, dir.path());
    let bytes = std::fs::read(path).expect("read Mach-O");
    (dir, bytes)
}

fn dump_text(tools: &MachOTools, dir: &Path) -> Vec<u8> {
    run(Command::new(&tools.objcopy).current_dir(dir).args([
        "--dump-section",
        "__TEXT,__text=text.bin",
        "k.macho",
        "/dev/null",
    ]));
    std::fs::read(dir.join("text.bin")).expect("read dumped __text")
}

/// `(address, name)` of the defined symbols, by address, from llvm-nm.
fn symbols(tools: &MachOTools, file: &Path) -> Vec<(u64, String)> {
    let out = run(Command::new(&tools.nm)
        .args(["-n", "--defined-only"])
        .arg(file));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
            let _kind = parts.next()?;
            Some((addr, parts.next()?.to_owned()))
        })
        .collect()
}

fn undefined(tools: &MachOTools, object: &Path) -> String {
    let out = run(Command::new(&tools.nm).arg("-u").arg(object));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn good_kernels_match_the_text_section() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let (dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, GOOD));
        let text = extract_text_image(&bytes, "good").expect("good kernel extracts");
        assert!(text.len() > 16, "{arch}: {} bytes", text.len());
        assert_eq!(text, dump_text(&tools, dir.path()), "{arch}");
        // kernel_entry is the lowest code symbol: offset 0 of the image.
        let syms = symbols(&tools, &dir.path().join("k.macho"));
        let entry = syms
            .iter()
            .find(|(_, n)| n == "_kernel_entry")
            .expect("entry symbol");
        let first_code = syms
            .iter()
            .find(|(_, n)| n != "__mh_execute_header")
            .expect("a code symbol");
        assert_eq!(entry, first_code, "{arch}: {syms:?}");
    }
}

/// A kernel written the way kernel authors write it, with the header's
/// `SCENE_KERNEL_ENTRY` (whose Mach-O branch names `__TEXT,__text`), and a
/// helper defined before the entry: it compiles for Mach-O, links with the
/// toolchain's order file, and extracts with `kernel_entry` at offset 0.
const WITH_HEADER_ENTRY: &str = r#"
__attribute__((noinline)) static float twice(float v) { return v * 2.0f + 0.5f; }
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = twice(x[i]); }
}
"#;

#[test]
fn good_kernels_written_with_scene_kernel_entry_extract() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let (dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, WITH_HEADER_ENTRY));
        let text = extract_text_image(&bytes, "entry")
            .unwrap_or_else(|e| panic!("{arch}: SCENE_KERNEL_ENTRY kernel extracts: {e}"));
        assert!(text.len() > 16, "{arch}: {} bytes", text.len());
        assert_eq!(text, dump_text(&tools, dir.path()), "{arch}");
        let syms = symbols(&tools, &dir.path().join("k.macho"));
        let entry = syms
            .iter()
            .find(|(_, n)| n == "_kernel_entry")
            .expect("entry symbol");
        let first_code = syms
            .iter()
            .find(|(_, n)| n != "__mh_execute_header")
            .expect("a code symbol");
        assert_eq!(entry, first_code, "{arch}: {syms:?}");
        // The helper written first in the source was placed after the entry.
        let helper = syms
            .iter()
            .find(|(_, n)| n == "_twice")
            .expect("helper symbol");
        assert!(helper.0 > entry.0, "{arch}: {syms:?}");
    }
}

#[test]
fn x86_64_constants_are_folded_into_text() {
    let tools = tools_or_skip!();
    // Guard: the object really has literal sections to fold.
    let dir = tempfile::tempdir().expect("tempdir");
    MachOLink::new("x86_64", GOOD).compile_all(&tools, dir.path());
    let out = run(Command::new(&tools.objcopy).current_dir(dir.path()).args([
        "--dump-section",
        "__TEXT,__literal16=lit.bin",
        "k.o",
        "/dev/null",
    ]));
    assert!(out.status.success());
    assert!(
        !std::fs::read(dir.path().join("lit.bin"))
            .expect("lit")
            .is_empty()
    );

    // Without the fold the constants sit outside the image: rejected.
    let unfolded: Vec<String> = {
        let flags = macho_link_flags("x86_64");
        let cut = flags
            .iter()
            .position(|f| f == "-rename_section")
            .expect("fold flags present");
        flags[..cut].to_vec()
    };
    let link = MachOLink {
        link_flags: Some(unfolded),
        ..MachOLink::new("x86_64", GOOD)
    };
    let (_dir, bytes) = link_bytes(&tools, &link);
    let err = extract_text_image(&bytes, "lits").expect_err("literals outside __text");
    assert!(
        matches!(&err, ImageError::ExtraCodeSection { section, .. } if section.starts_with("__TEXT,__literal")),
        "{err:?}"
    );
}

#[test]
fn compiler_helper_calls_are_linked_from_builtins() {
    let tools = tools_or_skip!();
    let src = r#"
typedef struct { float v[16384]; } Big;
MACHO_ENTRY(ka) {
    Big *d = SCENE_ARG_PTR(ka, 0, Big);
    const Big *s = SCENE_ARG_PTR(ka, 1, Big);
    *d = *s;
    Big z = {0};
    d[1] = z;
}
"#;
    // clang zeroes through Darwin's bzero entry points, not memset.
    for (arch, helpers) in [
        ("x86_64", ["_memcpy", "___bzero"]),
        ("arm64", ["_memcpy", "_bzero"]),
    ] {
        let (dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, src));
        let undefined = undefined(&tools, &dir.path().join("k.o"));
        for helper in helpers {
            assert!(
                undefined.contains(helper),
                "{arch}: {helper} not called:\n{undefined}"
            );
        }
        let text = extract_text_image(&bytes, "helpers").expect("helpers kernel extracts");
        assert_eq!(text, dump_text(&tools, dir.path()), "{arch}");
    }
}

#[test]
fn undefined_symbols_fail_the_link() {
    let tools = tools_or_skip!();
    let src = "float sinf(float);\nMACHO_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = sinf(x[0]); }\n";
    for arch in ARCHS {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = MachOLink::new(arch, src)
            .try_link(&tools, dir.path())
            .expect_err("sinf is not in the image");
        assert!(err.contains("_sinf"), "{arch}: {err}");
    }
}

#[test]
fn unlinked_objects_have_text_relocations() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let dir = tempfile::tempdir().expect("tempdir");
        // The memcpy call leaves a branch relocation on both targets.
        MachOLink::new(arch, COPY).compile_all(&tools, dir.path());
        let bytes = std::fs::read(dir.path().join("k.o")).expect("read k.o");
        let err = extract_text_image(&bytes, "obj").expect_err("relocations left");
        assert!(
            matches!(&err, ImageError::TextRelocations { section, .. } if section == "__TEXT,__text"),
            "{arch}: {err:?}"
        );
    }
}

#[test]
fn extra_code_section_is_rejected() {
    let tools = tools_or_skip!();
    let src = r#"
__attribute__((section("__TEXT,__hot,regular,pure_instructions"), noinline))
float hot(float v) { return v * 3.0f; }
MACHO_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = hot(x[0]); }
"#;
    for arch in ARCHS {
        let (_dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, src));
        let err = extract_text_image(&bytes, "hot").expect_err("two code sections");
        assert!(
            matches!(&err, ImageError::ExtraCodeSection { section, .. } if section == "__TEXT,__hot"),
            "{arch}: {err:?}"
        );
        assert!(err.to_string().contains("`hot`"), "{err}");
    }
}

#[test]
fn entry_not_first_is_rejected() {
    let tools = tools_or_skip!();
    let src = r#"
__attribute__((noinline, used, visibility("default"))) float first(float v) { return v + 1.0f; }
MACHO_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = first(x[0]); }
"#;
    for arch in ARCHS {
        let link = MachOLink {
            order_file: "_first\n_kernel_entry\n",
            ..MachOLink::new(arch, src)
        };
        let (_dir, bytes) = link_bytes(&tools, &link);
        match extract_text_image(&bytes, "late") {
            Err(ImageError::EntryNotFirst {
                section,
                entry,
                text_addr,
                ..
            }) => {
                assert_eq!(section, "__TEXT,__text");
                assert!(entry > text_addr, "{arch}: {entry:#x} <= {text_addr:#x}");
            }
            other => panic!("{arch}: expected EntryNotFirst, got {other:?}"),
        }
    }
}

#[test]
fn missing_entry_is_rejected() {
    let tools = tools_or_skip!();
    let src = r#"
__attribute__((used, visibility("default"))) void not_the_entry(const SceneKernelArgs *ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = 1.0f;
}
"#;
    for arch in ARCHS {
        // The toolchain's `-e _kernel_entry` already fails the link...
        let dir = tempfile::tempdir().expect("tempdir");
        let err = MachOLink::new(arch, src)
            .try_link(&tools, dir.path())
            .expect_err("no entry to link");
        assert!(err.contains("_kernel_entry"), "{arch}: {err}");
        // ...and a file linked around another entry is rejected on extraction.
        let flags: Vec<String> = macho_link_flags(arch)
            .into_iter()
            .map(|f| {
                if f == "_kernel_entry" {
                    "_not_the_entry".to_owned()
                } else {
                    f
                }
            })
            .collect();
        let link = MachOLink {
            link_flags: Some(flags),
            order_file: "_not_the_entry\n",
            ..MachOLink::new(arch, src)
        };
        let (_dir, bytes) = link_bytes(&tools, &link);
        let err = extract_text_image(&bytes, "noentry").expect_err("no kernel_entry");
        assert!(
            matches!(err, ImageError::MissingEntry { .. }),
            "{arch}: {err:?}"
        );
    }
}

#[test]
fn missing_text_is_rejected() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        // Everything, folded constants included, goes to `__code` instead.
        let mut flags: Vec<String> = macho_link_flags(arch)
            .into_iter()
            .map(|f| {
                if f == "__text" {
                    "__code".to_owned()
                } else {
                    f
                }
            })
            .collect();
        flags.extend(["-rename_section", "__TEXT", "__text", "__TEXT", "__code"].map(String::from));
        let link = MachOLink {
            link_flags: Some(flags),
            ..MachOLink::new(arch, GOOD)
        };
        let (_dir, bytes) = link_bytes(&tools, &link);
        let err = extract_text_image(&bytes, "notext").expect_err("no __text");
        assert!(
            matches!(&err, ImageError::MissingText { section, .. } if section == "__TEXT,__text"),
            "{arch}: {err:?}"
        );
    }
}

const TABLE: &str = r#"
static const float a = 1.0f, b = 2.0f;
/* Not static: clang would turn a private table into relative offsets. */
const float *const tbl[] = {&a, &b};
MACHO_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    x[0] = *tbl[ka->block_idx & 1];
}
"#;

#[test]
fn pointer_tables_leave_dyld_rebases() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let (_dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, TABLE));
        let err = extract_text_image(&bytes, "table").expect_err("rebase left");
        assert!(
            matches!(&err, ImageError::DynamicRelocations { section, .. } if section.contains("rebase_size")),
            "{arch}: {err:?}"
        );
        assert!(err.to_string().contains("`table`"), "{err}");
    }
}

#[test]
fn writable_globals_are_rejected() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        for (decl, section) in [
            ("static float acc;", "__DATA,__bss"),
            ("static float acc = 5.0f;", "__DATA,__data"),
        ] {
            let src = format!(
                "{decl}\nMACHO_ENTRY(ka) {{ float *x = SCENE_ARG_PTR(ka, 0, float); acc += x[0]; x[0] = acc; }}\n"
            );
            let (_dir, bytes) = link_bytes(&tools, &MachOLink::new(arch, &src));
            let err = extract_text_image(&bytes, "globals").expect_err("writable data");
            match &err {
                ImageError::WritableData { section: s, .. } => {
                    assert_eq!(s, section, "{arch}: {err}")
                }
                other => panic!("{arch} {decl}: expected WritableData, got {other:?}"),
            }
            assert!(err.to_string().contains("has writable data"), "{err}");
        }
    }
}

fn good(tools: &MachOTools, arch: &str) -> Vec<u8> {
    link_bytes(tools, &MachOLink::new(arch, GOOD)).1
}

#[test]
fn truncated_files_are_errors() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let bytes = good(&tools, arch);
        let mut lengths: Vec<usize> =
            vec![0, 1, 4, 28, 31, 32, 33, bytes.len() / 2, bytes.len() - 1];
        lengths.extend((0..bytes.len()).step_by(61));
        for len in lengths {
            assert!(
                extract_text_image(&bytes[..len], "cut").is_err(),
                "{arch}: truncated to {len} of {} still extracted",
                bytes.len()
            );
        }
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Offsets in a 64-bit Mach-O: header fields, then the first load command.
const NCMDS: usize = 16;
const SIZEOFCMDS: usize = 20;
const FIRST_CMD: usize = 32;
const LC_SEGMENT_64: u32 = 0x19;

/// File offset of the `section_64` header named `sect` in segment `seg`.
fn section_header(bytes: &[u8], seg: &str, sect: &str) -> Option<usize> {
    let mut at = FIRST_CMD;
    for _ in 0..u32_at(bytes, NCMDS) {
        let (cmd, size) = (u32_at(bytes, at), u32_at(bytes, at + 4) as usize);
        if cmd == LC_SEGMENT_64 {
            let nsects = u32_at(bytes, at + 64) as usize;
            for i in 0..nsects {
                let s = at + 72 + 80 * i;
                let name = |o: usize| {
                    let raw = &bytes[o..o + 16];
                    String::from_utf8_lossy(raw.split(|b| *b == 0).next().unwrap_or(raw))
                        .into_owned()
                };
                if name(s) == sect && name(s + 16) == seg {
                    return Some(s);
                }
            }
        }
        at += size;
    }
    None
}

/// File offset of the `segment_command_64` named `seg`.
fn segment_command(bytes: &[u8], seg: &str) -> Option<usize> {
    let mut at = FIRST_CMD;
    for _ in 0..u32_at(bytes, NCMDS) {
        let (cmd, size) = (u32_at(bytes, at), u32_at(bytes, at + 4) as usize);
        let raw = &bytes[at + 8..at + 24];
        if cmd == LC_SEGMENT_64 && raw.split(|b| *b == 0).next() == Some(seg.as_bytes()) {
            return Some(at);
        }
        at += size;
    }
    None
}

#[test]
fn corrupt_headers_are_errors() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let bytes = good(&tools, arch);
        assert!(extract_text_image(&bytes, "k").is_ok(), "{arch}: baseline");

        let mut many_cmds = bytes.clone();
        put_u32(&mut many_cmds, NCMDS, u32::MAX);
        assert!(
            extract_text_image(&many_cmds, "k").is_err(),
            "{arch}: ncmds"
        );

        let mut big_cmds = bytes.clone();
        put_u32(&mut big_cmds, SIZEOFCMDS, u32::MAX);
        assert!(
            extract_text_image(&big_cmds, "k").is_err(),
            "{arch}: sizeofcmds"
        );

        let mut zero_cmdsize = bytes.clone();
        put_u32(&mut zero_cmdsize, FIRST_CMD + 4, 0);
        assert!(
            extract_text_image(&zero_cmdsize, "k").is_err(),
            "{arch}: cmdsize 0"
        );

        let text = section_header(&bytes, "__TEXT", "__text").expect("__text header");
        // section_64: addr at +32, size at +40, offset at +48, nreloc at +60.
        let mut far = bytes.clone();
        put_u32(&mut far, text + 48, u32::MAX - 4);
        let err = extract_text_image(&far, "k").expect_err("text out of bounds");
        assert!(
            matches!(&err, ImageError::SectionOutOfBounds { section, .. } if section == "__TEXT,__text"),
            "{arch}: {err:?}"
        );

        let mut huge = bytes.clone();
        huge[text + 40..text + 48].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = extract_text_image(&huge, "k").expect_err("text size overflows");
        assert!(
            matches!(err, ImageError::SectionOutOfBounds { .. }),
            "{arch}: {err:?}"
        );

        let mut moved = bytes.clone();
        let addr = u64::from_le_bytes(bytes[text + 32..text + 40].try_into().expect("addr"));
        moved[text + 32..text + 40].copy_from_slice(&(addr - 16).to_le_bytes());
        let err = extract_text_image(&moved, "k").expect_err("entry no longer first");
        assert!(
            matches!(err, ImageError::EntryNotFirst { .. }),
            "{arch}: {err:?}"
        );

        let mut relocs = bytes.clone();
        put_u32(&mut relocs, text + 60, 1);
        let err = extract_text_image(&relocs, "k").expect_err("nreloc");
        assert!(
            matches!(err, ImageError::TextRelocations { .. }),
            "{arch}: {err:?}"
        );

        let mut zerofill = bytes.clone();
        put_u32(
            &mut zerofill,
            text + 64,
            u32_at(&bytes, text + 64) & !0xff | 0x1,
        );
        let err = extract_text_image(&zerofill, "k").expect_err("zerofill text");
        assert!(
            matches!(err, ImageError::Malformed { .. }),
            "{arch}: {err:?}"
        );
    }
}

#[test]
fn read_only_data_outside_text_is_rejected() {
    let tools = tools_or_skip!();
    for arch in ARCHS {
        let (_dir, mut bytes) = link_bytes(&tools, &MachOLink::new(arch, TABLE));
        // Drop the rebase and make __DATA_CONST read-only: what is left is
        // constant data the copied image would not carry.
        let seg = segment_command(&bytes, "__DATA_CONST").expect("__DATA_CONST");
        put_u32(&mut bytes, seg + 60, 1); // initprot
        let mut at = FIRST_CMD;
        for _ in 0..u32_at(&bytes, NCMDS) {
            if u32_at(&bytes, at) & 0x7fff_ffff == 0x22 {
                put_u32(&mut bytes, at + 12, 0); // rebase_size
            }
            at += u32_at(&bytes, at + 4) as usize;
        }
        let err = extract_text_image(&bytes, "ro").expect_err("data outside __text");
        assert!(
            matches!(&err, ImageError::Malformed { reason, .. } if reason.contains("__DATA_CONST,__const")),
            "{arch}: {err:?}"
        );
    }
}

#[test]
fn mutated_files_never_panic() {
    let tools = tools_or_skip!();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for arch in ARCHS {
        let bytes = good(&tools, arch);
        let cmds_end = FIRST_CMD + u32_at(&bytes, SIZEOFCMDS) as usize;
        let linkedit = segment_command(&bytes, "__LINKEDIT").expect("__LINKEDIT");
        let linkedit_off = u32_at(&bytes, linkedit + 40) as usize;
        let mut accepted = 0;
        for round in 0..2500 {
            let mut mutated = bytes.clone();
            for _ in 0..1 + next() % 8 {
                // Headers and load commands, or the symbol/string tables.
                let at = match next() % 3 {
                    0 | 1 => (next() % cmds_end as u64) as usize,
                    _ => linkedit_off + (next() % (bytes.len() - linkedit_off) as u64) as usize,
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
        assert!(accepted < 2500, "{arch}: every mutation accepted");
    }
}
