//! ELF `.text` extraction.
//!
//! Parses lazily (header, then section headers, then only the tables it
//! needs) so that every offset is checked against the file before goblin is
//! asked to read it; a full `Elf::parse` would also chase program headers and
//! dynamic tables this loader never uses.

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::{self, Header};
use goblin::elf::section_header::{
    SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_DYNAMIC, SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA,
    SHT_SYMTAB,
};
use goblin::elf::{Elf, SectionHeader, Symtab};
use goblin::strtab::Strtab;

use super::{ENTRY_SYMBOL, ImageError};

const TEXT: &str = ".text";
const SHT_RELR: u32 = 19;
const DT_NULL: u64 = 0;
const DT_PLTRELSZ: u64 = 2;
const DT_RELASZ: u64 = 8;
const DT_RELSZ: u64 = 18;
const DT_RELRSZ: u64 = 35;

struct Section<'a> {
    index: usize,
    name: &'a str,
    header: SectionHeader,
}

impl Section<'_> {
    fn is_nobits(&self) -> bool {
        self.header.sh_type == SHT_NOBITS
    }

    fn has_flags(&self, flags: u32) -> bool {
        self.header.sh_flags & u64::from(flags) == u64::from(flags)
    }
}

struct Parsed<'a> {
    bytes: &'a [u8],
    kernel: &'a str,
    ctx: Ctx,
    sections: Vec<Section<'a>>,
}

pub(super) fn extract(bytes: &[u8], kernel: &str) -> Result<Vec<u8>, ImageError> {
    let parsed = Parsed::new(bytes, kernel)?;
    let text = parsed.text_section()?;
    parsed.check_code_sections(text)?;
    parsed.check_relocations(text)?;
    parsed.check_dynamic_tags()?;
    parsed.check_writable()?;
    parsed.check_entry(text)?;
    parsed.data(text).map(<[u8]>::to_vec)
}

fn malformed(kernel: &str, reason: impl Into<String>) -> ImageError {
    ImageError::Malformed {
        kernel: kernel.to_owned(),
        reason: reason.into(),
    }
}

fn ctx_of(header: &Header, kernel: &str) -> Result<Ctx, ImageError> {
    let container = match header.e_ident[header::EI_CLASS] {
        header::ELFCLASS64 => Container::Big,
        header::ELFCLASS32 => Container::Little,
        other => return Err(malformed(kernel, format!("unknown ELF class {other}"))),
    };
    let endian = match header.e_ident[header::EI_DATA] {
        header::ELFDATA2LSB => Endian::Little,
        header::ELFDATA2MSB => Endian::Big,
        other => {
            return Err(malformed(
                kernel,
                format!("unknown ELF data encoding {other}"),
            ));
        }
    };
    Ok(Ctx::new(container, endian))
}

