//! The persistent memo of file digests: `<cache>/digests/files.bin`.
//!
//! Key computation hashes a unit's source and include closure, and every
//! hit re-checks the compiler's dependency list (`crate::deps`): for a
//! PTO-ISA kernel that is ~1,050 headers read and hashed per process. This
//! store lets a new process reuse what an earlier one read, *without*
//! weakening the key: it is a memo of path -> content, not a key input, and
//! an entry is used only if the file's current metadata matches what it was
//! when the file was read:
//!
//! - on unix: device, inode, size, mtime and ctime (ns). ctime because
//!   `touch -d` can restore an mtime after an edit but not ctime; the inode
//!   (and device) because a rename-over of another file of the same size
//!   and mtime is a different file.
//! - elsewhere the store is not used (size and mtime alone are too weak
//!   to trust across processes); the per-process memo still is.
//!
//! Only files whose mtime AND ctime were at least the racy window old when
//! read are memoised (here and in the per-process memo), so an edit within
//! the same timestamp tick cannot hide behind a stored entry; and a file
//! whose metadata changed while it was being read is not memoised.
//!
//! The store holds the digest and the parsed `#include` directives (key
//! computation needs both). It is loaded once per `KeyContext`, on its first
//! file lookup, and written back by the builder after each `build_all` that
//! memoised a new file: the on-disk store is re-read, merged (this process's
//! entries win), capped and replaced atomically. Concurrent writers: the
//! last one wins and the other's new entries are lost, which only costs
//! their next reader a re-read. A missing, torn, corrupt or other-version
//! store reads as empty and is overwritten by the next write; nothing here
//! is ever an error.
//!
//! Bound: at most [`MAX_ENTRIES`] entries (one per path; an edited file
//! replaces its entry), least recently used dropped first. "Used" is the
//! time of the last write-back by a process that looked the file up; a
//! process whose lookups all hit still writes once a day
//! ([`USED_REFRESH`]) to keep those times meaningful. `scene cache clear`
//! removes the store, `scene cache prune` removes it once unwritten for
//! longer than the prune age.
//!
//! Format (little-endian), checked by a blake3 of the body:
//!
//! ```text
//! scene-digests 1\n
//! <64 hex digits: blake3 of the body>\n
//! body: u32 count, then per entry:
//!   u32 len + path (UTF-8, absolute)
//!   u64 dev, u64 ino, u64 size, i128 mtime ns, i128 ctime ns
//!   u64 used (unix seconds)
//!   [u8; 32] blake3 of the content
//!   u32 count, then per #include: u8 quoted, u32 len + name (UTF-8)
//! ```
//!
//! Binary rather than JSON because loading it is on the path it speeds up:
//! ~2,000 entries decode in about a millisecond.

use std::collections::HashMap;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The store's directory in the cache, and its file there.
pub(crate) const DIGESTS_DIR: &str = "digests";
const STORE_FILE: &str = "files.bin";

/// The first line of the store; another version reads as empty.
const HEADER: &[u8] = b"scene-digests 1\n";

/// Entries kept at most: ~10 PTO-sized closures, ~5 MB.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// A process whose lookups all hit the store rewrites it (to record that
/// the entries are in use) only if one of them was last recorded longer
/// ago than this.
pub(crate) const USED_REFRESH: Duration = Duration::from_secs(24 * 3600);

/// Where the store of the cache in `cache_dir` lives.
pub(crate) fn store_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(DIGESTS_DIR).join(STORE_FILE)
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Stamp {
    #[cfg(unix)]
    pub fn of(meta: &Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let ns = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Size and mtime only: enough for the per-process memo (as before),
    /// not trusted across processes (see the module doc).
    #[cfg(not(unix))]
    pub fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: 0,
            ino: 0,
            size: meta.len(),
            mtime_ns: meta.modified().map_or(0, |t| unix_ns(t)),
            ctime_ns: 0,
        }
    }

    /// Whether both timestamps are at least `window` before `now`: a file
    /// changed this recently may change again within the same tick without
    /// any visible difference (the "racy git" problem).
    pub fn settled(&self, now: SystemTime, window: Duration) -> bool {
        let now = unix_ns(now);
        let window = i128::try_from(window.as_nanos()).unwrap_or(i128::MAX);
        now - self.mtime_ns >= window && now - self.ctime_ns >= window
    }
}

