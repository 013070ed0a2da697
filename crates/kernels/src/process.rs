//! Running one external tool and turning its failure into a `CompileError`.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use scene_util::Cancel;

use crate::error::{CompileError, Stage};

/// A tool invocation: program, arguments and working directory.
#[derive(Debug, Clone)]
pub(crate) struct Invocation<'a> {
    pub role: &'static str,
    pub stage: Stage,
    pub program: &'a Path,
    pub args: Vec<OsString>,
    pub cwd: &'a Path,
}

impl Invocation<'_> {
    /// Runs to completion. Stdout/stderr are captured so that a failure can
    /// be attributed to the unit that caused it rather than interleaved with
    /// other workers' output. The tool runs in a process group of its own,
    /// registered with `cancel`: cancelling terminates it (and whatever it
    /// started), and a tool not yet started is not started
    /// ([`CompileError::Cancelled`] either way).
    pub fn run(&self, cancel: &Cancel) -> Result<(), CompileError> {
        if cancel.is_cancelled() {
            return Err(CompileError::Cancelled);
        }
        let output = cancel
            .spawn(
                Command::new(self.program)
                    .args(&self.args)
                    .current_dir(self.cwd)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
            .and_then(|child| child.wait_with_output())
            .map_err(|source| CompileError::Spawn {
                role: self.role,
                program: self.program.to_path_buf(),
                source,
            })?;
        if output.status.success() {
            return Ok(());
        }
        if cancel.is_cancelled() {
            return Err(CompileError::Cancelled);
        }
        let mut stderr = String::from_utf8_lossy(&output.stderr)
            .trim_end()
            .to_owned();
        if stderr.is_empty() {
            stderr = String::from_utf8_lossy(&output.stdout)
                .trim_end()
                .to_owned();
        }
        Err(CompileError::Tool {
            stage: self.stage,
            status: output.status.to_string(),
            command: self.display(),
            stderr,
        })
    }

    /// Shell-like rendering, for error messages only.
    pub fn display(&self) -> String {
        let mut out = format!(
            "(cd {} && {}",
            quote(self.cwd.as_os_str()),
            quote(self.program.as_os_str())
        );
        for arg in &self.args {
            out.push(' ');
            out.push_str(&quote(arg));
        }
        out.push(')');
        out
    }
}

fn quote(arg: &std::ffi::OsStr) -> String {
    let s = arg.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=+:,@".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_carries_stderr_and_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inv = Invocation {
            role: "compiler",
            stage: Stage::Compile,
            program: Path::new("sh"),
            args: vec!["-c".into(), "echo 'boom here' >&2; exit 3".into()],
            cwd: dir.path(),
        };
        let err = inv.run(&Cancel::new()).expect_err("exit 3");
        assert_eq!(err.stderr(), Some("boom here"));
        let msg = err.to_string();
        assert!(msg.starts_with("failed to compile"), "{msg}");
        assert!(
            msg.contains("'echo '\\''boom here'\\'' >&2; exit 3'"),
            "{msg}"
        );
    }

    #[test]
    fn missing_program_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inv = Invocation {
            role: "linker",
            stage: Stage::Link,
            program: Path::new("/no/such/ld"),
            args: vec![],
            cwd: dir.path(),
        };
        let msg = inv.run(&Cancel::new()).expect_err("missing").to_string();
        assert!(msg.contains("could not run linker `/no/such/ld`"), "{msg}");
    }
}
