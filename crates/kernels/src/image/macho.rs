//! Mach-O `__TEXT,__text` extraction (macOS hosts).
//!
//! Same rules as ELF where Mach-O can express them: one code section, no
//! relocations against it, no fixups for dyld, no writable data,
//! `_kernel_entry` first. ld64 has no linker scripts, so read-only data the
//! code needs is folded into `__text` by the toolchain's `-rename_section`
//! flags; any other section with contents in a loaded segment is data the
//! copied image would not carry, and is rejected rather than silently lost.

use goblin::mach::MachO;
use goblin::mach::constants::{
    S_ATTR_PURE_INSTRUCTIONS, S_ATTR_SOME_INSTRUCTIONS, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL,
    S_ZEROFILL, SECTION_TYPE,
};
use goblin::mach::load_command::CommandVariant;
use goblin::mach::symbols::{N_SECT, N_STAB, N_TYPE};

use super::{ENTRY_SYMBOL, ImageError};

const TEXT: &str = "__TEXT,__text";
/// VM_PROT_WRITE / VM_PROT_EXECUTE in a segment's initial protection.
const VM_PROT_WRITE: u32 = 0x2;
const VM_PROT_EXECUTE: u32 = 0x4;
/// `dyld_chained_starts_in_segment.page_start` value for "no fixups in page".
const DYLD_CHAINED_PTR_START_NONE: u16 = 0xffff;

fn malformed(kernel: &str, reason: impl Into<String>) -> ImageError {
    ImageError::Malformed {
        kernel: kernel.to_owned(),
        reason: reason.into(),
    }
}

/// One section header with what the checks need from its segment.
struct Section {
    /// 1-based, across all segments: what `nlist.n_sect` refers to.
    ordinal: usize,
    name: String,
    header: goblin::mach::segment::Section,
    initprot: u32,
}

impl Section {
    fn is_zerofill(&self) -> bool {
        matches!(
            self.header.flags & SECTION_TYPE,
            S_ZEROFILL | S_GB_ZEROFILL | S_THREAD_LOCAL_ZEROFILL
        )
    }

    fn is_code(&self) -> bool {
        self.header.flags & (S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS) != 0
    }
}

pub(super) fn extract(bytes: &[u8], kernel: &str) -> Result<Vec<u8>, ImageError> {
    let macho =
        MachO::parse(bytes, 0).map_err(|e| malformed(kernel, format!("bad Mach-O: {e}")))?;
    let sections = sections(&macho, kernel)?;
    let entry = entry_symbol(&macho, kernel)?;

    let mut texts = sections.iter().filter(|s| s.name == TEXT);
    let Some(text) = texts.next() else {
        // With -dead_strip a missing entry fails the link; a file without
        // both is reported by its first problem, as for ELF.
        if entry.is_none() {
            return Err(ImageError::MissingEntry {
                kernel: kernel.to_owned(),
            });
        }
        return Err(ImageError::MissingText {
            kernel: kernel.to_owned(),
            section: TEXT.to_owned(),
        });
    };
    if texts.next().is_some() {
        return Err(malformed(kernel, format!("more than one `{TEXT}` section")));
    }
    if text.is_zerofill() {
        return Err(malformed(kernel, format!("`{TEXT}` has no file contents")));
    }
    let data = section_data(bytes, kernel, text)?;
    if data.is_empty() {
        return Err(ImageError::MissingText {
            kernel: kernel.to_owned(),
            section: TEXT.to_owned(),
        });
    }
    if text.header.nreloc > 0 {
        return Err(ImageError::TextRelocations {
            kernel: kernel.to_owned(),
            section: TEXT.to_owned(),
        });
    }

    check_other_sections(bytes, kernel, &sections, text)?;
    check_dyld_fixups(&macho, bytes, kernel)?;
    check_writable(kernel, &sections, text)?;

    let (n_sect, entry) = entry.ok_or_else(|| ImageError::MissingEntry {
        kernel: kernel.to_owned(),
    })?;
    if n_sect != text.ordinal || entry != text.header.addr {
        return Err(ImageError::EntryNotFirst {
            kernel: kernel.to_owned(),
            section: TEXT.to_owned(),
            entry,
            text_addr: text.header.addr,
        });
    }
    Ok(data.to_vec())
}

