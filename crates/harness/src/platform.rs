//! Platforms as data: what a run builds with and runs on.
//!
//! A new toolchain (clang + ld.lld, an onboard ccec entry with the vendor
//! runtime) should be a few lines of TOML, not a Rust change; so a platform
//! is a row of a [`PlatformTable`]: a [`PlatformName`], the
//! [`BuiltinPlatform`] whose scenes it runs (the names `scene.toml` lists),
//! a [`Toolchain`], and optionally a runtime library. `a2a3sim` and `a5sim`
//! are built in; a TOML file adds entries that extend them. This module
//! takes the file's path as a value (the entry point decides between
//! `SCENE_PLATFORMS_FILE` and the workspace root) and knows nothing of the
//! command line. `docs/platforms.md` documents the format.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::simpler::SimplerRoot;
pub use scene_kernels::BuiltinPlatform;
use scene_kernels::toolchain::{KERNEL_LINK_SCRIPT, MACHO_ORDER_FILE};
use scene_kernels::{Extraction, Toolchain};
use serde::Deserialize;

/// The file a workspace keeps its extra platform entries in, at its root.
pub const PLATFORMS_FILE: &str = "scene-platforms.toml";

/// The name of a platform entry (`a2a3sim`, `a2a3sim-clang`, ...): what
/// `--platform` / `SCENE_PLATFORM` select and reports and bundles record.
///
/// Plain ASCII letters, digits, `-`, `_` and `.`, starting with a letter or
/// digit, so it is safe in file names and option strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlatformName(String);

impl PlatformName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PlatformName {
    type Err = PlatformError;

    fn from_str(name: &str) -> Result<Self, PlatformError> {
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if plain {
            Ok(PlatformName(name.to_owned()))
        } else {
            Err(PlatformError::BadName {
                name: name.to_owned(),
            })
        }
    }
}

impl From<BuiltinPlatform> for PlatformName {
    fn from(p: BuiltinPlatform) -> Self {
        PlatformName(p.as_str().to_owned())
    }
}

impl fmt::Display for PlatformName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for PlatformName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for PlatformName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for PlatformName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for PlatformName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// One platform entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    name: PlatformName,
    scenes: BuiltinPlatform,
    toolchain: Toolchain,
    runtime: Option<PathBuf>,
    /// How incores build when neither they nor their scene say
    /// (`incore_build`; issue 29).
    incore_build: IncoreBuild,
    /// Device memory of a case whose scene does not say (`device_memory`,
    /// bytes); `None`: the simulator's built-in 256 MiB.
    device_memory: Option<u64>,
    /// A checkout of the original project whose toolchain its kernels get
    /// (`--simpler-root`; issue 39).
    simpler_root: Option<SimplerRoot>,
}

impl Platform {
    /// A built-in entry: the built-in toolchain for the host's object format
    /// and the built sim runtime.
    pub fn builtin(platform: BuiltinPlatform) -> Self {
        Self {
            name: platform.into(),
            scenes: platform,
            toolchain: Toolchain::builtin_for(platform, Extraction::host()),
            runtime: None,
            incore_build: IncoreBuild::Image,
            device_memory: None,
            simpler_root: None,
        }
    }

    pub fn name(&self) -> &PlatformName {
        &self.name
    }

    /// How incores build when neither they nor their scene say.
    pub fn incore_build(&self) -> IncoreBuild {
        self.incore_build
    }

    /// The platform whose scenes and cases this entry runs.
    pub fn scenes(&self) -> BuiltinPlatform {
        self.scenes
    }

    pub fn toolchain(&self) -> &Toolchain {
        &self.toolchain
    }

    /// For the entry point's overrides (`SCENE_CC`, `SCENE_LD`, the tool
    /// search path).
    pub fn toolchain_mut(&mut self) -> &mut Toolchain {
        &mut self.toolchain
    }

