//! Error types shared by the build steps and the builder.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::image::ImageError;
use crate::toolchain::ToolchainError;
use crate::unit::CoreType;

/// Which external step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    Compile,
    Link,
    CompileBuiltins,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Compile => "compile",
            Stage::Link => "link",
            Stage::CompileBuiltins => "compile the toolchain builtins",
        })
    }
}

/// Why one compile unit produced no artifact. Shared (`Arc`) by every
/// callable that uses the unit.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("source file `{}` not found (relative to root `{}`)", path.display(), root.display())]
    MissingSource { path: PathBuf, root: PathBuf },
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not run {role} `{}`: {source}", program.display())]
    Spawn {
        role: &'static str,
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to {stage} ({status}):\n{stderr}\ncommand: {command}")]
    Tool {
        stage: Stage,
        status: String,
        command: String,
        stderr: String,
    },
    #[error("cannot write `{}` in the work dir: {source}", path.display())]
    WorkDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("produced an unusable image: {0}")]
    Image(#[from] ImageError),
    /// A compile failure a kernel image rule explains, with the rule first.
    #[error("{rule}: {cause}")]
    Rule {
        rule: crate::rules::KernelRule,
        cause: Box<CompileError>,
    },
    /// The hosted C++ compiler cannot build what PTO-ISA's CPU backend
    /// needs (checked once, before the first hosted unit).
    #[error(
        "the hosted C++ compiler `{}` cannot build hosted kernels: {why}\n\
         hosted kernels need C++20 with a library that has <bit>, <span>, <concepts>, \
         std::remove_cvref_t and <thread> (PTO-ISA also `static_assert(false)` in \
         templates and _Float16): g++ >= 13, clang++ >= 17, or `zig c++` \
         (pip install ziglang; a script running `python3 -m ziglang c++ \"$@\"`); \
         name one as `hosted_cxx` in the platform entry (platforms.toml)",
        compiler.display()
    )]
    HostedToolchain { compiler: PathBuf, why: String },
    /// A shared object (hosted kernel, C++ orchestration) that defines
    /// symbols with the binding `STB_GNU_UNIQUE` (`crate::unique`).
    #[error(
        "the shared object built by `{}` defines {} symbol(s) with the binding STB_GNU_UNIQUE \
         ({}): the dynamic loader binds those by name across every library of the device \
         worker (RTLD_LOCAL does not keep them apart) and never unloads a library that has \
         them, so other scenes' kernels and later cases would share these objects; build with \
         -fno-gnu-unique (added by the harness when the compiler accepts it, as g++ does; clang \
         never emits the binding) and remove what brings them back (-fgnu-unique in the \
         platform's flags, a static C++ library such as -static-libstdc++)",
        compiler.display(),
        symbols.len(),
        symbol_list(symbols)
    )]
    GnuUnique {
        compiler: PathBuf,
        symbols: Vec<String>,
    },
    #[error("{0}")]
    Shared(Arc<CompileError>),
    /// The run was cancelled (a signal) before or while the tool ran.
    #[error("not built: the run was interrupted")]
    Cancelled,
}

impl CompileError {
    /// The tool's stderr, when the failure was a tool exiting non-zero.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            CompileError::Tool { stderr, .. } => Some(stderr),
            CompileError::Shared(inner) => inner.stderr(),
            CompileError::Rule { cause, .. } => cause.stderr(),
            _ => None,
        }
    }

    /// Whether the unit was not built because the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        match self {
            CompileError::Cancelled => true,
            CompileError::Shared(inner) => inner.is_cancelled(),
            CompileError::Rule { cause, .. } => cause.is_cancelled(),
            _ => false,
        }
    }
}

/// At most `MAX` of `symbols`, comma-separated, then how many more.
fn symbol_list(symbols: &[String]) -> String {
    const MAX: usize = 6;
    let mut text = symbols
        .iter()
        .take(MAX)
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if symbols.len() > MAX {
        text.push_str(&format!(" and {} more", symbols.len() - MAX));
    }
    text
}

/// One reason a callable could not be assembled.
#[derive(Debug, Clone)]
pub enum UnitFailure {
    Incore {
        name: String,
        func_id: u32,
        core: CoreType,
        source: PathBuf,
        error: Arc<CompileError>,
    },
    Orchestration {
        name: String,
        function: String,
        source: PathBuf,
        error: Arc<CompileError>,
    },
    DuplicateFuncId {
        func_id: u32,
        first: String,
        second: String,
    },
}

impl UnitFailure {
    pub fn error(&self) -> Option<&CompileError> {
        match self {
            UnitFailure::Incore { error, .. } | UnitFailure::Orchestration { error, .. } => {
                Some(error)
            }
            UnitFailure::DuplicateFuncId { .. } => None,
        }
    }
}

impl fmt::Display for UnitFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitFailure::Incore {
                name,
                func_id,
                core,
                source,
                error,
            } => write!(
                f,
                "kernel `{name}` (func_id {func_id}, {core}, {}) {error}",
                source.display()
            ),
            UnitFailure::Orchestration {
                name,
                function,
                source,
                error,
            } => write!(
                f,
                "orchestration `{name}` (`{function}`, {}) {error}",
                source.display()
            ),
            UnitFailure::DuplicateFuncId {
                func_id,
                first,
                second,
            } => write!(
                f,
                "kernels `{first}` and `{second}` both use func_id {func_id}"
            ),
        }
    }
}

/// A callable that could not be built, with every reason found.
#[derive(Debug, Clone, thiserror::Error)]
pub struct BuildError {
    pub label: String,
    pub failures: Vec<UnitFailure>,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.failures.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "scene `{}`: {failure}", self.label)?;
        }
        if self.failures.is_empty() {
            write!(f, "scene `{}`: build failed", self.label)?;
        }
        Ok(())
    }
}

/// Problems creating a [`crate::Builder`], before anything is compiled.
#[derive(Debug, thiserror::Error)]
pub enum BuildSetupError {
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("root `{}` is not a directory", path.display())]
    Root { path: PathBuf },
    #[error("cannot set up the work dir under `{}`: {source}", path.display())]
    WorkDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_symbol_list_is_cut_with_a_count() {
        let names: Vec<String> = (0..9).map(|i| format!("s{i}")).collect();
        assert_eq!(
            symbol_list(&names),
            "`s0`, `s1`, `s2`, `s3`, `s4`, `s5` and 3 more"
        );
        assert_eq!(symbol_list(&names[..1]), "`s0`");
    }
}