/// `offset..offset+size` if it lies inside a file of `len` bytes.
fn checked_range(offset: u64, size: u64, len: usize) -> Option<std::ops::Range<usize>> {
    let end = offset.checked_add(size)?;
    if end > len as u64 {
        return None;
    }
    Some(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

impl<'a> Parsed<'a> {
    fn new(bytes: &'a [u8], kernel: &'a str) -> Result<Self, ImageError> {
        let header = Elf::parse_header(bytes)
            .map_err(|e| malformed(kernel, format!("bad ELF header: {e}")))?;
        let ctx = ctx_of(&header, kernel)?;

        let shnum = usize::from(header.e_shnum);
        let shstrndx = usize::from(header.e_shstrndx);
        if header.e_shoff == 0 || shnum == 0 {
            // Also covers extended numbering (e_shnum == 0), which no kernel
            // is large enough to need.
            return Err(malformed(kernel, "no section header table"));
        }
        let entsize = SectionHeader::size(ctx);
        if usize::from(header.e_shentsize) != entsize {
            return Err(malformed(
                kernel,
                format!(
                    "section header size {} (expected {entsize})",
                    header.e_shentsize
                ),
            ));
        }
        if shstrndx >= shnum {
            return Err(malformed(
                kernel,
                format!("section name table index {shstrndx} >= section count {shnum}"),
            ));
        }
        let table_len = (shnum as u64) * (entsize as u64);
        if checked_range(header.e_shoff, table_len, bytes.len()).is_none() {
            return Err(malformed(
                kernel,
                format!(
                    "section header table (offset {:#x}, {shnum} entries) is outside the {}-byte file",
                    header.e_shoff,
                    bytes.len()
                ),
            ));
        }
        let offset = usize::try_from(header.e_shoff)
            .map_err(|_| malformed(kernel, "section header offset does not fit in memory"))?;
        let headers = SectionHeader::parse(bytes, offset, shnum, ctx)
            .map_err(|e| malformed(kernel, format!("bad section headers: {e}")))?;
        if headers.len() != shnum {
            return Err(malformed(kernel, "section header count mismatch"));
        }

        let names_header = &headers[shstrndx];
        let names_range = Self::file_range(bytes, kernel, names_header, "<section names>")?;
        let names = Strtab::parse(bytes, names_range.start, names_range.len(), 0)
            .map_err(|e| malformed(kernel, format!("bad section name table: {e}")))?;

        let mut sections = Vec::with_capacity(shnum);
        for (index, header) in headers.into_iter().enumerate() {
            let name = names.get_at(header.sh_name).ok_or_else(|| {
                malformed(
                    kernel,
                    format!("section {index} has an invalid name offset"),
                )
            })?;
            Self::file_range(bytes, kernel, &header, name)?;
            sections.push(Section {
                index,
                name,
                header,
            });
        }
        Ok(Parsed {
            bytes,
            kernel,
            ctx,
            sections,
        })
    }

    /// The section's bytes in the file (empty for NOBITS), bounds-checked.
    fn file_range(
        bytes: &[u8],
        kernel: &str,
        header: &SectionHeader,
        name: &str,
    ) -> Result<std::ops::Range<usize>, ImageError> {
        if header.sh_type == SHT_NOBITS {
            return Ok(0..0);
        }
        checked_range(header.sh_offset, header.sh_size, bytes.len()).ok_or_else(|| {
            ImageError::SectionOutOfBounds {
                kernel: kernel.to_owned(),
                section: name.to_owned(),
                offset: header.sh_offset,
                size: header.sh_size,
                file_len: bytes.len(),
            }
        })
    }

    fn data(&self, section: &Section<'_>) -> Result<&'a [u8], ImageError> {
        let range = Self::file_range(self.bytes, self.kernel, &section.header, section.name)?;
        self.bytes.get(range).ok_or_else(|| {
            malformed(
                self.kernel,
                format!("section `{}` unreadable", section.name),
            )
        })
    }

    fn kernel(&self) -> String {
        self.kernel.to_owned()
    }

    fn text_section(&self) -> Result<&Section<'a>, ImageError> {
        let mut texts = self.sections.iter().filter(|s| s.name == TEXT);
        let Some(text) = texts.next() else {
            // With --gc-sections a missing entry takes all code with it;
            // the missing entry is the cause worth reporting.
            if self.entry_value()?.is_none() {
                return Err(ImageError::MissingEntry {
                    kernel: self.kernel(),
                });
            }
            return Err(ImageError::MissingText {
                kernel: self.kernel(),
                section: TEXT.to_owned(),
            });
        };
        if texts.next().is_some() {
            return Err(malformed(self.kernel, "more than one `.text` section"));
        }
        if text.is_nobits() {
            return Err(malformed(self.kernel, "`.text` has no file contents"));
        }
        Ok(text)
    }

    /// Exactly one code section: everything executable must be in `.text`.
    fn check_code_sections(&self, text: &Section<'_>) -> Result<(), ImageError> {
        let extra = self.sections.iter().find(|s| {
            s.index != text.index
                && (s.name.starts_with(".text.")
                    || (s.has_flags(SHF_EXECINSTR | SHF_ALLOC) && s.header.sh_size > 0))
        });
        match extra {
            Some(s) => Err(ImageError::ExtraCodeSection {
                kernel: self.kernel(),
                section: s.name.to_owned(),
            }),
            None => Ok(()),
        }
    }

    fn check_relocations(&self, text: &Section<'_>) -> Result<(), ImageError> {
        for s in &self.sections {
            let is_reloc = matches!(s.header.sh_type, SHT_RELA | SHT_REL | SHT_RELR);
            let names_text = [".rela.text", ".rel.text"]
                .iter()
                .any(|p| s.name.starts_with(p));
            if (is_reloc && s.header.sh_info as usize == text.index && !s.has_flags(SHF_ALLOC))
                || names_text
            {
                return Err(ImageError::TextRelocations {
                    kernel: self.kernel(),
                    section: s.name.to_owned(),
                });
            }
            // Allocated relocation sections are what a dynamic loader applies.
            if is_reloc && s.has_flags(SHF_ALLOC) && s.header.sh_size > 0 {
                return Err(ImageError::DynamicRelocations {
                    kernel: self.kernel(),
                    section: s.name.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// Relocation counts can also hide in `.dynamic` with no section header.
    fn check_dynamic_tags(&self) -> Result<(), ImageError> {
        let word = if self.ctx.is_big() { 8 } else { 4 };
        for s in self
            .sections
            .iter()
            .filter(|s| s.header.sh_type == SHT_DYNAMIC)
        {
            let data = self.data(s)?;
            for entry in data.chunks_exact(2 * word) {
                let tag = self.read_word(&entry[..word]);
                let val = self.read_word(&entry[word..]);
                let name = match tag {
                    DT_NULL => break,
                    DT_RELASZ => "DT_RELASZ",
                    DT_RELSZ => "DT_RELSZ",
                    DT_PLTRELSZ => "DT_PLTRELSZ",
                    DT_RELRSZ => "DT_RELRSZ",
                    _ => continue,
                };
                if val > 0 {
                    return Err(ImageError::DynamicRelocations {
                        kernel: self.kernel(),
                        section: format!("{} ({name} = {val})", s.name),
                    });
                }
            }
        }
        Ok(())
    }

    fn read_word(&self, raw: &[u8]) -> u64 {
        let little = self.ctx.le == Endian::Little;
        match raw.len() {
            8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(raw);
                if little {
                    u64::from_le_bytes(b)
                } else {
                    u64::from_be_bytes(b)
                }
            }
            _ => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&raw[..4]);
                u64::from(if little {
                    u32::from_le_bytes(b)
                } else {
                    u32::from_be_bytes(b)
                })
            }
        }
    }

    /// The image is mapped read+execute only; writable state cannot exist.
    fn check_writable(&self) -> Result<(), ImageError> {
        let word = if self.ctx.is_big() { 8 } else { 4 };
        let bad = self.sections.iter().find(|s| {
            if !s.has_flags(SHF_ALLOC | SHF_WRITE) || s.header.sh_size == 0 {
                return false;
            }
            match s.name {
                // Linker bookkeeping the image never reads.
                ".dynamic" => false,
                // Only the three reserved entries: no PLT slots.
                ".got.plt" => s.header.sh_size > 3 * word,
                _ => true,
            }
        });
        match bad {
            Some(s) => Err(ImageError::WritableData {
                kernel: self.kernel(),
                section: s.name.to_owned(),
            }),
            None => Ok(()),
        }
    }

    fn check_entry(&self, text: &Section<'_>) -> Result<(), ImageError> {
        let entry = self
            .entry_value()?
            .ok_or_else(|| ImageError::MissingEntry {
                kernel: self.kernel(),
            })?;
        if entry != text.header.sh_addr {
            return Err(ImageError::EntryNotFirst {
                kernel: self.kernel(),
                section: TEXT.to_owned(),
                entry,
                text_addr: text.header.sh_addr,
            });
        }
        Ok(())
    }

    fn entry_value(&self) -> Result<Option<u64>, ImageError> {
        match self.symbol_value(SHT_SYMTAB, ENTRY_SYMBOL)? {
            Some(value) => Ok(Some(value)),
            None => self.symbol_value(SHT_DYNSYM, ENTRY_SYMBOL),
        }
    }

    /// Value of a defined symbol `name` in the first table of type `table`.
    fn symbol_value(&self, table: u32, name: &str) -> Result<Option<u64>, ImageError> {
        let Some(symtab) = self.sections.iter().find(|s| s.header.sh_type == table) else {
            return Ok(None);
        };
        let sym_size = goblin::elf::Sym::size(self.ctx.container);
        if symtab.header.sh_entsize != sym_size as u64 {
            return Err(malformed(
                self.kernel,
                format!(
                    "`{}` has entry size {}",
                    symtab.name, symtab.header.sh_entsize
                ),
            ));
        }
        let strings = self
            .sections
            .get(symtab.header.sh_link as usize)
            .ok_or_else(|| {
                malformed(
                    self.kernel,
                    format!("`{}` has no string table", symtab.name),
                )
            })?;
        let strings_range =
            Self::file_range(self.bytes, self.kernel, &strings.header, strings.name)?;
        let strtab = Strtab::parse(self.bytes, strings_range.start, strings_range.len(), 0)
            .map_err(|e| malformed(self.kernel, format!("bad `{}`: {e}", strings.name)))?;
        let range = Self::file_range(self.bytes, self.kernel, &symtab.header, symtab.name)?;
        let count = range.len() / sym_size;
        let syms = Symtab::parse(self.bytes, range.start, count, self.ctx)
            .map_err(|e| malformed(self.kernel, format!("bad `{}`: {e}", symtab.name)))?;
        Ok(syms
            .iter()
            .filter(|sym| sym.st_shndx != 0)
            .find(|sym| strtab.get_at(sym.st_name) == Some(name))
            .map(|sym| sym.st_value))
    }
}