    /// The checkout of the original whose toolchain its kernels get
    /// (`chip_tensor` hosted incores; see [`crate::simpler`]).
    pub fn simpler_root(&self) -> Option<&SimplerRoot> {
        self.simpler_root.as_ref()
    }

    /// For the entry point's `--simpler-root` / `SCENE_SIMPLER_ROOT`.
    pub fn set_simpler_root(&mut self, root: Option<SimplerRoot>) {
        self.simpler_root = root;
    }

    /// The runtime library of this entry; `None` = the built sim runtime.
    pub fn runtime(&self) -> Option<&Path> {
        self.runtime.as_deref()
    }

    /// The entry's default device memory in bytes (`device_memory`), for
    /// scenes that do not set their own.
    pub fn device_memory(&self) -> Option<u64> {
        self.device_memory
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.name.fmt(f)
    }
}

/// Problems choosing a platform or reading a platforms file. Every problem
/// in a file names the file, and the entry and field where there is one.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    #[error("unknown platform `{name}` (known platforms: {known})")]
    Unknown { name: String, known: String },
    #[error(
        "`{name}` is not a platform name (letters, digits, `-`, `_`, `.`; starting with a letter or digit)"
    )]
    BadName { name: String },
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{}: `platforms.{name}`: {message}", path.display())]
    InvalidName {
        path: PathBuf,
        name: String,
        message: String,
    },
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    /// The entry this one starts from; default: the built-in `scenes` entry.
    extends: Option<String>,
    scenes: Option<String>,
    cc: Option<PathBuf>,
    cxx: Option<PathBuf>,
    ld: Option<PathBuf>,
    incore_flags: Option<Vec<String>>,
    aic_flags: Option<Vec<String>>,
    aiv_flags: Option<Vec<String>>,
    builtins_flags: Option<Vec<String>>,
    orch_flags: Option<Vec<String>>,
    cxx_flags: Option<Vec<String>>,
    /// Hosted incores (issue 29): their C++20 compiler and flags, and the
    /// system include directories they see (relative to the platforms
    /// file, or absolute).
    hosted_cxx: Option<PathBuf>,
    hosted_flags: Option<Vec<String>>,
    include_roots: Option<Vec<PathBuf>>,
    /// Whether hosted incores compile from a precompiled preamble
    /// (default: true).
    hosted_pch: Option<bool>,
    hosted_isa: Option<bool>,
    /// Whether hosted incores over a reviewed PTO-ISA get our
    /// bit-identical fast paths (`scene_kernels::PTO_FAST_OVERLAY`;
    /// default: true).
    hosted_fast_paths: Option<bool>,
    /// `"image"` or `"hosted"`: the default build of incores.
    incore_build: Option<String>,
    link_flags: Option<Vec<String>>,
    /// `"builtin"` or a path relative to the platforms file.
    link_script: Option<String>,
    /// `"elf"` or `"macho"`.
    extraction: Option<String>,
    /// `"sim"` or a path relative to the platforms file.
    runtime: Option<String>,
    /// Device memory for scenes that do not set `device_memory`: a size
    /// (`"1 GiB"`) or a number of bytes.
    device_memory: Option<RawSize>,
}

/// A size as a platform entry writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(i64),
    Text(String),
}

/// Every platform a run can name: the built-ins, then a file's entries.
#[derive(Clone, Debug)]
pub struct PlatformTable {
    entries: BTreeMap<PlatformName, Platform>,
}

impl Default for PlatformTable {
    fn default() -> Self {
        Self::builtin()
    }
}

impl PlatformTable {
    /// The built-in entries only.
    pub fn builtin() -> Self {
        let entries = BuiltinPlatform::ALL
            .into_iter()
            .map(|p| (PlatformName::from(p), Platform::builtin(p)))
            .collect();
        Self { entries }
    }

