//! Checks of a compiled incore object, before it is linked: the kernel
//! image rules ([`crate::rules`]) an object shows it breaks by its sections
//! (static constructors) or its undefined symbols (the C++ runtime).

use super::ImageError;
use crate::rules::{KernelRule, is_constructor_section, rule_of_undefined};

/// Checks a compiled incore object (ELF or Mach-O relocatable) against the
/// rules above. Objects goblin cannot parse pass: the link and the image
/// extraction still check them.
pub fn check_object(bytes: &[u8], kernel: &str) -> Result<(), ImageError> {
    let parsed = match bytes.get(..4) {
        Some(b"\x7fELF") => goblin::elf::Elf::parse(bytes)
            .ok()
            .map(|elf| elf_names(&elf)),
        Some([0xcf, 0xfa, 0xed, 0xfe]) => goblin::mach::MachO::parse(bytes, 0)
            .ok()
            .map(|macho| macho_names(&macho)),
        _ => None,
    };
    let Some((sections, undefined)) = parsed else {
        return Ok(());
    };
    if let Some(section) = sections.iter().find(|s| is_constructor_section(s)) {
        return Err(ImageError::Rule {
            kernel: kernel.to_owned(),
            rule: KernelRule::StaticConstructors,
            detail: format!("the object has a `{section}` section"),
        });
    }
    let mut broken: Vec<(KernelRule, Vec<String>)> = Vec::new();
    for symbol in undefined {
        let Some(rule) = rule_of_undefined(&symbol) else {
            continue;
        };
        match broken.iter_mut().find(|(r, _)| *r == rule) {
            Some((_, names)) => names.push(symbol),
            None => broken.push((rule, vec![symbol])),
        }
    }
    match broken.into_iter().next() {
        None => Ok(()),
        Some((rule, mut names)) => {
            names.sort();
            names.dedup();
            let list = names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ");
            Err(ImageError::Rule {
                kernel: kernel.to_owned(),
                rule,
                detail: format!("the object calls undefined {list}"),
            })
        }
    }
}

fn elf_names(elf: &goblin::elf::Elf<'_>) -> (Vec<String>, Vec<String>) {
    let sections = elf
        .section_headers
        .iter()
        .filter(|h| h.sh_size > 0)
        .filter_map(|h| elf.shdr_strtab.get_at(h.sh_name))
        .map(str::to_owned)
        .collect();
    let undefined = elf
        .syms
        .iter()
        .filter(|s| s.st_shndx == 0 && s.st_name != 0)
        .filter_map(|s| elf.strtab.get_at(s.st_name))
        .map(str::to_owned)
        .collect();
    (sections, undefined)
}

fn macho_names(macho: &goblin::mach::MachO<'_>) -> (Vec<String>, Vec<String>) {
    let mut sections = Vec::new();
    for segment in &macho.segments {
        if let Ok(list) = segment.sections() {
            for (section, _) in list {
                if section.size > 0
                    && let Ok(name) = section.name()
                {
                    sections.push(name.to_owned());
                }
            }
        }
    }
    let undefined = macho
        .symbols()
        .filter_map(Result::ok)
        .filter(|(_, nlist)| nlist.is_undefined())
        // Mach-O C symbols carry a leading underscore.
        .map(|(name, _)| name.strip_prefix('_').unwrap_or(name).to_owned())
        .collect();
    (sections, undefined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_objects_pass_to_the_later_checks() {
        assert!(check_object(b"not an object", "k").is_ok());
    }
}
