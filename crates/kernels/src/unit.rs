//! What to build (compile units, grouped per callable) and what comes out.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Which kind of core an incore kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CoreType {
    Aic,
    Aiv,
}

impl CoreType {
    /// The value the device runtime ABI uses for this core type.
    pub fn as_abi(self) -> u32 {
        match self {
            CoreType::Aic => 0,
            CoreType::Aiv => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CoreType::Aic => "aic",
            CoreType::Aiv => "aiv",
        }
    }
}

impl fmt::Display for CoreType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown core type `{0}` (expected `aic` or `aiv`)")]
pub struct ParseCoreTypeError(pub String);

impl FromStr for CoreType {
    type Err = ParseCoreTypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "aic" => Ok(CoreType::Aic),
            "aiv" => Ok(CoreType::Aiv),
            other => Err(ParseCoreTypeError(other.to_owned())),
        }
    }
}

/// The language a source is compiled as, from its extension: `.cpp`,
/// `.cc`, `.cxx` and `.C` are C++ (compiled with [`Toolchain::cxx`] and its
/// `cxx_flags`), everything else C.
///
/// [`Toolchain::cxx`]: crate::Toolchain::cxx
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    C,
    Cxx,
}

impl Language {
    pub fn of(source: &std::path::Path) -> Language {
        match source.extension().and_then(|e| e.to_str()) {
            Some("cpp" | "cc" | "cxx" | "C") => Language::Cxx,
            _ => Language::C,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cxx => "c++",
        }
    }
}

/// How an incore kernel is built and entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum IncoreKind {
    /// Freestanding code linked into one position-independent `.text`
    /// image, entered at offset 0 (the default: what a card loads).
    #[default]
    Image,
    /// Hosted C++ (`-std=c++20 -D__CPU_SIM` by default) built into a
    /// shared object with the toolchain's hosted compiler and linked
    /// against its own C++ runtime: the device runtime `dlopen`s it and
    /// calls its entry symbol. What PTO-ISA's CPU backend needs (issue 29).
    Hosted(ArgsConvention),
}

/// How a hosted kernel's entry takes its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum ArgsConvention {
    /// `void entry(const SceneKernelArgs *)`, as an image kernel.
    #[default]
    Scene,
    /// The original project's `void kernel_entry(int64_t *args)`: each
    /// tensor argument the address of a 128-byte tensor record, scalars
    /// by value.
    ChipTensor,
}

impl ArgsConvention {
    pub fn as_str(self) -> &'static str {
        match self {
            ArgsConvention::Scene => "scene",
            ArgsConvention::ChipTensor => "chip_tensor",
        }
    }
}

impl FromStr for ArgsConvention {
    type Err = ParseArgsConventionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "scene" => Ok(ArgsConvention::Scene),
            "chip_tensor" => Ok(ArgsConvention::ChipTensor),
            other => Err(ParseArgsConventionError(other.to_owned())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown argument convention `{0}` (expected `scene` or `chip_tensor`)")]
pub struct ParseArgsConventionError(pub String);

impl IncoreKind {
    /// `image`, `hosted` or `hosted/chip_tensor`: in keys, reports and
    /// bundle manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            IncoreKind::Image => "image",
            IncoreKind::Hosted(ArgsConvention::Scene) => "hosted",
            IncoreKind::Hosted(ArgsConvention::ChipTensor) => "hosted/chip_tensor",
        }
    }

    pub fn is_hosted(self) -> bool {
        matches!(self, IncoreKind::Hosted(_))
    }
}

impl fmt::Display for IncoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IncoreKind {
    type Err = ParseArgsConventionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "image" => Ok(IncoreKind::Image),
            "hosted" => Ok(IncoreKind::Hosted(ArgsConvention::Scene)),
            other => match other.strip_prefix("hosted/") {
                Some(args) => args.parse().map(IncoreKind::Hosted),
                None => Err(ParseArgsConventionError(other.to_owned())),
            },
        }
    }
}