fn sections(macho: &MachO<'_>, kernel: &str) -> Result<Vec<Section>, ImageError> {
    let mut out = Vec::new();
    for segment in macho.segments.iter() {
        let segname = segment.name().unwrap_or("?");
        let headers = segment
            .sections()
            .map_err(|e| malformed(kernel, format!("bad sections in `{segname}`: {e}")))?;
        for (header, _) in headers {
            // The section's own segment name: in an object file all sections
            // sit in one segment whose name is empty.
            let name = format!(
                "{},{}",
                header.segname().unwrap_or("?"),
                header.name().unwrap_or("?")
            );
            out.push(Section {
                ordinal: out.len() + 1,
                name,
                header,
                initprot: segment.initprot,
            });
        }
    }
    Ok(out)
}

/// The section's bytes, bounds-checked here rather than trusting goblin,
/// which maps an out-of-range section to an empty slice.
fn section_data<'a>(
    bytes: &'a [u8],
    kernel: &str,
    section: &Section,
) -> Result<&'a [u8], ImageError> {
    let out_of_bounds = || ImageError::SectionOutOfBounds {
        kernel: kernel.to_owned(),
        section: section.name.clone(),
        offset: u64::from(section.header.offset),
        size: section.header.size,
        file_len: bytes.len(),
    };
    let start = u64::from(section.header.offset);
    let end = start
        .checked_add(section.header.size)
        .ok_or_else(out_of_bounds)?;
    if end > bytes.len() as u64 {
        return Err(out_of_bounds());
    }
    let (start, end) = (
        usize::try_from(start).map_err(|_| out_of_bounds())?,
        usize::try_from(end).map_err(|_| out_of_bounds())?,
    );
    bytes.get(start..end).ok_or_else(out_of_bounds)
}

/// Everything loaded besides `__text` must be empty: code elsewhere is a
/// second code section, and read-only data elsewhere would be left behind
/// when only `__text` is copied (its RIP/PC-relative references would then
/// point past the image).
fn check_other_sections(
    bytes: &[u8],
    kernel: &str,
    sections: &[Section],
    text: &Section,
) -> Result<(), ImageError> {
    for s in sections.iter().filter(|s| s.ordinal != text.ordinal) {
        if s.header.size == 0 {
            continue;
        }
        if !s.is_zerofill() {
            section_data(bytes, kernel, s)?;
        }
        if s.is_code() || s.initprot & VM_PROT_EXECUTE != 0 {
            return Err(ImageError::ExtraCodeSection {
                kernel: kernel.to_owned(),
                section: s.name.clone(),
            });
        }
        if s.initprot & VM_PROT_WRITE == 0 {
            return Err(malformed(
                kernel,
                format!(
                    "read-only section `{}` lies outside `{TEXT}`; the image would not contain it",
                    s.name
                ),
            ));
        }
    }
    Ok(())
}

