//! Mach-O `__TEXT,__text` extraction (macOS hosts).
//!
//! Same rules as ELF where Mach-O can express them: one code section, no
//! relocations against it, no writable data, `_kernel_entry` first.

use goblin::mach::MachO;
use goblin::mach::constants::{S_ATTR_PURE_INSTRUCTIONS, S_ATTR_SOME_INSTRUCTIONS};

use super::{ENTRY_SYMBOL, ImageError};

const TEXT: &str = "__TEXT,__text";
/// VM_PROT_WRITE in a segment's initial protection.
const VM_PROT_WRITE: u32 = 0x2;

fn malformed(kernel: &str, reason: impl Into<String>) -> ImageError {
    ImageError::Malformed {
        kernel: kernel.to_owned(),
        reason: reason.into(),
    }
}

pub(super) fn extract(bytes: &[u8], kernel: &str) -> Result<Vec<u8>, ImageError> {
    let macho =
        MachO::parse(bytes, 0).map_err(|e| malformed(kernel, format!("bad Mach-O: {e}")))?;
    let owned = |s: &str| s.to_owned();

    let mut text = None;
    for segment in macho.segments.iter() {
        let segname = segment.name().unwrap_or("?");
        let sections = segment
            .sections()
            .map_err(|e| malformed(kernel, format!("bad sections in `{segname}`: {e}")))?;
        for (section, data) in sections {
            let full = format!("{segname},{}", section.name().unwrap_or("?"));
            if full == TEXT {
                if section.nreloc > 0 {
                    return Err(ImageError::TextRelocations {
                        kernel: owned(kernel),
                        section: full,
                    });
                }
                if data.len() as u64 != section.size {
                    return Err(ImageError::SectionOutOfBounds {
                        kernel: owned(kernel),
                        section: full,
                        offset: u64::from(section.offset),
                        size: section.size,
                        file_len: bytes.len(),
                    });
                }
                text = Some((section.addr, data));
                continue;
            }
            let code = section.flags & (S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS) != 0;
            if code && section.size > 0 {
                return Err(ImageError::ExtraCodeSection {
                    kernel: owned(kernel),
                    section: full,
                });
            }
            if segment.initprot & VM_PROT_WRITE != 0 && section.size > 0 {
                return Err(ImageError::WritableData {
                    kernel: owned(kernel),
                    section: full,
                });
            }
        }
    }
    let (text_addr, data) = text.ok_or_else(|| ImageError::MissingText {
        kernel: owned(kernel),
        section: TEXT.to_owned(),
    })?;

    let mangled = format!("_{ENTRY_SYMBOL}");
    let mut entry = None;
    for symbol in macho.symbols() {
        let (name, nlist) =
            symbol.map_err(|e| malformed(kernel, format!("bad symbol table: {e}")))?;
        if name == mangled && nlist.n_sect != 0 {
            entry = Some(nlist.n_value);
            break;
        }
    }
    let entry = entry.ok_or_else(|| ImageError::MissingEntry {
        kernel: owned(kernel),
    })?;
    if entry != text_addr {
        return Err(ImageError::EntryNotFirst {
            kernel: owned(kernel),
            section: TEXT.to_owned(),
            entry,
            text_addr,
        });
    }
    Ok(data.to_vec())
}
