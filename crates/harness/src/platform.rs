//! Platforms as data: what a run builds with and runs on.
//!
//! A [`Platform`] is one entry of a [`PlatformTable`]: a name, the platform
//! whose scenes it runs (the names `scene.toml` lists in `platforms`), a
//! toolchain, and optionally a runtime library. `a2a3sim` and `a5sim` are
//! built in; users add entries in `scene-platforms.toml` (at the workspace
//! root, or the file the entry point names through `SCENE_PLATFORMS_FILE`)
//! without a Rust change. `docs/platforms.md` documents the format.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use scene_kernels::{Extraction, Toolchain};
use serde::Deserialize;

/// One platform entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    name: String,
    scenes: String,
    toolchain: Toolchain,
    runtime: Option<PathBuf>,
}

impl Platform {
    /// A built-in entry (`a2a3sim`, `a5sim`).
    pub fn builtin(name: &str) -> Result<Self, PlatformError> {
        let toolchain = Toolchain::builtin(name).map_err(|_| PlatformError::Unknown {
            name: name.to_string(),
            known: builtin_names().join(", "),
        })?;
        Ok(Self {
            name: name.to_string(),
            scenes: name.to_string(),
            toolchain,
            runtime: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The platform whose scenes and cases this entry runs.
    pub fn scenes(&self) -> &str {
        &self.scenes
    }

    pub fn toolchain(&self) -> &Toolchain {
        &self.toolchain
    }

    pub fn toolchain_mut(&mut self) -> &mut Toolchain {
        &mut self.toolchain
    }

    /// The runtime library of this entry; `None` = the built sim runtime.
    pub fn runtime(&self) -> Option<&Path> {
        self.runtime.as_deref()
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The names of the built-in platforms: the only names `scene.toml` may
/// list, since every entry runs the scenes of one of them.
pub fn builtin_names() -> &'static [&'static str] {
    scene_kernels::toolchain::PLATFORMS
}

/// Problems choosing a platform or reading a platforms file.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    #[error("unknown platform `{name}` (known platforms: {known})")]
    Unknown { name: String, known: String },
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{}: `platforms.{name}.{field}`: {message}", path.display())]
    Invalid {
        path: PathBuf,
        name: String,
        field: &'static str,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    platforms: BTreeMap<String, RawEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    extends: String,
    scenes: Option<String>,
    cc: Option<PathBuf>,
    ld: Option<PathBuf>,
    incore_flags: Option<Vec<String>>,
    aic_flags: Option<Vec<String>>,
    aiv_flags: Option<Vec<String>>,
    builtins_flags: Option<Vec<String>>,
    orch_flags: Option<Vec<String>>,
    link_flags: Option<Vec<String>>,
    /// Path of a linker script, relative to the platforms file.
    link_script: Option<PathBuf>,
    extraction: Option<RawExtraction>,
    /// `"sim"` or a path (relative to the platforms file).
    runtime: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawExtraction {
    Elf,
    #[serde(alias = "mach-o")]
    Macho,
}

/// Every platform a run can name: the built-ins, then a file's entries.
#[derive(Clone, Debug, Default)]
pub struct PlatformTable {
    entries: BTreeMap<String, Platform>,
}

impl PlatformTable {
    /// The built-in entries only.
    pub fn builtin() -> Self {
        let entries = builtin_names()
            .iter()
            .filter_map(|n| Platform::builtin(n).ok().map(|p| (n.to_string(), p)))
            .collect();
        Self { entries }
    }

    /// The built-ins plus the entries of `file` (TOML, `[platforms.<name>]`).
    pub fn with_file(file: &Path) -> Result<Self, PlatformError> {
        let text = std::fs::read_to_string(file).map_err(|source| PlatformError::Read {
            path: file.to_path_buf(),
            source,
        })?;
        Self::builtin().with_text(file, &text)
    }

    /// The built-ins plus the entries of `text`, read from `file`.
    pub fn with_text(mut self, file: &Path, text: &str) -> Result<Self, PlatformError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| PlatformError::Parse {
            path: file.to_path_buf(),
            message: e.to_string(),
        })?;
        let base_dir = file.parent().unwrap_or(Path::new("."));
        // Entries may extend entries defined before them, in name order.
        for (name, entry) in raw.platforms {
            let invalid = |field: &'static str, message: String| PlatformError::Invalid {
                path: file.to_path_buf(),
                name: name.clone(),
                field,
                message,
            };
            if self.entries.contains_key(&name) {
                return Err(invalid("extends", format!("`{name}` is already defined")));
            }
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(invalid(
                    "extends",
                    format!("`{name}` is not a plain platform name"),
                ));
            }
            let Some(base) = self.entries.get(&entry.extends) else {
                return Err(invalid(
                    "extends",
                    format!(
                        "unknown platform `{}` (known: {})",
                        entry.extends,
                        self.names().join(", ")
                    ),
                ));
            };
            let platform = apply(base.clone(), &name, entry, base_dir, &invalid)?;
            self.entries.insert(name, platform);
        }
        Ok(self)
    }

    pub fn get(&self, name: &str) -> Result<&Platform, PlatformError> {
        self.entries
            .get(name)
            .ok_or_else(|| PlatformError::Unknown {
                name: name.to_string(),
                known: self.names().join(", "),
            })
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }
}

/// `base` with the fields `entry` sets replaced.
fn apply(
    mut p: Platform,
    name: &str,
    entry: RawEntry,
    base_dir: &Path,
    invalid: &dyn Fn(&'static str, String) -> PlatformError,
) -> Result<Platform, PlatformError> {
    p.name = name.to_string();
    if let Some(scenes) = entry.scenes {
        if !builtin_names().contains(&scenes.as_str()) {
            return Err(invalid(
                "scenes",
                format!(
                    "`{scenes}` is not a scene platform (one of: {})",
                    builtin_names().join(", ")
                ),
            ));
        }
        p.scenes = scenes;
    }
    let tc = &mut p.toolchain;
    tc.platform = name.to_string();
    let replace = |slot: &mut Vec<String>, v: Option<Vec<String>>| {
        if let Some(v) = v {
            *slot = v;
        }
    };
    if let Some(cc) = entry.cc {
        tc.compiler = cc;
    }
    if let Some(ld) = entry.ld {
        tc.linker = ld;
    }
    replace(&mut tc.incore_flags, entry.incore_flags);
    replace(&mut tc.aic_flags, entry.aic_flags);
    replace(&mut tc.aiv_flags, entry.aiv_flags);
    replace(&mut tc.builtins_flags, entry.builtins_flags);
    replace(&mut tc.orch_flags, entry.orch_flags);
    replace(&mut tc.link_flags, entry.link_flags);
    if let Some(script) = entry.link_script {
        let path = base_dir.join(script);
        tc.link_script = std::fs::read_to_string(&path)
            .map_err(|e| invalid("link_script", format!("{}: {e}", path.display())))?;
    }
    if let Some(x) = entry.extraction {
        tc.extraction = match x {
            RawExtraction::Elf => Extraction::Elf,
            RawExtraction::Macho => Extraction::MachO,
        };
    }
    match entry.runtime.as_deref() {
        None => {}
        Some("sim") => p.runtime = None,
        Some(path) => p.runtime = Some(base_dir.join(path)),
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<PlatformTable, PlatformError> {
        PlatformTable::builtin().with_text(Path::new("/ws/scene-platforms.toml"), text)
    }

    fn err(text: &str) -> String {
        table(text).expect_err("invalid").to_string()
    }

    #[test]
    fn builtins_are_there_and_unknown_names_list_them() {
        let t = PlatformTable::builtin();
        assert_eq!(t.names(), ["a2a3sim", "a5sim"]);
        let e = t.get("a9").expect_err("unknown").to_string();
        assert!(e.contains("`a9`") && e.contains("a2a3sim, a5sim"), "{e}");
    }

    #[test]
    fn an_entry_extends_and_overrides() {
        let t = table(
            r#"
[platforms.a2a3sim-clang]
extends = "a2a3sim"
cc = "clang"
ld = "ld.lld"
link_flags = ["-pie"]
runtime = "lib/librt.so"
"#,
        )
        .expect("valid");
        let p = t.get("a2a3sim-clang").expect("defined");
        assert_eq!(p.scenes(), "a2a3sim");
        assert_eq!(p.toolchain().compiler, PathBuf::from("clang"));
        assert_eq!(p.toolchain().linker, PathBuf::from("ld.lld"));
        assert_eq!(p.toolchain().link_flags, ["-pie"]);
        assert_eq!(p.toolchain().platform, "a2a3sim-clang");
        let base = t.get("a2a3sim").expect("builtin");
        assert_eq!(p.toolchain().incore_flags, base.toolchain().incore_flags);
        assert_eq!(p.runtime(), Some(Path::new("/ws/lib/librt.so")));
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let e = err("[platforms.x]\nextends = \"a9\"\n");
        assert!(
            e.contains("scene-platforms.toml")
                && e.contains("platforms.x.extends")
                && e.contains("`a9`"),
            "{e}"
        );
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\ncompiler = \"cc\"\n");
        assert!(e.contains("unknown field `compiler`"), "{e}");
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nextraction = \"coff\"\n");
        assert!(e.contains("coff"), "{e}");
        let e = err("[platforms.a5sim]\nextends = \"a2a3sim\"\n");
        assert!(e.contains("already defined"), "{e}");
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nscenes = \"x\"\n");
        assert!(e.contains("platforms.x.scenes"), "{e}");
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nlink_script = \"missing.ld\"\n");
        assert!(
            e.contains("platforms.x.link_script") && e.contains("missing.ld"),
            "{e}"
        );
        let e = err("[platforms.x]\ncc = \"cc\"\n");
        assert!(e.contains("extends"), "{e}");
    }

    #[test]
    fn macho_extraction_is_data() {
        let t =
            table("[platforms.m]\nextends = \"a5sim\"\nextraction = \"macho\"\n").expect("valid");
        assert_eq!(
            t.get("m").expect("m").toolchain().extraction,
            Extraction::MachO
        );
        assert_eq!(t.get("m").expect("m").scenes(), "a5sim");
    }
}
