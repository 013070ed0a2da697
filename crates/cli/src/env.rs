//! The environment, read once: the only place in the harness that calls
//! `std::env::var`. Entry points capture an [`Environment`]; with the
//! command line it is the low-level half of the configuration
//! (`crate::lowargs`), which `crate::hiargs` resolves into one
//! `RunConfig`; the engine below takes values only.
//!
//! Rules, the same for every variable: an empty value means unset; a flag
//! wins over its variable; a bad value is a usage error naming the
//! variable.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::error::UsageError;

/// Every environment variable the harness reads (README lists them too).
pub const VARIABLES: &[&str] = &[
    "SCENE_PLATFORM",
    "SCENE_PLATFORMS_FILE",
    "SCENE_DEVICES",
    "TASK_DEVICE",
    "SCENE_LOCK_DIR",
    "SCENE_CC",
    "SCENE_CXX",
    "SCENE_LD",
    "SCENE_HOSTED_CXX",
    "SCENE_HOSTED_FAST_PATHS",
    "SCENE_PTO_ISA_ROOT",
    "SCENE_SIMPLER_ROOT",
    "SCENE_RUNTIME_LIB",
    "SCENE_RUNTIME_OPTIONS",
    "SCENE_COMPILE_WORKERS",
    "SCENE_GOLDEN_THREADS",
    "SCENE_CACHE_DIR",
    "SCENE_CACHE_REMOTE",
    "SCENE_CACHE_REMOTE_READONLY",
    "SCENE_CACHE_REMOTE_TIMEOUT",
    // An s3:// remote's endpoint, region and credentials.
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SCENE_SCENES_DIR",
    "SCENE_ROOT",
    "SCENE_FAILURE_DUMP_DIR",
    "SCENE_NO_TESTS",
    "SCENE_MAX_CASE_BYTES",
    "SCENE_COMM_TIMEOUT",
    // Python goldens and fixtures: the interpreter, the per-case deadline.
    "SCENE_PYTHON",
    "SCENE_GOLDEN_TIMEOUT",
    // `auto` (default) or `never`: managed environments for Python goldens.
    "SCENE_PYTHON_PROVISION",
    // Any non-empty value: no golden cache (`--no-golden-cache`).
    "SCENE_NO_GOLDEN_CACHE",
    // No colour unless `--color always` (https://no-color.org).
    "NO_COLOR",
    // Where bare tool names (`cc`, `ld`) are found.
    "PATH",
    // GitHub Actions' job summary file (`scene report --github-summary`).
    "GITHUB_STEP_SUMMARY",
];

/// The values of [`VARIABLES`] at one moment; empty values are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    vars: Vec<(&'static str, OsString)>,
}

impl Environment {
    /// Reads the process environment.
    pub fn capture() -> Self {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// An environment from a lookup function (tests, embedding).
    pub fn from_lookup(mut lookup: impl FnMut(&str) -> Option<OsString>) -> Self {
        let vars = VARIABLES
            .iter()
            .filter_map(|&name| {
                let value = lookup(name).filter(|v| !v.is_empty())?;
                Some((name, value))
            })
            .collect();
        Self { vars }
    }

    /// An environment of exactly these variables (tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::from_lookup(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    pub(crate) fn os(&self, name: &str) -> Option<&OsString> {
        self.vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// This environment with `name` set to `value` (a flag standing in for
    /// its variable); `None` leaves it as it is.
    pub fn with_value(mut self, name: &'static str, value: Option<&str>) -> Self {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.vars.retain(|(n, _)| *n != name);
            self.vars.push((name, OsString::from(v)));
        }
        self
    }

    /// A variable as a path.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.os(name).map(PathBuf::from)
    }

    /// A variable as text; a value that is not UTF-8 is a usage error.
    pub fn text(&self, name: &str) -> Result<Option<String>, UsageError> {
        self.os(name)
            .map(|v| {
                v.to_str()
                    .map(str::to_owned)
                    .ok_or_else(|| UsageError::NotUtf8 {
                        name: name.to_owned(),
                    })
            })
            .transpose()
    }

    /// Whether a variable is set (to anything but the empty string).
    pub fn is_set(&self, name: &str) -> bool {
        self.os(name).is_some()
    }

    /// A variable parsed by `parse`; an error names the variable.
    pub(crate) fn parsed<T, E>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, UsageError>
    where
        E: Into<crate::error::Source>,
    {
        self.text(name)?
            .map(|v| {
                parse(&v).map_err(|e| UsageError::Variable {
                    name: name.to_owned(),
                    source: e.into(),
                })
            })
            .transpose()
    }
}
