//! Writing a report to a path the user named (`--report-json`, `--junit`,
//! `scene report --markdown/--html/--junit`).
//!
//! A temp file renamed over the target is right for a regular file (a
//! reader never sees half a report) and wrong for anything else: renamed
//! over `/dev/null` it replaced the machine's `/dev/null` with a regular
//! file (issue 27, cause 12). So the target's kind decides: a regular file
//! or nothing is replaced atomically, a character device or a FIFO (and
//! `/dev/stdout`-style links) is opened and written in place, anything
//! else is refused, by the command line before the run starts.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How a report reaches an output path, decided from what is there now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// Nothing there yet, or a regular file: a temp file beside it renamed
    /// over it. Through a symlink to a regular file, the file it resolves
    /// to is replaced and the link kept.
    Replace(PathBuf),
    /// A character device, a FIFO, or a link through `/dev` or `/proc`
    /// (`/dev/stdout`, `/proc/self/fd/1`, whatever they lead to), or a
    /// dangling symlink: opened for writing and written in place, as a
    /// shell redirection would.
    Direct,
    /// A directory, a socket, a block device: not an output.
    Refused(&'static str),
}

/// What `path` is as an output; only metadata is read (a FIFO is not
/// opened, so this never blocks).
pub fn output_target(path: &Path) -> io::Result<OutputTarget> {
    use std::os::unix::fs::FileTypeExt;
    let kind = |t: std::fs::FileType| {
        if t.is_file() {
            None
        } else if t.is_char_device() || t.is_fifo() {
            Some(OutputTarget::Direct)
        } else {
            Some(OutputTarget::Refused(crate::file_kind(t)))
        }
    };
    let lmeta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(OutputTarget::Replace(path.to_path_buf()));
        }
        other => other?,
    };
    if !lmeta.file_type().is_symlink() {
        return Ok(
            kind(lmeta.file_type()).unwrap_or_else(|| OutputTarget::Replace(path.to_path_buf()))
        );
    }
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OutputTarget::Direct),
        other => other?,
    };
    if let Some(target) = kind(meta.file_type()) {
        return Ok(target);
    }
    // A regular file behind `/dev/stdout` is the file stdout was
    // redirected to: replacing it by name would leave the shell's open
    // descriptor on the old file, so it is written through the link.
    if link_chain_passes_dev_or_proc(path) {
        return Ok(OutputTarget::Direct);
    }
    Ok(match std::fs::canonicalize(path) {
        Ok(real) => OutputTarget::Replace(real),
        Err(_) => OutputTarget::Direct,
    })
}

/// Whether `path` or any link in its symlink chain names something under
/// `/dev/` or `/proc/` (bounded like the kernel's 40 hops).
fn link_chain_passes_dev_or_proc(path: &Path) -> bool {
    let special = |p: &Path| p.starts_with("/dev") || p.starts_with("/proc");
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        if special(&current) {
            return true;
        }
        let Ok(next) = std::fs::read_link(&current) else {
            return false;
        };
        current = match current.parent() {
            Some(dir) if next.is_relative() => dir.join(next),
            _ => next,
        };
    }
    true
}

/// Writes `bytes` to `path` as [`output_target`] decides: a new regular
/// file gets exactly `mode`; a device or FIFO is written in place (a FIFO
/// waits for its reader); a refused kind is an error naming it.
pub fn write_output(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    match output_target(path)? {
        OutputTarget::Replace(real) => crate::write_atomically_with_mode(&real, bytes, mode),
        OutputTarget::Direct => write_in_place(path, bytes, mode),
        OutputTarget::Refused(kind) => Err(refused(kind)),
    }
}

fn refused(kind: &str) -> io::Error {
    io::Error::other(format!(
        "is a {kind}; an output must be a regular file, a character device or a FIFO"
    ))
}

fn write_in_place(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(mode)
        .custom_flags(libc::O_NOCTTY)
        .open(path)?;
    let t = file.metadata()?.file_type();
    if t.is_file() {
        // What a shell's `>` does; a device or FIFO has nothing to cut.
        file.set_len(0)?;
    } else if !(t.is_char_device() || t.is_fifo()) {
        return Err(refused(crate::file_kind(t)));
    }
    file.write_all(bytes)?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn regular_files_and_new_paths_are_replaced_links_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let new = tmp.path().join("new.json");
        assert_eq!(
            output_target(&new).ok(),
            Some(OutputTarget::Replace(new.clone()))
        );
        write_output(&new, b"one", 0o644).expect("write");
        write_output(&new, b"two", 0o644).expect("write");
        assert_eq!(std::fs::read(&new).expect("read"), b"two");

        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&new, &link).expect("symlink");
        write_output(&link, b"three", 0o644).expect("write");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("lstat")
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&new).expect("read"), b"three");

        let dangling = tmp.path().join("dangling.json");
        std::os::unix::fs::symlink(tmp.path().join("target.json"), &dangling).expect("symlink");
        write_output(&dangling, b"four", 0o644).expect("write");
        assert_eq!(
            std::fs::read(tmp.path().join("target.json")).expect("read"),
            b"four"
        );
    }

    #[test]
    fn directories_and_sockets_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            output_target(tmp.path()).ok(),
            Some(OutputTarget::Refused("directory"))
        );
        let sock = tmp.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        assert_eq!(
            output_target(&sock).ok(),
            Some(OutputTarget::Refused("socket"))
        );
        let e = write_output(&sock, b"x", 0o644).expect_err("a socket");
        assert!(e.to_string().contains("is a socket"), "{e}");
        assert!(
            std::fs::symlink_metadata(&sock)
                .expect("lstat")
                .file_type()
                .is_socket()
        );
    }

    #[test]
    fn dev_null_and_dev_stdout_are_written_in_place() {
        assert_eq!(
            output_target(Path::new("/dev/null")).ok(),
            Some(OutputTarget::Direct)
        );
        write_output(Path::new("/dev/null"), b"gone", 0o644).expect("write");
        // Whatever stdout is here (a pipe, a terminal, a file), the link
        // is written through, never replaced.
        assert_eq!(
            output_target(Path::new("/dev/stdout")).ok(),
            Some(OutputTarget::Direct)
        );
        assert!(
            std::fs::metadata("/dev/null")
                .expect("stat")
                .file_type()
                .is_char_device()
        );
    }
}
