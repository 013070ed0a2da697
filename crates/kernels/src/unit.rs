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

/// One incore kernel source, built into a `.text` image.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IncoreUnit {
    pub name: String,
    pub func_id: u32,
    pub core: CoreType,
    /// Relative to the builder's root, so `__FILE__` does not depend on where
    /// the checkout lives.
    pub source: PathBuf,
    /// Relative to the root (absolute paths are passed through), in order.
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
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
    /// Position-independent code; entered at offset 0.
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
