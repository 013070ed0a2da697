//! Unit keys: a content hash of everything that can change a unit's output.
//!
//! Two units with the same key produce the same bytes, so the builder
//! compiles one and shares it. The key covers this crate's own compile logic
//! ([`crate::COMPILE_LOGIC_TOKEN`]), the toolchain table, the unit's flags,
//! defines and include dirs, and the contents of the source and of every
//! header it includes that can be found under the include dirs. System
//! headers (not found there) and the compiler binary itself are identified
//! only by the compiler's path; a persistent cache will want more.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::CompileError;
use crate::toolchain::Toolchain;
use crate::unit::{IncoreUnit, OrchUnit};

/// A 32-byte blake3 digest identifying one unit's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitKey(pub [u8; 32]);

impl UnitKey {
    pub fn to_hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }
}

impl fmt::Display for UnitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Length-prefixed fields, so that ("ab","c") and ("a","bc") differ.
struct KeyHasher(blake3::Hasher);

impl KeyHasher {
    fn new(domain: &str) -> Self {
        let mut h = KeyHasher(blake3::Hasher::new());
        h.field("domain", domain.as_bytes());
        h
    }

    fn field(&mut self, tag: &str, bytes: &[u8]) {
        self.0.update(&(tag.len() as u64).to_le_bytes());
        self.0.update(tag.as_bytes());
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn str(&mut self, tag: &str, value: &str) {
        self.field(tag, value.as_bytes());
    }

    fn path(&mut self, tag: &str, value: &Path) {
        self.field(tag, value.as_os_str().as_encoded_bytes());
    }

    fn list(&mut self, tag: &str, values: &[String]) {
        self.field(tag, &(values.len() as u64).to_le_bytes());
        for v in values {
            self.str(tag, v);
        }
    }

    fn finish(self) -> UnitKey {
        UnitKey(*self.0.finalize().as_bytes())
    }
}

fn hash_toolchain(h: &mut KeyHasher, tc: &Toolchain) {
    h.str("logic", crate::COMPILE_LOGIC_TOKEN);
    h.str("platform", &tc.platform);
    h.path("compiler", &tc.compiler);
    h.path("linker", &tc.linker);
    h.list("incore_flags", &tc.incore_flags);
    h.list("aic_flags", &tc.aic_flags);
    h.list("aiv_flags", &tc.aiv_flags);
    h.list("builtins_flags", &tc.builtins_flags);
    h.list("orch_flags", &tc.orch_flags);
    h.list("link_flags", &tc.link_flags);
    h.str("link_script", &tc.link_script);
    h.str("builtins_source", &tc.builtins_source);
    h.str("extraction", &tc.extraction.to_string());
}

fn hash_common(
    h: &mut KeyHasher,
    source: &Path,
    include_dirs: &[PathBuf],
    defines: &[(String, String)],
) {
    h.path("source", source);
    h.field("include_dirs", &(include_dirs.len() as u64).to_le_bytes());
    for dir in include_dirs {
        h.path("include_dir", dir);
    }
    h.field("defines", &(defines.len() as u64).to_le_bytes());
    for (name, value) in defines {
        h.str("define_name", name);
        h.str("define_value", value);
    }
}

/// Identity of an incore unit's compile command, without reading any file.
/// Units with equal descriptors compile identically within one build.
pub(crate) fn incore_descriptor(unit: &IncoreUnit) -> UnitKey {
    let mut h = KeyHasher::new("incore-descriptor");
    h.str("core", unit.core.as_str());
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    h.finish()
}

pub(crate) fn orch_descriptor(unit: &OrchUnit) -> UnitKey {
    let mut h = KeyHasher::new("orch-descriptor");
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    h.finish()
}

/// The full key of an incore unit: descriptor, toolchain and file contents.
pub fn incore_key(tc: &Toolchain, root: &Path, unit: &IncoreUnit) -> Result<UnitKey, CompileError> {
    let mut h = KeyHasher::new("incore");
    hash_toolchain(&mut h, tc);
    h.str("core", unit.core.as_str());
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    hash_sources(&mut h, root, &unit.source, &unit.include_dirs)?;
    Ok(h.finish())
}

pub fn orch_key(tc: &Toolchain, root: &Path, unit: &OrchUnit) -> Result<UnitKey, CompileError> {
    let mut h = KeyHasher::new("orch");
    hash_toolchain(&mut h, tc);
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    hash_sources(&mut h, root, &unit.source, &unit.include_dirs)?;
    Ok(h.finish())
}

/// Hashes the source and, transitively, every header it includes that can
/// be resolved. Conditional includes are followed regardless of the
/// condition: hashing a header too many only costs a spurious rebuild.
fn hash_sources(
    h: &mut KeyHasher,
    root: &Path,
    source: &Path,
    include_dirs: &[PathBuf],
) -> Result<(), CompileError> {
    let text = std::fs::read(root.join(source)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CompileError::MissingSource {
                path: source.to_path_buf(),
                root: root.to_path_buf(),
            }
        } else {
            CompileError::Read {
                path: source.to_path_buf(),
                source: e,
            }
        }
    })?;
    h.field("source_text", &text);

    let mut seen = BTreeSet::new();
    let mut pending = vec![(source.to_path_buf(), text)];
    while let Some((file, text)) = pending.pop() {
        for (name, quoted) in includes(&text) {
            let Some(found) = resolve_include(root, &file, &name, quoted, include_dirs) else {
                continue;
            };
            if !seen.insert(found.clone()) {
                continue;
            }
            let contents =
                std::fs::read(root.join(&found)).map_err(|source| CompileError::Read {
                    path: found.clone(),
                    source,
                })?;
            h.path("header", &found);
            h.field("header_text", &contents);
            pending.push((found, contents));
        }
    }
    Ok(())
}

