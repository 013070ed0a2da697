//! Local disk first, a remote store second, behind the one [`Storage`]
//! trait, so the cache's callers do not know a remote exists.
//!
//! - read: the local tier answers whenever it holds anything under the key
//!   (a damaged local entry is judged and removed above, as without a
//!   remote). On a local miss the remote object is fetched and verified
//!   (schema, key, size, blake3 of the manifest inside the same object)
//!   before it is used or copied into the local tier; a damaged, partial
//!   or foreign object is a miss, remembered so the next publication of
//!   that key overwrites it.
//! - publish: the local tier first (atomic, as always), then the remote,
//!   unless it is read-only. An object is written whole, so racing
//!   writers of the same key each leave a complete, verified entry.
//! - everything else (touch, remove, list, sweep, clear) is local only:
//!   prune, verify and stats of a cache directory stay local.
//!
//! A remote that fails is disabled for the rest of the process with one
//! warning ([`Remote`]); this storage then behaves exactly like its local
//! tier.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::manifest::{verify_artifact, verify_manifest};
use super::remote::{Remote, decode, encode};
use super::storage::{EntryInfo, LocalDisk, Part, RawEntry, Storage, StorageError};
use crate::key::UnitKey;

/// What this process learnt about keys from the remote.
#[derive(Debug, Default)]
struct Seen {
    /// Keys the remote does not hold (or holds damaged): not asked again.
    missing: HashSet<UnitKey>,
    /// Keys served from the remote, until [`TieredStorage::take_remote_hit`].
    served: HashSet<UnitKey>,
    /// A verified remote entry the local tier could not keep (full disk):
    /// (manifest, artifact), served from memory once.
    staged: HashMap<UnitKey, (Vec<u8>, Vec<u8>)>,
}

/// [`LocalDisk`] with a [`Remote`] behind it.
#[derive(Debug)]
pub struct TieredStorage {
    local: LocalDisk,
    remote: Arc<Remote>,
    /// `entries` or `objects`: the remote's name for this tier.
    tier: &'static str,
    schema: u32,
    seen: Mutex<Seen>,
}

