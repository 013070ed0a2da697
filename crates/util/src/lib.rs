//! Small file-system and hashing primitives shared by the harness crates,
//! each defined once: atomic file writes, atomic directory replacement,
//! reading a file that must be a regular file of a known size, the "plain
//! file name" check, length-prefixed hashing, and writing an executable
//! that can be started at once (`exe`).
//!
//! They live in their own crate because both `scene-kernels` (the cache)
//! and `scene-harness` (reports, bundles, dumps) need exactly the same
//! guarantees, and neither may depend on the other's domain.

use std::io::{self, Write};
use std::path::{Component, Path};

pub mod cancel;
pub use cancel::Cancel;
pub mod exe;
pub use exe::{copy_executable, write_executable};
pub mod output;
pub use output::{OutputTarget, output_target, write_output};

/// `4.3 GiB`, `512 B`: a size for a message or a listing.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Writes `bytes` to `path` through a temp file in the same directory and a
/// rename, creating the directory if needed: a reader sees the old file,
/// or the whole new one, never a part.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_inner(path, bytes, None)
}

/// [`write_atomically`] unless `path` already holds exactly `bytes`: for
/// files generated from constants (headers, Python packages) that every
/// run makes sure of and that are mostly there already. A damaged copy is
/// rewritten.
pub fn write_atomically_if_changed(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if std::fs::read(path).is_ok_and(|b| b == bytes) {
        return Ok(());
    }
    write_atomically(path, bytes)
}

/// [`write_atomically`], the file getting exactly `mode` (e.g. `0o644`
/// for a report others read), whatever the umask: the temp file it is
/// written through is created 0600.
pub fn write_atomically_with_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_atomically_inner(path, bytes, Some(mode))
}

fn write_atomically_inner(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if let Some(mode) = mode {
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Puts the fully written directory `new` at `dest`, replacing whatever
/// directory is there: the old one is renamed aside (`rename(2)` cannot
/// replace a non-empty directory), the new one renamed in, the old one
/// removed. If the second rename fails the old directory is put back, so
/// `dest` is never left empty by a failure here. Another process swapping
/// the same `dest` concurrently can slip in between; then the move is
/// retried and the last one wins.
pub fn replace_dir(new: &Path, dest: &Path) -> io::Result<()> {
    let mut aside = dest.as_os_str().to_os_string();
    aside.push(format!(".old-{}", std::process::id()));
    let aside = std::path::PathBuf::from(aside);
    for attempt in 1..=3 {
        remove_dir_if_exists(&aside)?;
        let moved_old = match std::fs::rename(dest, &aside) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        match std::fs::rename(new, dest) {
            Ok(()) => {
                if moved_old {
                    remove_dir_if_exists(&aside)?;
                }
                return Ok(());
            }
            Err(_) if attempt < 3 && dest.exists() && !moved_old => continue,
            Err(e) => {
                if moved_old {
                    let _ = std::fs::rename(&aside, dest);
                }
                return Err(e);
            }
        }
    }
    Err(io::Error::other(format!(
        "{}: replaced by another process three times in a row",
        dest.display()
    )))
}

/// Removes a directory tree; a missing one is not an error.
pub fn remove_dir_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Why [`read_regular_file`] refused or failed to read a file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: is a symlink, not a regular file", path.display())]
    Symlink { path: std::path::PathBuf },
    #[error("{}: is a {kind}, not a regular file", path.display())]
    NotRegular {
        path: std::path::PathBuf,
        kind: &'static str,
    },
    #[error("{}: is {found} bytes, {expected} recorded", path.display())]
    SizeMismatch {
        path: std::path::PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("{}: is {found} bytes, more than the limit of {max}", path.display())]
    TooLarge {
        path: std::path::PathBuf,
        found: u64,
        max: u64,
    },
}

impl ReadError {
    /// Why, without the path: for a caller whose message names the file
    /// already.
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io { source, .. } => source.to_string(),
            ReadError::Symlink { .. } => "is a symlink, not a regular file".to_string(),
            ReadError::NotRegular { kind, .. } => format!("is a {kind}, not a regular file"),
            ReadError::SizeMismatch {
                expected, found, ..
            } => format!("is {found} bytes, {expected} recorded"),
            ReadError::TooLarge { found, max, .. } => {
                format!("is {found} bytes, more than the limit of {max}")
            }
        }
    }

    /// The file does not exist (as opposed to existing and being refused).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a non-regular file is, for messages.
pub(crate) fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symlink"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The contents of `path`, which must be a regular file (not a symlink,
/// FIFO, device, socket or directory) of `expected_len` bytes when given,
/// and at most `max_len` bytes in any case.
///
/// Files that are data from disk (bundles, the kernel cache) go through
/// here, so that a symlink to `/dev/zero` cannot grow the process without
/// bound and a FIFO cannot hang it: the path is checked with `lstat`
/// first (a device is never even opened), then opened with `O_NOFOLLOW |
/// O_NONBLOCK` (a symlink swapped in meanwhile fails the open, a FIFO
/// does not wait for a writer), checked again with `fstat` on the open
/// file, and its size compared before a byte is read. At most the checked
/// size is read; a file that changes size meanwhile is a mismatch.
pub fn read_regular_file(
    path: &Path,
    expected_len: Option<u64>,
    max_len: u64,
) -> Result<Vec<u8>, ReadError> {
    read_checked(path, expected_len, max_len, false)
}

