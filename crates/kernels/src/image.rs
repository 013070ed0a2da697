//! Taking the single code image out of a linked kernel, the way a device
//! loader would: every header is bounds-checked, and anything the image would
//! need beyond "copy these bytes and jump to offset 0" is rejected.

mod elf;
mod macho;
mod object;

pub use object::check_object;

/// Name of the symbol that must sit at offset 0 of the image.
pub const ENTRY_SYMBOL: &str = "kernel_entry";

/// Why a linked kernel cannot be used as a device image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("kernel `{kernel}`: not a valid object file: {reason}")]
    Malformed { kernel: String, reason: String },
    #[error("kernel `{kernel}`: unsupported object format ({format})")]
    UnsupportedFormat { kernel: String, format: String },
    #[error(
        "kernel `{kernel}`: section `{section}` (offset {offset:#x}, size {size:#x}) \
         lies outside the {file_len}-byte file"
    )]
    SectionOutOfBounds {
        kernel: String,
        section: String,
        offset: u64,
        size: u64,
        file_len: usize,
    },
    #[error("kernel `{kernel}`: no `{section}` section")]
    MissingText { kernel: String, section: String },
    #[error(
        "kernel `{kernel}`: extra code section `{section}`; all code must be folded into \
         the single text section"
    )]
    ExtraCodeSection { kernel: String, section: String },
    #[error(
        "kernel `{kernel}`: relocation section `{section}` applies to the text section; \
         the image would need patching at load time"
    )]
    TextRelocations { kernel: String, section: String },
    #[error(
        "kernel `{kernel}`: dynamic relocations in `{section}`: absolute addresses survived \
         the link (a table of pointers?)"
    )]
    DynamicRelocations { kernel: String, section: String },
    #[error(
        "kernel `{kernel}` has writable data in section `{section}` \
         (writable globals/statics are not allowed)"
    )]
    WritableData { kernel: String, section: String },
    /// A kernel image rule broken (C++ runtime, static constructors).
    #[error("kernel `{kernel}`: {rule}: {detail}")]
    Rule {
        kernel: String,
        rule: crate::rules::KernelRule,
        detail: String,
    },
    #[error("kernel `{kernel}`: no `{ENTRY_SYMBOL}` symbol (define it with SCENE_KERNEL_ENTRY)")]
    MissingEntry { kernel: String },
    #[error(
        "kernel `{kernel}`: `{ENTRY_SYMBOL}` is at {entry:#x} but `{section}` starts at \
         {text_addr:#x}; the entry must be the first byte of the image"
    )]
    EntryNotFirst {
        kernel: String,
        section: String,
        entry: u64,
        text_addr: u64,
    },
}

impl ImageError {
    /// The section the error is about, if it is about one.
    pub fn section(&self) -> Option<&str> {
        match self {
            ImageError::SectionOutOfBounds { section, .. }
            | ImageError::MissingText { section, .. }
            | ImageError::ExtraCodeSection { section, .. }
            | ImageError::TextRelocations { section, .. }
            | ImageError::DynamicRelocations { section, .. }
            | ImageError::WritableData { section, .. }
            | ImageError::EntryNotFirst { section, .. } => Some(section),
            ImageError::Malformed { .. }
            | ImageError::UnsupportedFormat { .. }
            | ImageError::MissingEntry { .. }
            | ImageError::Rule { .. } => None,
        }
    }
}

/// Validates a linked kernel (ELF or Mach-O) and returns its text bytes.
///
/// `kernel` only labels errors. Never panics, whatever `bytes` holds.
pub fn extract_text_image(bytes: &[u8], kernel: &str) -> Result<Vec<u8>, ImageError> {
    match bytes.get(..4) {
        Some(b"\x7fELF") => elf::extract(bytes, kernel),
        Some([0xcf, 0xfa, 0xed, 0xfe] | [0xce, 0xfa, 0xed, 0xfe])
        | Some([0xfe, 0xed, 0xfa, 0xcf] | [0xfe, 0xed, 0xfa, 0xce]) => {
            macho::extract(bytes, kernel)
        }
        Some([0xca, 0xfe, 0xba, 0xbe]) => Err(ImageError::UnsupportedFormat {
            kernel: kernel.to_owned(),
            format: "fat Mach-O; link for a single architecture".to_owned(),
        }),
        _ => Err(ImageError::Malformed {
            kernel: kernel.to_owned(),
            reason: format!("unrecognised magic in a {}-byte file", bytes.len()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for input in [&b""[..], b"\x7f", b"\x7fELF", b"hello world, not an object"] {
            let err = extract_text_image(input, "k").expect_err("garbage");
            assert!(matches!(err, ImageError::Malformed { .. }), "{err:?}");
            assert!(err.to_string().contains("kernel `k`"), "{err}");
        }
    }

    #[test]
    fn truncated_macho_headers_are_errors() {
        let mut bytes = vec![0xcf, 0xfa, 0xed, 0xfe];
        bytes.extend_from_slice(&[0xff; 40]);
        assert!(extract_text_image(&bytes, "k").is_err());
        assert!(matches!(
            extract_text_image(&[0xca, 0xfe, 0xba, 0xbe, 0, 0], "k"),
            Err(ImageError::UnsupportedFormat { .. })
        ));
    }
}