impl TieredStorage {
    pub fn new(local: LocalDisk, remote: Arc<Remote>, tier: &'static str, schema: u32) -> Self {
        TieredStorage {
            local,
            remote,
            tier,
            schema,
            seen: Mutex::new(Seen::default()),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // Sets of keys only: a panic elsewhere cannot leave them inconsistent.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `key` was served from the remote since the last call for it.
    pub fn take_remote_hit(&self, key: &UnitKey) -> bool {
        self.seen().served.remove(key)
    }

    /// Whether the remote was asked for `key` and did not have a usable
    /// entry.
    pub fn remote_missed(&self, key: &UnitKey) -> bool {
        self.seen().missing.contains(key)
    }

    /// Fetches `key` from the remote and, if it verifies, copies it into
    /// the local tier. Returns the manifest bytes on success.
    fn read_through(&self, key: &UnitKey) -> Option<Vec<u8>> {
        if !self.remote.is_enabled() || self.seen().missing.contains(key) {
            return None;
        }
        let verified = self.remote.fetch(self.tier, key).map(|object| {
            let (manifest, artifact) = decode(&object)?;
            let m = verify_manifest(*key, Some(self.schema), manifest).ok()?;
            verify_artifact(&m, artifact).ok()?;
            Some((manifest.to_vec(), artifact.to_vec()))
        });
        let counters = &self.remote.counters;
        match verified {
            Some(Some((manifest, artifact))) => {
                counters.hits.fetch_add(1, Ordering::Relaxed);
                let mut seen = self.seen();
                seen.served.insert(*key);
                // A copy of an entry the remote keeps: no sync (a crash can only
                // leave a short file, which the next read finds damaged).
                if self.local.put_unsynced(key, &artifact, &manifest).is_err() {
                    seen.staged.insert(*key, (manifest.clone(), artifact));
                }
                Some(manifest)
            }
            // Absent, damaged or partial: a miss; the next publication of
            // the key overwrites the object.
            Some(None) | None => {
                if self.remote.is_enabled() {
                    counters.misses.fetch_add(1, Ordering::Relaxed);
                    self.seen().missing.insert(*key);
                }
                None
            }
        }
    }
}

impl Storage for TieredStorage {
    fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError> {
        let Some(manifest) = self.get_manifest(key)? else {
            return Ok(None);
        };
        if let Some((_, artifact)) = self.seen().staged.get(key) {
            let artifact = Part::Bytes(artifact.clone());
            return Ok(Some(RawEntry { artifact, manifest }));
        }
        Ok(self.local.get(key)?.map(|raw| RawEntry { manifest, ..raw }))
    }

    fn get_manifest(&self, key: &UnitKey) -> Result<Option<Part>, StorageError> {
        if let Some(local) = self.local.get_manifest(key)? {
            return Ok(Some(local));
        }
        if let Some((manifest, _)) = self.seen().staged.get(key) {
            return Ok(Some(Part::Bytes(manifest.clone())));
        }
        Ok(self.read_through(key).map(Part::Bytes))
    }

    fn get_artifact(&self, key: &UnitKey, expected_len: u64) -> Result<Part, StorageError> {
        if let Some((_, artifact)) = self.seen().staged.remove(key) {
            return Ok(if artifact.len() as u64 == expected_len {
                Part::Bytes(artifact)
            } else {
                Part::WrongSize(artifact.len() as u64)
            });
        }
        self.local.get_artifact(key, expected_len)
    }

    fn put(&self, key: &UnitKey, artifact: &[u8], manifest: &[u8]) -> Result<(), StorageError> {
        self.local.put(key, artifact, manifest)?;
        if self
            .remote
            .store(self.tier, key, encode(manifest, artifact))
        {
            self.seen().missing.remove(key);
        }
        Ok(())
    }

    fn touch(&self, key: &UnitKey) -> Result<(), StorageError> {
        self.local.touch(key)
    }

    fn remove(&self, key: &UnitKey) -> Result<(), StorageError> {
        self.seen().staged.remove(key);
        self.local.remove(key)
    }

    fn list(&self) -> Result<Vec<EntryInfo>, StorageError> {
        self.local.list()
    }

    fn describe(&self, key: &UnitKey) -> String {
        self.local.describe(key)
    }

    fn sweep_leftovers(&self, older_than: Duration) -> Result<usize, StorageError> {
        self.local.sweep_leftovers(older_than)
    }

    fn clear(&self) -> Result<usize, StorageError> {
        self.local.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::remote::RemoteConfig;
    use crate::cache::{Manifest, WarnSink, read_verified};
    use crate::key::{CACHE_SCHEMA, EntryKind, KeyInputs};

    fn entry(n: u8) -> (UnitKey, Vec<u8>, Vec<u8>) {
        let mut inputs = KeyInputs::default();
        inputs.0.insert("n".into(), n.to_string());
        inputs.0.insert("schema".into(), CACHE_SCHEMA.to_string());
        let key = inputs.key();
        let artifact = vec![n; 100 + n as usize];
        let manifest = Manifest::new(key, EntryKind::Incore, &artifact, &inputs, "s/u", 0.5);
        (key, artifact, manifest.to_bytes())
    }

    struct Setup {
        _dirs: [tempfile::TempDir; 2],
        remote_dir: std::path::PathBuf,
        warnings: Arc<Mutex<Vec<String>>>,
    }

    impl Setup {
        fn new() -> Self {
            let remote = tempfile::tempdir().expect("tempdir");
            let local = tempfile::tempdir().expect("tempdir");
            Setup {
                remote_dir: remote.path().to_path_buf(),
                _dirs: [remote, local],
                warnings: Arc::default(),
            }
        }

        fn url(&self) -> String {
            format!("file://{}", self.remote_dir.display())
        }

        /// A tier over a fresh local directory and the shared remote.
        fn tier(&self, config: RemoteConfig) -> (TieredStorage, tempfile::TempDir) {
            let warnings = Arc::clone(&self.warnings);
            let warn: WarnSink = Arc::new(move |m| warnings.lock().expect("lock").push(m.into()));
            let remote = Remote::open(&config, CACHE_SCHEMA, warn).expect("open");
            let local = tempfile::tempdir().expect("tempdir");
            let tier = TieredStorage::new(
                LocalDisk::new(local.path()),
                Arc::new(remote),
                "entries",
                CACHE_SCHEMA,
            );
            (tier, local)
        }

        fn object(&self, key: &UnitKey) -> std::path::PathBuf {
            let hex = key.to_hex();
            self.remote_dir.join(format!(
                "scene-cache/v{CACHE_SCHEMA}/entries/{}/{hex}",
                &hex[..2]
            ))
        }
    }

    fn verified(tier: &TieredStorage, key: &UnitKey) -> Option<Vec<u8>> {
        match read_verified(tier, key, Some(CACHE_SCHEMA)).expect("read") {
            Some(Ok((_, artifact))) => Some(artifact),
            Some(Err(damage)) => panic!("damaged: {damage}"),
            None => None,
        }
    }

    #[test]
    fn publish_fills_the_remote_and_a_second_runner_reads_through() {
        let s = Setup::new();
        let (a, _la) = s.tier(RemoteConfig::new(s.url()));
        let (key, artifact, manifest) = entry(1);
        assert_eq!(verified(&a, &key), None);
        assert!(a.remote_missed(&key));
        a.put(&key, &artifact, &manifest).expect("put");
        assert!(s.object(&key).is_file(), "written to the remote");
        assert!(
            !a.take_remote_hit(&key),
            "published locally, not a remote hit"
        );

        let (b, lb) = s.tier(RemoteConfig::new(s.url()));
        assert_eq!(verified(&b, &key), Some(artifact.clone()));
        assert!(b.take_remote_hit(&key));
        assert!(!b.take_remote_hit(&key), "taken once");
        // Copied into B's local tier: the remote is not needed any more.
        let local = LocalDisk::new(lb.path());
        assert!(local.get(&key).expect("get").is_some());
        std::fs::remove_file(s.object(&key)).expect("rm");
        assert_eq!(verified(&b, &key), Some(artifact));
        assert!(!b.take_remote_hit(&key), "served locally");
        let c = &b.remote.counters;
        assert_eq!(c.hits.load(Ordering::Relaxed), 1);
        assert_eq!(c.errors.load(Ordering::Relaxed), 0);
        assert!(c.read_bytes.load(Ordering::Relaxed) > 100);
        assert!(s.warnings.lock().expect("lock").is_empty());
    }

    #[test]
    fn a_damaged_or_partial_remote_object_is_a_miss_and_is_overwritten() {
        let s = Setup::new();
        let (a, _la) = s.tier(RemoteConfig::new(s.url()));
        let (key, artifact, manifest) = entry(2);
        a.put(&key, &artifact, &manifest).expect("put");
        let good = std::fs::read(s.object(&key)).expect("read");
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        let truncated = good[..good.len() - 10].to_vec();
        for damaged in [flipped, truncated, b"garbage".to_vec()] {
            std::fs::write(s.object(&key), &damaged).expect("damage");
            let (b, lb) = s.tier(RemoteConfig::new(s.url()));
            assert_eq!(verified(&b, &key), None, "damage is a miss");
            assert!(b.remote_missed(&key));
            assert!(
                LocalDisk::new(lb.path()).get(&key).expect("get").is_none(),
                "nothing damaged is copied locally"
            );
            // The unit is compiled and published: the object is repaired.
            b.put(&key, &artifact, &manifest).expect("put");
            assert_eq!(std::fs::read(s.object(&key)).expect("read"), good);
        }
    }

    #[test]
    fn read_only_never_writes() {
        let s = Setup::new();
        let mut config = RemoteConfig::new(s.url());
        config.read_only = true;
        let (ro, _l) = s.tier(config);
        let (key, artifact, manifest) = entry(3);
        assert_eq!(verified(&ro, &key), None);
        ro.put(&key, &artifact, &manifest).expect("put");
        assert!(!s.object(&key).exists());
        assert_eq!(verified(&ro, &key), Some(artifact), "local tier has it");
        assert_eq!(ro.remote.counters.written_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_unreachable_remote_warns_once_and_the_tier_goes_on_locally() {
        // A port nobody listens on: bind, note the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let s = Setup::new();
        let mut config = RemoteConfig::new(format!("redis://127.0.0.1:{port}/0"));
        config.timeout = Duration::from_secs(5);
        let (t, _l) = s.tier(config);
        for n in 10..15 {
            let (key, artifact, manifest) = entry(n);
            assert_eq!(verified(&t, &key), None);
            t.put(&key, &artifact, &manifest)
                .expect("local put still works");
            assert_eq!(verified(&t, &key), Some(artifact));
        }
        let warnings = s.warnings.lock().expect("lock").clone();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("local cache only"), "{warnings:?}");
        assert!(!t.remote.is_enabled());
        assert_eq!(t.remote.counters.errors.load(Ordering::Relaxed), 1);
        assert_eq!(t.remote.counters.misses.load(Ordering::Relaxed), 0);
    }

    /// Issue 38, cause 4, through the tier: a Redis server trickling each
    /// reply (every byte within the timeout, the whole reply past it) is
    /// switched off by the first operation that reaches it, whichever kind
    /// it is (a read through `get_manifest`, a publish through `put`), with
    /// one warning; no later operation of any kind (`get`,
    /// `get_manifest`, `put`) reaches it, and neither do reads already
    /// queued behind the slow one on other threads. Before the fix the
    /// first `GET` succeeded as a slow miss and every later operation was
    /// sent too (7 commands for the sequence here: the first `GET`,
    /// then a `GET` and a `SET` per later entry; no warning).
    #[test]
    fn a_trickling_redis_is_switched_off_for_every_operation_after_one_deadline() {
        use crate::cache::resp::trickle;
        let timeout = Duration::from_millis(600);
        for first in ["get_manifest", "put", "concurrent get_manifest"] {
            let server = trickle::Server::start(timeout / 3);
            let s = Setup::new();
            let mut config = RemoteConfig::new(format!("redis://{}/0", server.address()));
            config.timeout = timeout;
            let (t, _l) = s.tier(config);
            let entries: Vec<_> = (20..24).map(entry).collect();
            let (k0, a0, m0) = &entries[0];
            match first {
                "get_manifest" => assert!(t.get_manifest(k0).expect("read").is_none()),
                "put" => t.put(k0, a0, m0).expect("the local put still works"),
                _ => std::thread::scope(|scope| {
                    for (k, _, _) in &entries {
                        let t = &t;
                        scope.spawn(move || assert!(t.get_manifest(k).expect("read").is_none()));
                    }
                }),
            }
            for (k, a, m) in &entries[1..] {
                assert!(t.get(k).expect("read").is_none(), "{first}");
                assert!(t.get_manifest(k).expect("read").is_none(), "{first}");
                t.put(k, a, m).expect("the local put still works");
                assert_eq!(verified(&t, k), Some(a.clone()), "{first}");
            }
            let enabled = t.remote.is_enabled();
            let c = &t.remote.counters;
            let (errors, written) = (
                c.errors.load(Ordering::Relaxed),
                c.written_bytes.load(Ordering::Relaxed),
            );
            // Closes the client's connection, if it still has one, so the
            // server can take its stop.
            drop(t);
            let seen = server.finish();
            assert_eq!(seen.connections, 1, "{first}: {seen:?}");
            assert_eq!(seen.commands.len(), 1, "{first}: {seen:?}");
            let warnings = std::mem::take(&mut *s.warnings.lock().expect("lock"));
            assert_eq!(warnings.len(), 1, "{first}: {warnings:?}");
            assert!(
                warnings[0].contains("unavailable") && warnings[0].contains("local cache only"),
                "{first}: {warnings:?}"
            );
            assert!(!enabled, "{first}");
            assert_eq!(errors, 1, "{first}");
            assert_eq!(written, 0, "{first}");
        }
    }
}
