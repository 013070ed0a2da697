//! Platforms: what a run builds with and runs on. (Placeholder until the
//! platform table lands.)

use std::fmt;

use scene_kernels::{Toolchain, ToolchainError};

/// Names of the built-in platforms.
pub const BUILTIN: &[&str] = &["a2a3sim", "a5sim"];

/// One platform entry: its name, the platform whose scenes it runs, and
/// its toolchain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    name: String,
    scenes: String,
    toolchain: Toolchain,
}

impl Platform {
    pub fn builtin(name: &str) -> Result<Self, ToolchainError> {
        Ok(Self {
            name: name.to_string(),
            scenes: name.to_string(),
            toolchain: Toolchain::builtin(name)?,
        })
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn scenes(&self) -> &str {
        &self.scenes
    }
    pub fn toolchain(&self) -> &Toolchain {
        &self.toolchain
    }
    pub fn toolchain_mut(&mut self) -> &mut Toolchain {
        &mut self.toolchain
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}