    /// The table of a workspace: the built-ins plus the entries of
    /// `explicit` if given (it must exist), else of
    /// `<root>/scene-platforms.toml` when that exists.
    pub fn load(root: &Path, explicit: Option<&Path>) -> Result<Self, PlatformError> {
        match explicit {
            Some(file) => Self::with_file(file),
            None => {
                let default = root.join(PLATFORMS_FILE);
                if default.is_file() {
                    Self::with_file(&default)
                } else {
                    Ok(Self::builtin())
                }
            }
        }
    }

    /// The built-ins plus the entries of `file` (TOML, `[platforms.<name>]`).
    pub fn with_file(file: &Path) -> Result<Self, PlatformError> {
        let text = std::fs::read_to_string(file).map_err(|source| PlatformError::Read {
            path: file.to_path_buf(),
            source,
        })?;
        Self::builtin().with_text(file, &text)
    }

    /// This table plus the entries of `text`, read from `file` (which names
    /// errors and anchors relative paths).
    pub fn with_text(mut self, file: &Path, text: &str) -> Result<Self, PlatformError> {
        // TOML itself rejects a table defined twice, naming the line.
        let raw: RawFile = toml::from_str(text).map_err(|e| PlatformError::Parse {
            path: file.to_path_buf(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        for name in raw.platforms.keys() {
            let parsed: PlatformName =
                name.parse()
                    .map_err(|e: PlatformError| PlatformError::InvalidName {
                        path: file.to_path_buf(),
                        name: name.clone(),
                        message: e.to_string(),
                    })?;
            if self.entries.contains_key(&parsed) {
                return Err(PlatformError::InvalidName {
                    path: file.to_path_buf(),
                    name: name.clone(),
                    message: format!("`{name}` is already defined"),
                });
            }
        }
        let loader = Loader {
            file,
            base_dir: file.parent().unwrap_or(Path::new(".")),
            raw: &raw.platforms,
        };
        for name in raw.platforms.keys() {
            loader.resolve(&mut self, name, &mut Vec::new())?;
        }
        Ok(self)
    }

    pub fn get(&self, name: &str) -> Result<&Platform, PlatformError> {
        self.entries
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, p)| p)
            .ok_or_else(|| PlatformError::Unknown {
                name: name.to_string(),
                known: self.names().join(", "),
            })
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(PlatformName::as_str).collect()
    }
}

/// Resolves a file's entries in dependency order (an entry may extend one
/// defined anywhere in the file), refusing cycles.
struct Loader<'a> {
    file: &'a Path,
    base_dir: &'a Path,
    raw: &'a BTreeMap<String, RawEntry>,
}

