//! Descriptions kept between runs: describing a test file imports it (and
//! torch) and calls `generate_args` for every case, about 15 s for the
//! original's a2a3 set; a run whose files are unchanged takes each
//! description from the golden cache's `describe/` records instead and
//! starts no Python for it.
//!
//! A record holds the worker's reply and every file the worker had been
//! made of when it answered (its `files`: the test file, what it imported
//! and read, our compatibility packages), each with its blake3. It is used
//! only while every one of them is unchanged; its key covers the request
//! (file, module, `sys.path`, platform, manual cases, seed) and the
//! interpreter's versions with the driver
//! ([`crate::golden::python::PythonRunner::describe_environment`]). A
//! worker that describes several files reports what all of them imported,
//! so a record may list more files than its own: an edit of one test file
//! can make others be described again, never the reverse.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::golden::cache::GoldenCache;
use crate::golden::stage::file_digest;

/// Bumped when a record's meaning changes.
const SCHEMA: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Record {
    schema: u32,
    reply: Json,
    files: Vec<(PathBuf, String)>,
}

/// The records of one load.
pub(super) struct DescribeCache<'a> {
    goldens: &'a GoldenCache,
    /// Digests of files, read once per load (a record of every file lists
    /// most of the others).
    digests: RefCell<HashMap<PathBuf, String>>,
}

impl<'a> DescribeCache<'a> {
    pub(super) fn new(goldens: &'a GoldenCache) -> Self {
        DescribeCache {
            goldens,
            digests: RefCell::new(HashMap::new()),
        }
    }

    /// The key of `request` (a `describe` request of one file) under the
    /// interpreter digest `env`.
    pub(super) fn key(env: &str, request: &Json) -> String {
        let mut h = scene_util::FieldHasher::new("scene-simpler-describe");
        h.field("schema", &SCHEMA.to_le_bytes())
            .field("env", env.as_bytes())
            .field("request", &serde_json::to_vec(request).unwrap_or_default());
        h.finalize().to_hex().to_string()
    }

    /// The reply recorded under `key`, when every file it was made of is
    /// as it was.
    pub(super) fn get(&self, key: &str) -> Option<Json> {
        let bytes = self.goldens.describe_record(key)?;
        let record: Record = serde_json::from_slice(&bytes).ok()?;
        if record.schema != SCHEMA {
            return None;
        }
        let unchanged = record
            .files
            .iter()
            .all(|(path, digest)| self.digest(path) == *digest);
        unchanged.then_some(record.reply)
    }

    /// Records `reply` under `key`, unless the worker could not name every
    /// file it was made of.
    pub(super) fn put(&self, key: &str, reply: &Json) {
        let opaque = reply
            .get("opaque")
            .and_then(Json::as_array)
            .is_none_or(|a| !a.is_empty());
        let Some(files) = reply.get("files").and_then(Json::as_array) else {
            return;
        };
        if opaque {
            return;
        }
        let files: Vec<(PathBuf, String)> = files
            .iter()
            .filter_map(Json::as_str)
            .map(|f| (PathBuf::from(f), self.digest(Path::new(f))))
            .collect();
        let mut reply = reply.clone();
        if let Some(obj) = reply.as_object_mut() {
            obj.remove("files");
            obj.remove("opaque");
            obj.remove("id");
        }
        let record = Record {
            schema: SCHEMA,
            reply,
            files,
        };
        if let Ok(bytes) = serde_json::to_vec(&record) {
            self.goldens.record_describe(key, &bytes);
        }
    }

    fn digest(&self, path: &Path) -> String {
        self.digests
            .borrow_mut()
            .entry(path.to_path_buf())
            .or_insert_with(|| file_digest(path))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_serves_until_a_file_it_was_made_of_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let goldens = GoldenCache::in_dir(&tmp.path().join("cache"));
        let test = tmp.path().join("test_x.py");
        let helper = tmp.path().join("helper.py");
        std::fs::write(&test, "import helper\n").unwrap();
        std::fs::write(&helper, "N = 1\n").unwrap();
        let key = DescribeCache::key("env", &json!({"file": test}));
        let reply = json!({"ok": true, "tests": [{"file": test}], "id": 3,
            "files": [test, helper], "opaque": []});
        DescribeCache::new(&goldens).put(&key, &reply);
        let got = DescribeCache::new(&goldens).get(&key).unwrap();
        assert_eq!(got, json!({"ok": true, "tests": [{"file": test}]}));
        assert!(
            DescribeCache::new(&goldens)
                .get(&DescribeCache::key("env2", &json!({"file": test})))
                .is_none()
        );
        std::fs::write(&helper, "N = 2\n").unwrap();
        assert!(DescribeCache::new(&goldens).get(&key).is_none());
    }

    #[test]
    fn a_reply_with_opaque_files_is_not_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let goldens = GoldenCache::in_dir(tmp.path());
        let reply =
            json!({"ok": true, "tests": [], "files": [], "opaque": ["module `x` is a .so"]});
        DescribeCache::new(&goldens).put("k", &reply);
        assert!(DescribeCache::new(&goldens).get("k").is_none());
        let no_files = json!({"ok": true, "tests": []});
        DescribeCache::new(&goldens).put("k", &no_files);
        assert!(DescribeCache::new(&goldens).get("k").is_none());
    }
}
