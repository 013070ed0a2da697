//! How the whole-cache operations grow: `stats`, `verify_all` and `prune`
//! (nothing to remove: the full scan) over 1,000, 10,000 and 100,000
//! entries synthesised through the storage API (real files, real
//! manifests with size and blake3; no compiler), plus the process's peak
//! memory. Prints one line per size and per operation for BENCHMARKS.md
//! and checks only what cannot be noise: every entry is seen and verifies.
//!
//! Ignored by default (100,000 entries are 200,000 files): run with
//! `cargo test -p scene-kernels --test cache_scale -- --ignored --nocapture`
//! (`SCENE_SCALE_SIZES=1000,10000` for fewer).

use std::path::Path;
use std::time::Instant;

use scene_kernels::cache::{self, LocalDisk, Manifest, PrunePolicy, Storage};
use scene_kernels::key::{CACHE_SCHEMA, EntryKind, KeyInputs};

/// Writes `n` incore entries of ~1 KiB (a small kernel's size): the first
/// through [`Storage::put`], the rest as the same files written directly
/// (`put` syncs every file and directory, which on a shared CI disk is
/// milliseconds an entry and would measure the disk, not the scan).
fn synthesise(dir: &Path, n: usize) {
    let disk = LocalDisk::new(dir);
    for i in 0..n {
        let mut inputs = KeyInputs::default();
        inputs.0.insert("schema".into(), CACHE_SCHEMA.to_string());
        inputs
            .0
            .insert("unit".into(), format!("scene{}/k{i}", i / 40));
        let key = inputs.key();
        let artifact: Vec<u8> = (0..1024u32).map(|b| (b as usize ^ i) as u8).collect();
        let m = Manifest::new(key, EntryKind::Incore, &artifact, &inputs, "s/u", 0.1);
        if i == 0 {
            disk.put(&key, &artifact, &m.to_bytes()).expect("put");
            continue;
        }
        std::fs::create_dir_all(disk.entry_dir(&key)).expect("mkdir");
        std::fs::write(disk.artifact_path(&key), &artifact).expect("write");
        std::fs::write(disk.manifest_path(&key), m.to_bytes()).expect("write");
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn per_entry_us(started: Instant, n: usize) -> f64 {
    started.elapsed().as_secs_f64() * 1e6 / n as f64
}

#[test]
#[ignore = "scale measurement: minutes and 200,000 files"]
fn whole_cache_operations_grow_linearly() {
    let sizes: Vec<usize> = std::env::var("SCENE_SCALE_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    for n in sizes {
        let dir = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        synthesise(dir.path(), n);
        let put = per_entry_us(started, n);

        let started = Instant::now();
        let stats = cache::stats(dir.path(), 10).expect("stats");
        let stats_us = per_entry_us(started, n);
        assert_eq!(stats.entries.entries, n);

        let started = Instant::now();
        let verify = cache::verify_all(dir.path()).expect("verify");
        let verify_us = per_entry_us(started, n);
        assert_eq!(verify.entries.checked, n);
        assert!(verify.is_clean());

        let started = Instant::now();
        let prune = cache::prune(dir.path(), &PrunePolicy::default()).expect("prune");
        let prune_us = per_entry_us(started, n);
        assert_eq!(prune.entries.kept, n);

        let started = Instant::now();
        let listed = LocalDisk::new(dir.path()).list().expect("list").len();
        let list_us = per_entry_us(started, n);
        assert_eq!(listed, n);

        println!(
            "cache_scale n={n}: write {put:.1} us/entry, stats {stats_us:.1} us/entry, \
             verify {verify_us:.1} us/entry, prune {prune_us:.1} us/entry, \
             list {list_us:.2} us/entry, peak RSS {} MiB",
            peak_rss_kib() / 1024
        );
    }
}