impl Loader<'_> {
    fn invalid(&self, name: &str, field: &'static str, message: String) -> PlatformError {
        PlatformError::Invalid {
            path: self.file.to_path_buf(),
            name: name.to_owned(),
            field,
            message,
        }
    }

    /// Adds entry `name` (and first, the file entries it extends) to
    /// `table`; `chain` holds the entries waiting on it, to refuse cycles.
    fn resolve(
        &self,
        table: &mut PlatformTable,
        name: &str,
        chain: &mut Vec<String>,
    ) -> Result<(), PlatformError> {
        let parsed: PlatformName = name.parse()?;
        if table.entries.contains_key(&parsed) {
            return Ok(());
        }
        if let Some(last) = chain.last()
            && chain.iter().any(|n| n == name)
        {
            return Err(self.invalid(
                last,
                "extends",
                format!("`{last}` extends `{name}`, which leads back to it (a cycle)"),
            ));
        }
        let entry = &self.raw[name];
        let scenes = entry
            .scenes
            .as_deref()
            .map(|s| {
                s.parse::<BuiltinPlatform>()
                    .map_err(|e| self.invalid(name, "scenes", e.to_string()))
            })
            .transpose()?;
        let base = match (entry.extends.as_deref(), scenes) {
            (Some(base), _) => {
                if self.raw.contains_key(base) {
                    chain.push(name.to_owned());
                    self.resolve(table, base, chain)?;
                    chain.pop();
                }
                table.get(base).cloned().map_err(|_| {
                    let mut known: Vec<&str> = table.names();
                    known.extend(self.raw.keys().map(String::as_str));
                    known.sort_unstable();
                    known.dedup();
                    self.invalid(
                        name,
                        "extends",
                        format!("unknown platform `{base}` (known: {})", known.join(", ")),
                    )
                })?
            }
            (None, Some(scenes)) => Platform::builtin(scenes),
            (None, None) => {
                return Err(self.invalid(
                    name,
                    "extends",
                    format!(
                        "an entry needs `extends` (a platform to start from) or `scenes` (one of: {})",
                        BuiltinPlatform::known()
                    ),
                ));
            }
        };
        let platform = self.apply(base, parsed.clone(), scenes, entry)?;
        table.entries.insert(parsed, platform);
        Ok(())
    }

    /// `base` with the fields `entry` sets replaced.
    fn apply(
        &self,
        mut p: Platform,
        name: PlatformName,
        scenes: Option<BuiltinPlatform>,
        entry: &RawEntry,
    ) -> Result<Platform, PlatformError> {
        let field_err = |field: &'static str, message: String| self.invalid(&name, field, message);
        if let Some(scenes) = scenes {
            p.scenes = scenes;
        }
        if let Some(text) = entry.extraction.as_deref() {
            let extraction = text
                .parse::<Extraction>()
                .map_err(|e| field_err("extraction", e.to_string()))?;
            if extraction != p.toolchain.extraction {
                // The format-dependent fields follow the new format; the
                // entry's own fields below still win.
                let derived = Toolchain::builtin_for(p.scenes, extraction);
                let tc = &mut p.toolchain;
                tc.incore_flags = derived.incore_flags;
                tc.builtins_flags = derived.builtins_flags;
                tc.link_flags = derived.link_flags;
                tc.link_script = derived.link_script;
                tc.builtins_source = derived.builtins_source;
                tc.hosted_flags = derived.hosted_flags;
                tc.extraction = extraction;
            }
        }
        let tc = &mut p.toolchain;
        tc.platform = name.to_string();
        let replace = |slot: &mut Vec<String>, v: &Option<Vec<String>>| {
            if let Some(v) = v {
                slot.clone_from(v);
            }
        };
        if let Some(cc) = &entry.cc {
            tc.compiler.clone_from(cc);
        }
        if let Some(cxx) = &entry.cxx {
            tc.cxx.clone_from(cxx);
        }
        if let Some(ld) = &entry.ld {
            tc.linker.clone_from(ld);
        }
        replace(&mut tc.incore_flags, &entry.incore_flags);
        replace(&mut tc.aic_flags, &entry.aic_flags);
        replace(&mut tc.aiv_flags, &entry.aiv_flags);
        replace(&mut tc.builtins_flags, &entry.builtins_flags);
        replace(&mut tc.orch_flags, &entry.orch_flags);
        replace(&mut tc.cxx_flags, &entry.cxx_flags);
        if let Some(cxx) = &entry.hosted_cxx {
            tc.hosted_cxx.clone_from(cxx);
        }
        replace(&mut tc.hosted_flags, &entry.hosted_flags);
        if let Some(roots) = &entry.include_roots {
            tc.include_roots = roots.iter().map(|r| self.base_dir.join(r)).collect();
        }
        if let Some(isa) = entry.hosted_isa {
            tc.hosted_isa = isa;
        }
        if let Some(pch) = entry.hosted_pch {
            tc.hosted_pch = pch;
        }
        if let Some(fast) = entry.hosted_fast_paths {
            tc.hosted_fast_paths = fast;
        }
        replace(&mut tc.link_flags, &entry.link_flags);
        match entry.link_script.as_deref() {
            None => {}
            Some("builtin") => {
                tc.link_script = match tc.extraction {
                    Extraction::Elf => KERNEL_LINK_SCRIPT,
                    Extraction::MachO => MACHO_ORDER_FILE,
                }
                .to_owned();
            }
            Some(script) => {
                let path = self.base_dir.join(script);
                tc.link_script = std::fs::read_to_string(&path)
                    .map_err(|e| field_err("link_script", format!("{}: {e}", path.display())))?;
            }
        }
        if let Some(build) = entry.incore_build.as_deref() {
            p.incore_build = build
                .parse()
                .map_err(|e: ParseIncoreBuildError| field_err("incore_build", e.to_string()))?;
        }
        match entry.runtime.as_deref() {
            None => {}
            Some("sim") => p.runtime = None,
            Some("") => return Err(field_err("runtime", "`sim` or a path, not empty".into())),
            Some(path) => p.runtime = Some(self.base_dir.join(path)),
        }
        match &entry.device_memory {
            None => {}
            Some(RawSize::Bytes(n)) => {
                p.device_memory =
                    Some(u64::try_from(*n).ok().filter(|&n| n > 0).ok_or_else(|| {
                        field_err("device_memory", format!("{n} bytes: must be at least 1"))
                    })?);
            }
            Some(RawSize::Text(t)) => {
                p.device_memory = Some(
                    crate::size::parse_size(t)
                        .map_err(|e| field_err("device_memory", e.to_string()))?,
                );
            }
        }
        p.name = name;
        Ok(p)
    }
}