fn unix_ns(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
    }
}

pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// One file's memoised digest and `#include` directives, valid while the
/// file's [`Stamp`] is `stamp`.
#[derive(Debug, Clone)]
pub(crate) struct FileMemo {
    pub stamp: Stamp,
    /// blake3 hex of the content.
    pub digest: String,
    /// `#include` directives, as (name, quoted).
    pub includes: Arc<Vec<(String, bool)>>,
}

/// A stored memo and when it was last used (unix seconds).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub memo: FileMemo,
    pub used: u64,
}

pub(crate) type Entries = HashMap<PathBuf, Stored>;

/// Whether the store may hold `path`: absolute (a relative path names
/// different files in processes with different working directories) and
/// UTF-8 (how paths are encoded), and only where stamps are trusted.
pub(crate) fn persistable(path: &Path) -> bool {
    cfg!(unix) && path.is_absolute() && path.to_str().is_some()
}

/// The store at `path`; empty if it is missing or not a whole store of
/// this version.
pub(crate) fn load(path: &Path) -> Entries {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| decode(&bytes))
        .unwrap_or_default()
}

/// `ours` merged over the store at `path` (ours win), the least recently
/// used dropped beyond `cap`, written atomically. Best effort: a failed
/// write only means the next process reads the files again.
pub(crate) fn merge_and_write(path: &Path, ours: Entries, cap: usize) {
    let mut merged = load(path);
    merged.extend(ours);
    let _ = scene_util::write_atomically(path, &encode(&capped(merged, cap)));
}

fn capped(entries: Entries, cap: usize) -> Vec<(PathBuf, Stored)> {
    let mut all: Vec<(PathBuf, Stored)> = entries.into_iter().collect();
    if all.len() > cap {
        // Most recently used first; path order among equals, so the choice
        // does not depend on hash order.
        all.sort_by(|a, b| b.1.used.cmp(&a.1.used).then_with(|| a.0.cmp(&b.0)));
        all.truncate(cap);
    }
    all
}

