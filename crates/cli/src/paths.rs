//! Output and working paths, checked before any work starts: a report that
//! cannot be written should fail the run in a millisecond, not after an
//! hour of cases, and in words ("is not a directory"), not as a raw
//! `File exists (os error 17)` from `create_dir_all`.

use std::path::{Path, PathBuf};

use scene_harness::RunConfig;

/// A path the run would write to or create that cannot be used: a usage
/// error (exit 2) naming the flag or variable it came from.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("{what}: the path is empty")]
    Empty { what: String },
    #[error("{what} {}: {problem}", path.display())]
    Unusable {
        what: String,
        path: PathBuf,
        problem: PathProblem,
    },
}

/// What is wrong with a path.
#[derive(Debug, thiserror::Error)]
pub enum PathProblem {
    #[error("is a directory")]
    IsADirectory,
    #[error("is not a directory")]
    IsAFile,
    #[error("{} is not a directory", .0.display())]
    AncestorIsAFile(PathBuf),
    #[error("directory {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("is a {0}; an output must be a regular file, a character device or a FIFO")]
    NotAnOutput(&'static str),
    #[error("is also an input ({}); it would be overwritten", .0.display())]
    IsAnInput(PathBuf),
}

/// `-` as an output path: the output goes to stdout.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The nearest ancestor of `path` (itself included) that exists; `None`
/// when even the root does not (a relative path's `.` always does).
fn nearest_existing(path: &Path) -> Option<&Path> {
    path.ancestors()
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .find(|a| a.symlink_metadata().is_ok())
}

/// A file the run will write (`--report-json`, `--junit`): its directory
/// exists and is a directory, and the path itself is not a directory, a
/// socket or a block device (a character device or FIFO is written in
/// place, see [`scene_util::output_target`]).
pub(crate) fn check_output_file(what: &str, path: &Path) -> Result<(), PathError> {
    let err = |problem| {
        Err(PathError::Unusable {
            what: what.to_owned(),
            path: path.to_path_buf(),
            problem,
        })
    };
    if path.as_os_str().is_empty() {
        return Err(PathError::Empty {
            what: what.to_owned(),
        });
    }
    if path.is_dir() {
        return err(PathProblem::IsADirectory);
    }
    // An error reading the metadata (permissions) is left to the write,
    // which words it.
    if let Ok(scene_util::OutputTarget::Refused(kind)) = scene_util::output_target(path) {
        return err(PathProblem::NotAnOutput(kind));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if parent.is_dir() {
        return Ok(());
    }
    match nearest_existing(parent) {
        Some(a) if !a.is_dir() => err(PathProblem::AncestorIsAFile(a.to_path_buf())),
        _ => err(PathProblem::Missing(parent.to_path_buf())),
    }
}

/// An output path that names one of `inputs` (`scene report a.json --html
/// a.json`, also through another spelling or a link): same device and
/// inode. An output that does not exist yet is no input, nor is a device
/// or FIFO (writing one destroys nothing).
pub(crate) fn check_not_an_input(
    what: &str,
    path: &Path,
    inputs: &[PathBuf],
) -> Result<(), PathError> {
    use std::os::unix::fs::MetadataExt;
    let out = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m,
        _ => return Ok(()),
    };
    match inputs.iter().find(|input| {
        std::fs::metadata(input).is_ok_and(|m| m.dev() == out.dev() && m.ino() == out.ino())
    }) {
        Some(input) => Err(PathError::Unusable {
            what: what.to_owned(),
            path: path.to_path_buf(),
            problem: PathProblem::IsAnInput(input.clone()),
        }),
        None => Ok(()),
    }
}

/// A directory the run will create if missing (`--dump`, the cache, the
/// failure dumps, the card locks): neither it nor an existing ancestor is
/// something other than a directory.
pub(crate) fn check_dir(what: &str, path: &Path) -> Result<(), PathError> {
    if path.as_os_str().is_empty() {
        return Err(PathError::Empty {
            what: what.to_owned(),
        });
    }
    match nearest_existing(path) {
        Some(a) if !a.is_dir() => Err(PathError::Unusable {
            what: what.to_owned(),
            path: path.to_path_buf(),
            problem: if a == path {
                PathProblem::IsAFile
            } else {
                PathProblem::AncestorIsAFile(a.to_path_buf())
            },
        }),
        _ => Ok(()),
    }
}

/// The directories a configuration will create, each checked with
/// [`check_dir`]; dump and lock directories only for commands that run
/// cases on cards. An unusable cache directory is not an error: the run
/// compiles without a cache after one worded warning (the cache's own
/// warning would be a raw `os error`).
pub(crate) fn check_config_dirs(config: &mut RunConfig, uses_cards: bool) -> Result<(), PathError> {
    if let Some(d) = &config.cache_dir
        && let Err(e) = check_dir("cache dir (--cache-dir, SCENE_CACHE_DIR)", d)
    {
        eprintln!("warning: {e}; compiling without a cache");
        config.cache_dir = None;
    }
    let mut dirs: Vec<(&str, &PathBuf)> = Vec::new();
    // Only commands that run cases dump them or lock cards.
    if uses_cards {
        if let Some(d) = &config.dumps.every_case {
            dirs.push(("--dump", d));
        }
        dirs.push((
            "failure dump dir (SCENE_FAILURE_DUMP_DIR)",
            &config.dumps.failures,
        ));
        dirs.push(("lock dir (SCENE_LOCK_DIR)", &config.lock_dir));
    }
    dirs.into_iter()
        .try_for_each(|(what, d)| check_dir(what, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_dirs_are_checked_in_words() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();

        assert!(check_output_file("--junit", &tmp.path().join("r.xml")).is_ok());
        let e = check_output_file("--junit", tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--junit") && e.contains("is a directory"), "{e}");
        let e = check_output_file("--junit", &file.join("r.xml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{} is not a directory", file.display())),
            "{e}"
        );
        let e = check_output_file("--junit", &tmp.path().join("no/r.xml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert!(check_output_file("--junit", Path::new("")).is_err());
        let sock = tmp.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = check_output_file("--junit", &sock).unwrap_err().to_string();
        assert!(e.contains("--junit") && e.contains("is a socket"), "{e}");
        assert!(check_output_file("--junit", Path::new("/dev/null")).is_ok());

        let inputs = [file.clone()];
        let e = check_not_an_input("--html", &tmp.path().join("./file"), &inputs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is also an input"), "{e}");
        assert!(check_not_an_input("--html", &tmp.path().join("new"), &inputs).is_ok());
        assert!(check_not_an_input("--html", Path::new("/dev/null"), &inputs).is_ok());

        assert!(check_dir("--dump", &tmp.path().join("a/b")).is_ok());
        assert!(check_dir("--dump", tmp.path()).is_ok());
        let e = check_dir("--dump", &file).unwrap_err().to_string();
        assert!(e.ends_with("file: is not a directory"), "{e}");
        let e = check_dir("--dump", &file.join("a/b"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{} is not a directory", file.display())),
            "{e}"
        );
    }
}