/// How an incore is built (`build = "image" | "hosted"`), before the
/// argument convention is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncoreBuild {
    #[default]
    Image,
    Hosted,
}

/// A `build` that is neither `image` nor `hosted`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an incore build (image | hosted)")]
pub struct ParseIncoreBuildError(pub String);

impl std::str::FromStr for IncoreBuild {
    type Err = ParseIncoreBuildError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "image" => Ok(IncoreBuild::Image),
            "hosted" => Ok(IncoreBuild::Hosted),
            other => Err(ParseIncoreBuildError(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/ws/scene-platforms.toml";

    fn table(text: &str) -> Result<PlatformTable, PlatformError> {
        PlatformTable::builtin().with_text(Path::new(FILE), text)
    }

    fn err(text: &str) -> String {
        table(text).expect_err("invalid").to_string()
    }

    /// The error names the file and `platforms.<entry>.<field>`.
    fn assert_names(e: &str, entry_field: &str, detail: &str) {
        assert!(e.starts_with(FILE), "{e}");
        assert!(e.contains(&format!("`platforms.{entry_field}`")), "{e}");
        assert!(e.contains(detail), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn builtins_are_there_and_unknown_names_list_them() {
        let t = PlatformTable::builtin();
        assert_eq!(t.names(), ["a2a3sim", "a5sim"]);
        let e = t.get("a9").expect_err("unknown").to_string();
        assert!(e.contains("`a9`") && e.contains("a2a3sim, a5sim"), "{e}");
        let p = t.get("a5sim").expect("builtin");
        assert_eq!(p.scenes(), BuiltinPlatform::A5Sim);
        assert_eq!(p.runtime(), None);
        assert_eq!(p.to_string(), "a5sim");
        assert_eq!(
            p.toolchain(),
            &Toolchain::builtin("a5sim").expect("a5sim"),
            "the built-in entry is exactly the built-in toolchain"
        );
    }

    #[test]
    fn platform_names_parse_and_display() {
        let n: PlatformName = "a2a3sim-clang".parse().expect("plain");
        assert_eq!(n.to_string(), "a2a3sim-clang");
        assert_eq!(n, "a2a3sim-clang");
        assert_eq!(PlatformName::from(BuiltinPlatform::A2a3Sim), "a2a3sim");
        for bad in ["", "-x", "a b", "a/b", "ä"] {
            let e = bad.parse::<PlatformName>().expect_err(bad).to_string();
            assert!(e.contains("not a platform name"), "{e}");
        }
    }

    #[test]
    fn an_entry_extends_and_overrides() {
        let t = table(
            r#"
[platforms.a2a3sim-clang]
extends = "a2a3sim"
cc = "clang"
cxx = "clang++"
ld = "ld.lld"
link_flags = ["-static"]
aic_flags = ["-DX=1"]
cxx_flags = ["-fno-exceptions", "-std=c++20"]
runtime = "lib/librt.so"
"#,
        )
        .expect("valid");
        let p = t.get("a2a3sim-clang").expect("defined");
        assert_eq!(p.name(), &"a2a3sim-clang");
        assert_eq!(p.scenes(), BuiltinPlatform::A2a3Sim);
        let tc = p.toolchain();
        assert_eq!(tc.compiler, PathBuf::from("clang"));
        assert_eq!(tc.cxx, PathBuf::from("clang++"));
        assert_eq!(tc.linker, PathBuf::from("ld.lld"));
        assert_eq!(tc.link_flags, ["-static"]);
        assert_eq!(tc.aic_flags, ["-DX=1"]);
        assert_eq!(tc.cxx_flags, ["-fno-exceptions", "-std=c++20"]);
        assert_eq!(tc.platform, "a2a3sim-clang");
        let base = t.get("a2a3sim").expect("builtin").toolchain();
        assert_eq!(
            base.cxx_flags,
            ["-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics"]
        );
        assert_eq!(tc.incore_flags, base.incore_flags);
        assert_eq!(tc.aiv_flags, base.aiv_flags);
        assert_eq!(tc.link_script, base.link_script);
        assert_eq!(p.runtime(), Some(Path::new("/ws/lib/librt.so")));
        assert_eq!(t.names(), ["a2a3sim", "a2a3sim-clang", "a5sim"]);
    }

    #[test]
    fn extends_defaults_to_the_scenes_platform() {
        let t = table("[platforms.b]\nscenes = \"a5sim\"\ncc = \"clang\"\n").expect("valid");
        let p = t.get("b").expect("b");
        assert_eq!(p.scenes(), BuiltinPlatform::A5Sim);
        let a5 = Toolchain::builtin("a5sim").expect("a5sim");
        assert_eq!(p.toolchain().incore_flags, a5.incore_flags);
        assert_eq!(p.toolchain().compiler, PathBuf::from("clang"));
    }

    #[test]
    fn entries_extend_entries_in_any_order() {
        // `a` extends `z`, defined after it in name order.
        let t = table(
            "[platforms.a]\nextends = \"z\"\nld = \"ld.lld\"\n\
             [platforms.z]\nextends = \"a5sim\"\ncc = \"clang\"\nruntime = \"rt.so\"\n",
        )
        .expect("valid");
        let a = t.get("a").expect("a");
        assert_eq!(a.toolchain().compiler, PathBuf::from("clang"));
        assert_eq!(a.toolchain().linker, PathBuf::from("ld.lld"));
        assert_eq!(a.scenes(), BuiltinPlatform::A5Sim);
        assert_eq!(a.runtime(), Some(Path::new("/ws/rt.so")));
        assert_eq!(a.toolchain().platform, "a");
        // `runtime = "sim"` goes back to the built sim runtime.
        let t = table(
            "[platforms.a]\nextends = \"z\"\nruntime = \"sim\"\n\
             [platforms.z]\nextends = \"a5sim\"\nruntime = \"rt.so\"\n",
        )
        .expect("valid");
        assert_eq!(t.get("a").expect("a").runtime(), None);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_file_and_key() {
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\ncompiler = \"cc\"\n");
        assert!(e.starts_with(FILE), "{e}");
        assert!(e.contains("unknown field `compiler`"), "{e}");
        let e = err("[platform.x]\nextends = \"a2a3sim\"\n");
        assert!(
            e.starts_with(FILE) && e.contains("unknown field `platform`"),
            "{e}"
        );
        let e = err("[platforms.x]\nextends = 3\n");
        assert!(e.starts_with(FILE) && e.contains("extends"), "{e}");
    }

    #[test]
    fn unknown_extends_is_an_error() {
        let e = err("[platforms.x]\nextends = \"a9\"\n");
        assert_names(&e, "x.extends", "unknown platform `a9`");
        assert!(e.contains("a2a3sim, a5sim, x"), "{e}");
    }

    #[test]
    fn extends_cycles_are_errors() {
        let e = err("[platforms.x]\nextends = \"y\"\n[platforms.y]\nextends = \"x\"\n");
        assert!(
            e.contains("platforms.x.extends") || e.contains("platforms.y.extends"),
            "{e}"
        );
        assert!(e.contains("cycle"), "{e}");
        let e = err("[platforms.x]\nextends = \"x\"\n");
        assert_names(&e, "x.extends", "cycle");
    }

    #[test]
    fn an_entry_needs_extends_or_scenes() {
        let e = err("[platforms.x]\ncc = \"cc\"\n");
        assert_names(&e, "x.extends", "`extends`");
    }

    #[test]
    fn duplicate_names_are_errors() {
        let e = err("[platforms.a5sim]\nextends = \"a2a3sim\"\n");
        assert!(e.starts_with(FILE), "{e}");
        assert!(
            e.contains("`platforms.a5sim`") && e.contains("already defined"),
            "{e}"
        );
        let e = err("[platforms.x]\nextends = \"a5sim\"\n[platforms.x]\nextends = \"a5sim\"\n");
        assert!(e.starts_with(FILE), "{e}");
        assert!(e.contains("duplicate") || e.contains("redefin"), "{e}");
    }

    #[test]
    fn bad_names_are_errors() {
        let e = err("[platforms.\"a b\"]\nextends = \"a5sim\"\n");
        assert!(e.starts_with(FILE) && e.contains("`platforms.a b`"), "{e}");
        assert!(e.contains("not a platform name"), "{e}");
    }

    #[test]
    fn bad_extraction_is_an_error() {
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nextraction = \"coff\"\n");
        assert_names(&e, "x.extraction", "`coff`");
    }

    #[test]
    fn bad_scenes_is_an_error() {
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nscenes = \"x\"\n");
        assert_names(&e, "x.scenes", "unknown platform `x`");
    }

    #[test]
    fn device_memory_is_a_size_inherited_and_checked() {
        let t = table(
            "[platforms.big]\nextends = \"a2a3sim\"\ndevice_memory = \"1 GiB\"\n\
             [platforms.bigger]\nextends = \"big\"\n\
             [platforms.exact]\nextends = \"big\"\ndevice_memory = 1000\n",
        )
        .expect("table");
        assert_eq!(t.get("a2a3sim").expect("builtin").device_memory(), None);
        assert_eq!(t.get("big").expect("big").device_memory(), Some(1 << 30));
        assert_eq!(
            t.get("bigger").expect("bigger").device_memory(),
            Some(1 << 30)
        );
        assert_eq!(t.get("exact").expect("exact").device_memory(), Some(1000));
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\ndevice_memory = \"1 gig\"\n");
        assert_names(&e, "x.device_memory", "is not a size");
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\ndevice_memory = 0\n");
        assert_names(&e, "x.device_memory", "at least 1");
    }

    #[test]
    fn bad_runtime_is_an_error() {
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nruntime = \"\"\n");
        assert_names(&e, "x.runtime", "not empty");
    }

