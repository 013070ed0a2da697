//! Writing a file that is then executed, without `ETXTBSY`.
//!
//! Linux refuses to `execve` a file that any process holds open for
//! writing ("Text file busy"). A multi-threaded process that writes an
//! executable itself races every other thread's `fork`: a child forked
//! while the write descriptor is open holds a copy of it until its own
//! `exec` closes it (close-on-exec acts only then). Test binaries and the
//! harness spawn processes from many threads at once, so an executable
//! written in-process fails to start now and then, depending only on what
//! ran beside it. The cure here is deterministic, not a retry: the bytes
//! reach the executable's inode through a `cp` child, so no descriptor
//! writing that inode ever exists in this process to be inherited.

use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// `cp`, by absolute path: a run with a cleared or odd `PATH` still has it
/// (POSIX systems and macOS both carry `/bin/cp`).
const CP: &str = "/bin/cp";

/// Writes `bytes` to `path` as an executable (mode 0755), replacing any
/// file there, such that this process never holds `path`'s inode open for
/// writing (see the module docs). The bytes go to a private temp file
/// beside `path` first, which a `cp` child copies.
pub fn write_executable(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut staged = tempfile::Builder::new().prefix(".exe-").tempfile_in(dir)?;
    staged.write_all(bytes.as_ref())?;
    staged.flush()?;
    copy_executable(staged.path(), path)
}

/// Copies the file `from` to `to` as an executable (mode 0755), replacing
/// any file there, through a `cp` child (see the module docs).
pub fn copy_executable(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // A fresh inode: `cp` onto an existing file would write the old inode,
    // which a running process may still be executing.
    match std::fs::remove_file(to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let out = Command::new(CP)
        .arg("--")
        .arg(from)
        .arg(to)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{CP} {} {}: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_written_executable_runs_and_replaces_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "old").unwrap();
        write_executable(&exe, b"#!/bin/sh\necho hello \"$1\"\n").unwrap();
        let mode = std::fs::metadata(&exe).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        let out = Command::new(&exe).arg("you").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello you\n");
        // Only the executable is left: the staged copy is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    /// Many threads writing and at once running executables: every start
    /// succeeds. With an in-process `std::fs::write` this fails with
    /// `ETXTBSY` within a few hundred rounds on Linux.
    #[test]
    fn executables_written_while_other_threads_spawn_always_start() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let dir = dir.path();
                s.spawn(move || {
                    for i in 0..40 {
                        let exe = dir.join(format!("t{t}-{i}"));
                        write_executable(&exe, b"#!/bin/sh\nexit 0\n").unwrap();
                        let status = Command::new(&exe).status().unwrap_or_else(|e| {
                            panic!("{}: {e}", exe.display());
                        });
                        assert!(status.success());
                    }
                });
            }
        });
    }

    #[test]
    fn a_missing_source_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = copy_executable(&dir.path().join("nope"), &dir.path().join("to")).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }
}