/// Rebase/bind opcodes, classic dynamic relocations and chained fixups are
/// all dyld patching the image at load time: absolute addresses survived.
fn check_dyld_fixups(macho: &MachO<'_>, bytes: &[u8], kernel: &str) -> Result<(), ImageError> {
    let dynamic = |what: String| ImageError::DynamicRelocations {
        kernel: kernel.to_owned(),
        section: what,
    };
    for lc in &macho.load_commands {
        match &lc.command {
            CommandVariant::DyldInfo(info) | CommandVariant::DyldInfoOnly(info) => {
                for (name, size) in [
                    ("rebase_size", info.rebase_size),
                    ("bind_size", info.bind_size),
                    ("weak_bind_size", info.weak_bind_size),
                    ("lazy_bind_size", info.lazy_bind_size),
                ] {
                    if size > 0 {
                        return Err(dynamic(format!("LC_DYLD_INFO ({name} = {size})")));
                    }
                }
            }
            CommandVariant::Dysymtab(d) => {
                for (name, count) in [("nextrel", d.nextrel), ("nlocrel", d.nlocrel)] {
                    if count > 0 {
                        return Err(dynamic(format!("LC_DYSYMTAB ({name} = {count})")));
                    }
                }
            }
            CommandVariant::DyldChainedFixups(fixups) => {
                if let Some(reason) =
                    chained_fixups(bytes, fixups.dataoff, fixups.datasize, macho.little_endian)
                        .map_err(|reason| malformed(kernel, reason.to_string()))?
                {
                    return Err(dynamic(format!("LC_DYLD_CHAINED_FIXUPS ({reason})")));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Why `LC_DYLD_CHAINED_FIXUPS` could not be read (the file is malformed).
#[derive(Debug, thiserror::Error)]
enum ChainedFixupsError {
    #[error("chained fixups lie outside the file")]
    OutsideFile,
    #[error("chained fixups truncated")]
    Truncated,
}

/// Reads `dyld_chained_fixups_header` and its `starts_in_image`: `Some` with
/// a description if any import or any page with fixups is listed.
fn chained_fixups(
    bytes: &[u8],
    dataoff: u32,
    datasize: u32,
    little: bool,
) -> Result<Option<String>, ChainedFixupsError> {
    let start = dataoff as usize;
    let blob = start
        .checked_add(datasize as usize)
        .and_then(|end| bytes.get(start..end))
        .ok_or(ChainedFixupsError::OutsideFile)?;
    let u16_at = |at: usize| -> Result<u16, ChainedFixupsError> {
        let raw: [u8; 2] = at
            .checked_add(2)
            .and_then(|end| blob.get(at..end))
            .and_then(|s| s.try_into().ok())
            .ok_or(ChainedFixupsError::Truncated)?;
        Ok(if little {
            u16::from_le_bytes(raw)
        } else {
            u16::from_be_bytes(raw)
        })
    };
    let u32_at = |at: usize| -> Result<u32, ChainedFixupsError> {
        let raw: [u8; 4] = at
            .checked_add(4)
            .and_then(|end| blob.get(at..end))
            .and_then(|s| s.try_into().ok())
            .ok_or(ChainedFixupsError::Truncated)?;
        Ok(if little {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        })
    };
    // fixups_version, starts_offset, imports_offset, symbols_offset, imports_count.
    let imports = u32_at(16)?;
    if imports > 0 {
        return Ok(Some(format!("{imports} imports")));
    }
    let starts = u32_at(4)? as usize;
    let seg_count = u32_at(starts)? as usize;
    for seg in 0..seg_count {
        let info = u32_at(starts + 4 + 4 * seg)? as usize;
        if info == 0 {
            continue;
        }
        // size u32, page_size u16, pointer_format u16, segment_offset u64,
        // max_valid_pointer u32, page_count u16, page_start[page_count] u16.
        let seg_start = starts + info;
        let page_count = u16_at(seg_start + 20)? as usize;
        for page in 0..page_count {
            if u16_at(seg_start + 22 + 2 * page)? != DYLD_CHAINED_PTR_START_NONE {
                return Ok(Some(format!("fixups in segment {seg}, page {page}")));
            }
        }
    }
    Ok(None)
}

/// The image is mapped read+execute only; writable state cannot exist.
fn check_writable(kernel: &str, sections: &[Section], text: &Section) -> Result<(), ImageError> {
    let bad = sections.iter().find(|s| {
        s.ordinal != text.ordinal && s.initprot & VM_PROT_WRITE != 0 && s.header.size > 0
    });
    match bad {
        Some(s) => Err(ImageError::WritableData {
            kernel: kernel.to_owned(),
            section: s.name.clone(),
        }),
        None => Ok(()),
    }
}

/// `(n_sect, n_value)` of the defined, non-debug `_kernel_entry`.
fn entry_symbol(macho: &MachO<'_>, kernel: &str) -> Result<Option<(usize, u64)>, ImageError> {
    let mangled = format!("_{ENTRY_SYMBOL}");
    for symbol in macho.symbols() {
        let (name, nlist) =
            symbol.map_err(|e| malformed(kernel, format!("bad symbol table: {e}")))?;
        if name == mangled && nlist.n_type & N_STAB == 0 && nlist.n_type & N_TYPE == N_SECT {
            return Ok(Some((nlist.n_sect, nlist.n_value)));
        }
    }
    Ok(None)
}