fn encode(entries: &[(PathBuf, Stored)]) -> Vec<u8> {
    let mut body = Vec::with_capacity(entries.len() * 256);
    put_u32(&mut body, entries.len());
    for (path, stored) in entries {
        let memo = &stored.memo;
        // Every entry went through `persistable`, so this is never empty.
        put_str(&mut body, path.to_str().unwrap_or_default());
        body.extend_from_slice(&memo.stamp.dev.to_le_bytes());
        body.extend_from_slice(&memo.stamp.ino.to_le_bytes());
        body.extend_from_slice(&memo.stamp.size.to_le_bytes());
        body.extend_from_slice(&memo.stamp.mtime_ns.to_le_bytes());
        body.extend_from_slice(&memo.stamp.ctime_ns.to_le_bytes());
        body.extend_from_slice(&stored.used.to_le_bytes());
        let digest = blake3::Hash::from_hex(&memo.digest).map_or([0; 32], |h| *h.as_bytes());
        body.extend_from_slice(&digest);
        put_u32(&mut body, memo.includes.len());
        for (name, quoted) in memo.includes.iter() {
            body.push(u8::from(*quoted));
            put_str(&mut body, name);
        }
    }
    let mut out = Vec::with_capacity(HEADER.len() + 65 + body.len());
    out.extend_from_slice(HEADER);
    out.extend_from_slice(blake3::hash(&body).to_hex().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&body);
    out
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// `None` for anything but a whole store of this version.
fn decode(bytes: &[u8]) -> Option<Entries> {
    let rest = bytes.strip_prefix(HEADER)?;
    let (sum, body) = (rest.get(..64)?, rest.get(65..)?);
    if rest.get(64) != Some(&b'\n') || blake3::hash(body).to_hex().as_bytes() != sum {
        return None;
    }
    let mut r = Reader(body);
    let count = r.u32()?;
    // A count the body cannot hold is damage, not an allocation request.
    let mut entries = HashMap::with_capacity(count.min(body.len() / 100));
    for _ in 0..count {
        let path = PathBuf::from(r.str()?);
        let stamp = Stamp {
            dev: r.u64()?,
            ino: r.u64()?,
            size: r.u64()?,
            mtime_ns: r.i128()?,
            ctime_ns: r.i128()?,
        };
        let used = r.u64()?;
        let digest = blake3::Hash::from_bytes(r.array()?).to_hex().to_string();
        let n = r.u32()?;
        let mut includes = Vec::with_capacity(n.min(r.0.len() / 5));
        for _ in 0..n {
            let quoted = r.take(1)?[0] != 0;
            includes.push((r.str()?, quoted));
        }
        let memo = FileMemo {
            stamp,
            digest,
            includes: Arc::new(includes),
        };
        entries.insert(path, Stored { memo, used });
    }
    r.0.is_empty().then_some(entries)
}

/// A cursor over the body; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u32(&mut self) -> Option<usize> {
        usize::try_from(u32::from_le_bytes(self.array()?)).ok()
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }

    fn i128(&mut self) -> Option<i128> {
        Some(i128::from_le_bytes(self.array()?))
    }

    fn str(&mut self) -> Option<String> {
        let n = self.u32()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(n: u64, used: u64) -> Stored {
        Stored {
            memo: FileMemo {
                stamp: Stamp {
                    dev: 1,
                    ino: n,
                    size: 3,
                    mtime_ns: -5,
                    ctime_ns: 1 << 70,
                },
                digest: blake3::hash(&n.to_le_bytes()).to_hex().to_string(),
                includes: Arc::new(vec![("a.h".into(), true), ("b/c.h".into(), false)]),
            },
            used,
        }
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let entries: Vec<(PathBuf, Stored)> = (0..3)
            .map(|n| (PathBuf::from(format!("/src/{n}.h")), stored(n, 7)))
            .collect();
        let bytes = encode(&entries);
        let back = decode(&bytes).expect("decodes");
        assert_eq!(back.len(), 3);
        let one = &back[Path::new("/src/1.h")];
        assert_eq!(one.memo.stamp, entries[1].1.memo.stamp);
        assert_eq!(one.memo.digest, entries[1].1.memo.digest);
        assert_eq!(one.memo.includes, entries[1].1.memo.includes);
        assert_eq!(one.used, 7);

        // Every truncation, a flipped byte anywhere, another version: empty.
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_none(), "truncated to {len}");
        }
        for at in [0, HEADER.len() + 3, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_none(), "flipped byte {at}");
        }
        let other = [b"scene-digests 2\n", &bytes[HEADER.len()..]].concat();
        assert!(decode(&other).is_none());
        assert!(decode(b"").is_none());
    }

    #[test]
    fn cap_keeps_the_most_recently_used() {
        let entries: Entries = (0..10)
            .map(|n| (PathBuf::from(format!("/src/{n}.h")), stored(n, n)))
            .collect();
        let mut kept: Vec<u64> = capped(entries, 4).iter().map(|(_, s)| s.used).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![6, 7, 8, 9]);
    }

    #[test]
    fn merge_keeps_other_writers_entries_and_prefers_ours() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = store_path(dir.path());
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, b"torn").expect("write");
        let theirs = Entries::from([(PathBuf::from("/a.h"), stored(1, 1))]);
        merge_and_write(&path, theirs, MAX_ENTRIES);
        let ours = Entries::from([
            (PathBuf::from("/b.h"), stored(2, 2)),
            (PathBuf::from("/a.h"), stored(3, 3)),
        ]);
        merge_and_write(&path, ours, MAX_ENTRIES);
        let back = load(&path);
        assert_eq!(back.len(), 2);
        assert_eq!(back[Path::new("/a.h")].memo.stamp.ino, 3);
        assert_eq!(back[Path::new("/b.h")].memo.stamp.ino, 2);
    }
}