/// The contents of `path`, a file a user named (a report given to `scene
/// report`, a replay dump's manifest, task and `.npy` files), at most
/// `max_len` bytes.
///
/// As [`read_regular_file`], except that a symlink is followed: users
/// link reports and dumps around, and the link is theirs. What it leads to
/// must still be a regular file: a FIFO (which would hang the read) or a
/// device such as `/dev/zero` (which would read until the OOM killer) is
/// refused after `stat`, before it is opened, and again after `fstat` on
/// the open file, which is opened `O_NONBLOCK` in case it was swapped.
pub fn read_input_file(path: &Path, max_len: u64) -> Result<Vec<u8>, ReadError> {
    read_checked(path, None, max_len, true)
}

fn read_checked(
    path: &Path,
    expected_len: Option<u64>,
    max_len: u64,
    follow: bool,
) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let p = || path.to_path_buf();
    let io_err = |source| ReadError::Io { path: p(), source };
    let refuse = |t: std::fs::FileType| {
        if t.is_symlink() {
            ReadError::Symlink { path: p() }
        } else {
            ReadError::NotRegular {
                path: p(),
                kind: file_kind(t),
            }
        }
    };
    let lmeta = match follow {
        true => std::fs::metadata(path),
        false => std::fs::symlink_metadata(path),
    }
    .map_err(io_err)?;
    if !lmeta.file_type().is_file() {
        return Err(refuse(lmeta.file_type()));
    }
    let flags = match follow {
        true => libc::O_NONBLOCK,
        false => libc::O_NOFOLLOW | libc::O_NONBLOCK,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ReadError::Symlink { path: p() }
            } else {
                io_err(e)
            }
        })?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.file_type().is_file() {
        return Err(refuse(meta.file_type()));
    }
    let len = meta.len();
    if let Some(expected) = expected_len.filter(|&e| e != len) {
        return Err(ReadError::SizeMismatch {
            path: p(),
            expected,
            found: len,
        });
    }
    if len > max_len {
        return Err(ReadError::TooLarge {
            path: p(),
            found: len,
            max: max_len,
        });
    }
    let cap = usize::try_from(len).map_err(|_| ReadError::TooLarge {
        path: p(),
        found: len,
        max: max_len,
    })?;
    let mut bytes = Vec::with_capacity(cap);
    // One byte more than checked, to notice a file that grew meanwhile.
    (&mut file)
        .take(len.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 != len {
        return Err(ReadError::SizeMismatch {
            path: p(),
            expected: len,
            found: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Sets the mtime of `path`, which must be a regular file, to now (a cache
/// entry's last use). Opened with `O_NOFOLLOW | O_NONBLOCK`: a symlink is
/// an error, never followed, and a FIFO does not wait.
pub fn touch_regular_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    f.set_modified(std::time::SystemTime::now())
}

/// Why a name cannot be used as a file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("empty name")]
    Empty,
    #[error("`{0}` is a special directory name")]
    Special(String),
    #[error("`{0}` contains a path separator or NUL")]
    Separator(String),
}

/// `name` if it is one plain path component: not empty, not `.` or `..`, no
/// `/`, `\` or NUL. Scene, case and tensor names become file names in
/// dumps and bundles through this check only.
pub fn check_file_name(name: &str) -> Result<&str, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name == "." || name == ".." {
        return Err(NameError::Special(name.to_string()));
    }
    if name.contains(['/', '\\', '\0'])
        || !matches!(
            Path::new(name).components().collect::<Vec<_>>()[..],
            [Component::Normal(_)]
        )
    {
        return Err(NameError::Separator(name.to_string()));
    }
    Ok(name)
}

/// blake3 over named, length-prefixed fields, so that no two different
/// field lists hash alike (`("ab", "c")` and `("a", "bc")` differ), with a
/// domain first so hashes of different kinds never collide.
#[derive(Debug, Clone)]
pub struct FieldHasher(blake3::Hasher);

impl FieldHasher {
    pub fn new(domain: &str) -> Self {
        let mut h = FieldHasher(blake3::Hasher::new());
        h.field("domain", domain.as_bytes());
        h
    }

    pub fn field(&mut self, tag: &str, bytes: &[u8]) -> &mut Self {
        for part in [tag.as_bytes(), bytes] {
            self.0.update(&(part.len() as u64).to_le_bytes());
            self.0.update(part);
        }
        self
    }

    pub fn finalize(&self) -> blake3::Hash {
        self.0.finalize()
    }
}

/// Removes a file, symlink or directory at `path`, if any (a symlink is
/// removed, never followed).
pub fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    }
}

/// The mtime of `path` itself (a symlink's own), or the epoch when it
/// cannot be read: for pruning by last use, where unreadable means old.
pub fn mtime_or_epoch(path: &Path) -> std::time::SystemTime {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
}

