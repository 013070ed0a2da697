//! What a failed load says: the file, and every problem in it.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem with one field of `scene.toml`: the field as a path into
/// the file (`cases[2].init.x`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

/// Problems with a scene directory or its `scene.toml`.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not TOML, or not the shape of a scene (an unknown key, a missing
    /// one, a wrong type): serde stops at the first, so there is one.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// Every problem validation found, in file order (never empty). Shown
    /// one per line, each naming the file and the field, so a line reads as
    /// a single-problem error did.
    #[error("{}", Lines(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
    /// A test file of the original project (or a class of it) that could
    /// not be made into a scene ([`crate::testfiles`]); the message names
    /// the file.
    #[error("{message}")]
    TestFile { scene: String, message: String },
}

/// `path: problem` lines.
struct Lines<'a>(&'a Path, &'a [Problem]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.1.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {p}", self.0.display())?;
        }
        Ok(())
    }
}

impl SceneError {
    /// The problems of an invalid scene (empty for the other errors).
    pub fn problems(&self) -> &[Problem] {
        match self {
            SceneError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }

    /// The name of the scene directory the error is about (the directory
    /// of the `scene.toml` named in the error, or the directory itself).
    pub fn scene_name(&self) -> String {
        let path = match self {
            SceneError::Read { path, .. } => path,
            SceneError::Parse { path, .. } | SceneError::Invalid { path, .. } => path,
            SceneError::TestFile { scene, .. } => return scene.clone(),
        };
        let dir = if path.file_name().is_some_and(|n| n == "scene.toml") {
            path.parent()
        } else {
            Some(path.as_path())
        };
        dir.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenes".to_string())
    }
}