    #[test]
    fn link_scripts_are_read_relative_to_the_file() {
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nlink_script = \"missing.ld\"\n");
        assert_names(&e, "x.link_script", "/ws/missing.ld");

        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("my.ld"), "SECTIONS {}\n").expect("write");
        let file = dir.path().join(PLATFORMS_FILE);
        std::fs::write(
            &file,
            "[platforms.x]\nextends = \"a2a3sim\"\nlink_script = \"my.ld\"\n\
             [platforms.y]\nextends = \"x\"\nlink_script = \"builtin\"\n",
        )
        .expect("write");
        let t = PlatformTable::load(Path::new("/nonexistent"), Some(&file)).expect("valid");
        assert_eq!(
            t.get("x").expect("x").toolchain().link_script,
            "SECTIONS {}\n"
        );
        assert_eq!(
            t.get("y").expect("y").toolchain().link_script,
            Toolchain::builtin("a2a3sim").expect("builtin").link_script
        );
    }

    #[test]
    fn extraction_is_data_and_brings_its_defaults() {
        let t = table(
            "[platforms.m]\nextends = \"a5sim\"\nextraction = \"macho\"\n\
             [platforms.e]\nextends = \"m\"\nextraction = \"elf\"\n\
             [platforms.f]\nextends = \"m\"\nextraction = \"macho\"\nlink_flags = [\"-x\"]\n",
        )
        .expect("valid");
        let m = t.get("m").expect("m").toolchain();
        assert_eq!(m.extraction, Extraction::MachO);
        assert_eq!(
            m,
            &Toolchain {
                platform: "m".to_owned(),
                ..Toolchain::builtin_for(BuiltinPlatform::A5Sim, Extraction::MachO)
            }
        );
        assert_eq!(t.get("m").expect("m").scenes(), BuiltinPlatform::A5Sim);
        let e = t.get("e").expect("e").toolchain();
        assert_eq!(e.extraction, Extraction::Elf);
        assert_eq!(e.link_script, KERNEL_LINK_SCRIPT);
        assert_eq!(t.get("f").expect("f").toolchain().link_flags, ["-x"]);
    }

    #[test]
    fn incore_build_is_a_platform_default_of_image_or_hosted() {
        let t = table(
            "[platforms.h]\nextends = \"a2a3sim\"\nincore_build = \"hosted\"\n\
             [platforms.i]\nextends = \"h\"\nincore_build = \"image\"\n",
        )
        .expect("valid");
        assert_eq!(t.get("h").expect("h").incore_build(), IncoreBuild::Hosted);
        assert_eq!(t.get("i").expect("i").incore_build(), IncoreBuild::Image);
        assert_eq!(
            t.get("a2a3sim").expect("builtin").incore_build(),
            IncoreBuild::Image
        );
        let e = err("[platforms.x]\nextends = \"a2a3sim\"\nincore_build = \"jit\"\n");
        assert_names(&e, "x.incore_build", "`jit`");
    }

    #[test]
    fn the_workspace_file_is_found_at_the_root_unless_one_is_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let none = PlatformTable::load(dir.path(), None).expect("no file");
        assert_eq!(none.names(), ["a2a3sim", "a5sim"]);
        std::fs::write(
            dir.path().join(PLATFORMS_FILE),
            "[platforms.r]\nextends = \"a2a3sim\"\n",
        )
        .expect("write");
        let root = PlatformTable::load(dir.path(), None).expect("root file");
        assert!(root.get("r").is_ok());
        let other = dir.path().join("other.toml");
        std::fs::write(&other, "[platforms.o]\nextends = \"a5sim\"\n").expect("write");
        let given = PlatformTable::load(dir.path(), Some(&other)).expect("given file");
        assert!(given.get("o").is_ok() && given.get("r").is_err());
        let missing = dir.path().join("missing.toml");
        let e = PlatformTable::load(dir.path(), Some(&missing))
            .expect_err("missing")
            .to_string();
        assert!(
            e.contains("missing.toml") && e.contains("cannot read"),
            "{e}"
        );
    }

    #[test]
    fn toml_syntax_errors_name_the_file() {
        let e = err("[platforms.x\n");
        assert!(e.starts_with(FILE), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
