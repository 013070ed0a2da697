//! Setup errors: something a command needs before any case runs is missing
//! or unusable (the compiler or linker, the runtime library, the Python
//! interpreter, the card lock directory, the cache directory). Each is one
//! `error:` line naming the tool or file and how to fix it, and exit
//! [`crate::EXIT_SETUP`] (see [`crate::error::CliError`]), so CI can tell a broken machine from a failing
//! test (1) or a bad command line (2).

use scene_harness::SetupError;
use scene_kernels::{BuildSetupError, ToolchainError};

/// How to fix a missing tool: its variable and its platform-entry field.
fn tool_hint(role: &str) -> &'static str {
    match role {
        "compiler" => {
            "install it, or name another with SCENE_CC (or `cc` of the platform entry in \
             scene-platforms.toml)"
        }
        "linker" => {
            "install it, or name another with SCENE_LD (or `ld` of the platform entry in \
             scene-platforms.toml)"
        }
        _ => "install it, or name another in the platform entry (scene-platforms.toml)",
    }
}

/// The toolchain problem of a builder that could not be made, with the fix.
pub(crate) fn toolchain_message(e: &BuildSetupError) -> String {
    match e {
        BuildSetupError::Toolchain(t @ ToolchainError::ToolNotFound { role, .. }) => {
            format!("toolchain: {t}; {}", tool_hint(role))
        }
        other => format!("toolchain: {other}"),
    }
}

/// The message of a setup error, with how to fix it where that is known.
pub(crate) fn message(e: &SetupError) -> String {
    match e {
        SetupError::Toolchain(t) => toolchain_message(t),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_says_how_to_name_another() {
        let e = BuildSetupError::Toolchain(ToolchainError::ToolNotFound {
            platform: "a2a3sim".into(),
            role: "compiler",
            path: "/nowhere/cc".into(),
        });
        let m = toolchain_message(&e);
        assert!(
            m.starts_with("toolchain: platform `a2a3sim`: compiler `/nowhere/cc` not found; "),
            "{m}"
        );
        assert!(m.contains("SCENE_CC"), "{m}");
        let e = BuildSetupError::Toolchain(ToolchainError::ToolNotFound {
            platform: "p".into(),
            role: "linker",
            path: "ld.lld".into(),
        });
        assert!(toolchain_message(&e).contains("SCENE_LD"));
    }
}