/// One incore kernel source, built into a `.text` image (or, hosted, a
/// shared object: [`IncoreKind`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IncoreUnit {
    pub name: String,
    pub func_id: u32,
    pub core: CoreType,
    pub kind: IncoreKind,
    /// Relative to the builder's root, so `__FILE__` does not depend on where
    /// the checkout lives.
    pub source: PathBuf,
    /// Relative to the root (absolute paths are passed through), in order.
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
    /// Flags of a hosted incore after the toolchain's hosted and core
    /// flags (the original project's language standard for its kernels,
    /// issue 39); in the unit's key when not empty. Image incores take
    /// none.
    pub flags: Vec<String>,
}

/// The orchestration source, built into a host shared object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrchUnit {
    pub name: String,
    pub source: PathBuf,
    /// Entry symbol looked up in the shared object.
    pub function: String,
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
    /// Compiler flags of this unit alone, after the toolchain's (e.g. the
    /// language standard of the original's orchestration API); in its key
    /// only when present.
    pub flags: Vec<String>,
}

/// A host program: a C source linked with a driver (C text the caller
/// supplies, e.g. the harness's host-step driver) into one executable for
/// the host, with the toolchain's C compiler. Built by
/// [`crate::Builder::build_all_with_hosts`] like any other unit: keyed by
/// the source, its include closure, the driver's text, the compiler's
/// identity, the flags and the platform; cached, locked and budgeted alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostUnit {
    /// Shown in reports and errors (`<label>/<name>`), typically the scene.
    pub label: String,
    /// Typically `<source file>:<function>`.
    pub name: String,
    /// Relative to the builder's root.
    pub source: PathBuf,
    /// The driver's C text, compiled and linked with the source.
    pub driver: std::sync::Arc<str>,
    /// Relative to the root (absolute paths are passed through), in order.
    pub include_dirs: Vec<PathBuf>,
    /// E.g. the entry function the driver calls.
    pub defines: Vec<(String, String)>,
}

/// One callable: an orchestration plus the incore kernels it submits to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallableSpec {
    /// Shown in errors, typically the scene name.
    pub label: String,
    pub orchestration: OrchUnit,
    pub incores: Vec<IncoreUnit>,
}

/// A linked, validated incore image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncoreImage {
    pub name: String,
    pub func_id: u32,
    pub core: CoreType,
    pub kind: IncoreKind,
    /// [`IncoreKind::Image`]: position-independent code, entered at offset
    /// 0. [`IncoreKind::Hosted`]: the shared object's bytes.
    pub text: Vec<u8>,
}

/// Everything a device needs to run one callable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChipCallable {
    pub label: String,
    pub orch_so: Vec<u8>,
    pub orch_symbol: String,
    /// Sorted by `func_id`, so the bytes do not depend on build order.
    pub incores: Vec<IncoreImage>,
}

impl ChipCallable {
    pub fn incore(&self, func_id: u32) -> Option<&IncoreImage> {
        self.incores
            .binary_search_by_key(&func_id, |i| i.func_id)
            .ok()
            .and_then(|idx| self.incores.get(idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_follows_the_extension() {
        use std::path::Path;
        for cxx in ["k.cpp", "a/k.cc", "k.cxx", "k.C"] {
            assert_eq!(Language::of(Path::new(cxx)), Language::Cxx, "{cxx}");
        }
        for c in ["k.c", "k", "k.cpp.c", "k.h"] {
            assert_eq!(Language::of(Path::new(c)), Language::C, "{c}");
        }
    }

    #[test]
    fn incore_kinds_round_trip() {
        for kind in [
            IncoreKind::Image,
            IncoreKind::Hosted(ArgsConvention::Scene),
            IncoreKind::Hosted(ArgsConvention::ChipTensor),
        ] {
            assert_eq!(kind.as_str().parse::<IncoreKind>(), Ok(kind));
        }
        assert!("hosted/cuda".parse::<IncoreKind>().is_err());
        assert_eq!(IncoreKind::default(), IncoreKind::Image);
    }

    #[test]
    fn core_type_round_trips() {
        for core in [CoreType::Aic, CoreType::Aiv] {
            assert_eq!(core.to_string().parse::<CoreType>(), Ok(core));
        }
        assert_eq!(CoreType::Aic.as_abi(), 0);
        assert_eq!(CoreType::Aiv.as_abi(), 1);
        let err = "AIV".parse::<CoreType>().expect_err("case matters");
        assert!(err.to_string().contains("`AIV`"));
    }
}