/// Appends every non-directory under `dir` to `out`, recursively, without
/// following symlinks; unreadable directories are skipped.
pub fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(it) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in it.filter_map(Result::ok) {
        match entry.file_type() {
            Ok(t) if t.is_dir() => files_under(&entry.path(), out),
            Ok(_) => out.push(entry.path()),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_files_and_creates_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/report.json");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.json"], "no temp file left behind");
    }

    #[test]
    fn atomic_write_with_mode_sets_exactly_that_mode() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("report.json");
        write_atomically(&p, b"one").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            mode(&p),
            0o600,
            "the plain write keeps the temp file's mode"
        );
        write_atomically_with_mode(&p, b"two", 0o644).unwrap();
        assert_eq!(mode(&p), 0o644);
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
    }

    #[test]
    fn replace_dir_swaps_and_keeps_the_old_on_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("dest");
        let new = tmp.path().join("new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join("f"), "1").unwrap();
        replace_dir(&new, &dest).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("f")).unwrap(), "1");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join("f"), "2").unwrap();
        replace_dir(&new, &dest).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("f")).unwrap(), "2");
        // `new` is missing: the failure leaves the old directory in place.
        assert!(replace_dir(&tmp.path().join("missing"), &dest).is_err());
        assert_eq!(std::fs::read_to_string(dest.join("f")).unwrap(), "2");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn regular_files_of_the_recorded_size_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_regular_file(&f, Some(5), 5).unwrap(), b"12345");
        assert_eq!(read_regular_file(&f, None, 100).unwrap(), b"12345");
        let empty = tmp.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(read_regular_file(&empty, Some(0), 0).unwrap(), b"");
        let err = read_regular_file(&f, Some(4), 100).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::SizeMismatch {
                    expected: 4,
                    found: 5,
                    ..
                }
            ),
            "{err}"
        );
        let err = read_regular_file(&f, None, 4).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::TooLarge {
                    found: 5,
                    max: 4,
                    ..
                }
            ),
            "{err}"
        );
        let err = read_regular_file(&tmp.path().join("missing"), None, 4).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }

    #[test]
    fn symlinks_are_refused_even_to_regular_files() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, b"data").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let err = read_regular_file(&link, Some(4), 100).unwrap_err();
        assert!(matches!(err, ReadError::Symlink { .. }), "{err}");
        let zero = tmp.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_regular_file(&zero, None, u64::MAX).unwrap_err();
        assert!(matches!(err, ReadError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("is a symlink"), "{err}");
    }

    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // No writer ever opens it: a plain read would block for good.
        let err = read_regular_file(&fifo, None, u64::MAX).unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
        let err = read_regular_file(Path::new("/dev/null"), Some(0), u64::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: "character device",
                    ..
                }
            ),
            "{err}"
        );
        let err = read_regular_file(tmp.path(), None, u64::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
    }

    /// Issue 27, cause 8: `scene report` and `scene replay` read their
    /// inputs with a plain read, so a FIFO hung them and a symlink to
    /// `/dev/zero` read until the OOM killer.
    #[test]
    fn user_inputs_follow_links_to_regular_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, b"data").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_input_file(&link, 100).unwrap(), b"data");
        let err = read_input_file(&f, 3).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { max: 3, .. }), "{err}");
        assert_eq!(err.reason(), "is 4 bytes, more than the limit of 3");
        let zero = tmp.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_input_file(&zero, u64::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: "character device",
                    ..
                }
            ),
            "{err}"
        );
        let fifo = tmp.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let fifo_link = tmp.path().join("fifo-link");
        std::os::unix::fs::symlink(&fifo, &fifo_link).unwrap();
        for p in [&fifo, &fifo_link] {
            let err = read_input_file(p, u64::MAX).unwrap_err();
            assert!(
                matches!(err, ReadError::NotRegular { kind: "FIFO", .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn file_names_are_single_plain_components() {
        for ok in ["small", "case-1.x", "a b", "ü"] {
            assert_eq!(check_file_name(ok), Ok(ok));
        }
        assert_eq!(check_file_name(""), Err(NameError::Empty));
        for bad in [".", ".."] {
            assert!(matches!(check_file_name(bad), Err(NameError::Special(_))));
        }
        for bad in ["a/b", "a\\b", "a\0b", "/abs", "x/"] {
            assert!(
                matches!(check_file_name(bad), Err(NameError::Separator(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn field_boundaries_and_domains_matter() {
        let h = |domain: &str, fields: &[(&str, &str)]| {
            let mut h = FieldHasher::new(domain);
            for (t, v) in fields {
                h.field(t, v.as_bytes());
            }
            h.finalize()
        };
        assert_ne!(h("d", &[("a", "bc")]), h("d", &[("ab", "c")]));
        assert_ne!(h("d", &[("a", "b"), ("c", "")]), h("d", &[("a", "bc")]));
        assert_ne!(h("d", &[("a", "b")]), h("e", &[("a", "b")]));
        assert_eq!(h("d", &[("a", "b")]), h("d", &[("a", "b")]));
    }
}