fn resolve_include(
    root: &Path,
    including: &Path,
    name: &str,
    quoted: bool,
    include_dirs: &[PathBuf],
) -> Option<PathBuf> {
    let local = quoted
        .then(|| including.parent().map(|dir| dir.join(name)))
        .flatten();
    local
        .into_iter()
        .chain(include_dirs.iter().map(|dir| dir.join(name)))
        .find(|candidate| root.join(candidate).is_file())
}

/// `#include "x"` / `#include <x>` directives, as (name, quoted).
fn includes(text: &[u8]) -> Vec<(String, bool)> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let (close, quoted) = match rest.chars().next()? {
                '"' => ('"', true),
                '<' => ('>', false),
                _ => return None,
            };
            let body = &rest[1..];
            let end = body.find(close)?;
            Some((body[..end].to_owned(), quoted))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::CoreType;

    fn unit(source: &str) -> IncoreUnit {
        IncoreUnit {
            name: "k".into(),
            func_id: 0,
            core: CoreType::Aiv,
            source: source.into(),
            include_dirs: vec!["inc".into()],
            defines: vec![],
        }
    }

    #[test]
    fn parses_include_directives() {
        let found =
            includes(b"#include \"a.h\"\n  #  include <b/c.h>\n#define X\n#include MACRO\n");
        assert_eq!(
            found,
            vec![("a.h".to_owned(), true), ("b/c.h".to_owned(), false)]
        );
    }

    #[test]
    fn key_follows_header_contents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("inc")).expect("mkdir");
        std::fs::write(root.join("k.c"), "#include \"h.h\"\n").expect("write");
        std::fs::write(root.join("inc/h.h"), "#include <g.h>\n").expect("write");
        std::fs::write(root.join("inc/g.h"), "#define A 1\n").expect("write");
        let tc = Toolchain::builtin("a5sim").expect("tc");
        let before = incore_key(&tc, root, &unit("k.c")).expect("key");
        assert_eq!(before, incore_key(&tc, root, &unit("k.c")).expect("key"));
        std::fs::write(root.join("inc/g.h"), "#define A 2\n").expect("write");
        let after = incore_key(&tc, root, &unit("k.c")).expect("key");
        assert_ne!(before, after, "a nested header change must change the key");

        let other_tc = tc.clone().with_compiler("/usr/bin/gcc");
        assert_ne!(
            after,
            incore_key(&other_tc, root, &unit("k.c")).expect("key")
        );
        let mut aic = unit("k.c");
        aic.core = CoreType::Aic;
        assert_ne!(after, incore_key(&tc, root, &aic).expect("key"));
    }

    #[test]
    fn missing_source_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tc = Toolchain::builtin("a5sim").expect("tc");
        let err = incore_key(&tc, dir.path(), &unit("nope/k.c")).expect_err("missing");
        assert!(err.to_string().contains("nope/k.c"), "{err}");
    }
}
