//! `scene cache ...`: inspect and maintain the persistent kernel cache and
//! the golden cache beside it (`<cache dir>/goldens/`).
//!
//! The caches themselves (keys, entries, verification, locking) live in
//! `scene_kernels::cache` and `scene_harness::golden::cache`; this module is
//! only their command line.

use std::path::Path;

use scene_harness::golden::cache::GoldenCache;
use scene_harness::golden::python::provision::EnvCache;
use scene_kernels::cache::{self, PrunePolicy, RemoteConfig};
use scene_util::human_size;

use crate::args::CacheCommand;
use crate::error::CliError;
use crate::hiargs::CacheSetup;

/// Runs `scene cache <command>` against its directory. The configured
/// remote tier, if any: `stats` names it; every operation works on the
/// local directory only (the remote's own counters come from the run
/// history). An unreadable kernel cache directory is a setup error (3); a
/// damaged entry or an unreadable golden cache or Python environment
/// directory fails the command (1).
pub(crate) fn run(setup: &CacheSetup) -> Result<(), CliError> {
    let dir = setup.dir.as_path();
    match &setup.command {
        CacheCommand::Stats { runs } => stats(dir, setup.remote.as_ref(), *runs),
        CacheCommand::Verify => verify(dir),
        CacheCommand::Prune { max_age, max_size } => {
            let defaults = PrunePolicy::default();
            let policy = PrunePolicy {
                max_age: max_age.unwrap_or(defaults.max_age),
                max_size: max_size.unwrap_or(defaults.max_size),
            };
            prune(dir, &policy)
        }
        CacheCommand::Clear => clear(dir),
    }
}

/// A tier beside the kernel cache that could not be read or changed.
fn tier(e: impl std::error::Error + Send + Sync + 'static) -> CliError {
    CliError::CacheTier(Box::new(e))
}

fn clear(dir: &Path) -> Result<(), CliError> {
    let n = cache::clear(dir)?;
    println!("removed {} entries from {}", n.entries, dir.display());
    if n.objects > 0 {
        println!("removed {} support objects", n.objects);
    }
    // So do the managed Python environments (`python/`).
    let envs = python_envs(dir);
    if envs.root().is_dir() {
        let n = envs.clear().map_err(tier)?;
        println!(
            "removed the Python environments {} ({n} environments)",
            envs.root().display()
        );
    }
    // The golden cache shares the directory (`goldens/`).
    let goldens = golden_cache(dir);
    if goldens.root().is_dir() {
        let n = goldens.clear().map_err(tier)?;
        println!(
            "removed the golden cache {} ({n} entries)",
            goldens.root().display()
        );
    }
    Ok(())
}

/// The managed Python environments of the cache in `dir`.
fn python_envs(dir: &Path) -> EnvCache {
    EnvCache::new(dir.join("python"))
}

/// The golden cache of the cache in `dir`.
fn golden_cache(dir: &Path) -> GoldenCache {
    GoldenCache::in_dir(dir)
}

/// `N (n kind, ...), B bytes (human)` for one tier.
fn tier_line(t: &cache::TierStats) -> String {
    let kinds: Vec<String> = t.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(
        "{} ({}), {} bytes ({})",
        t.entries,
        if kinds.is_empty() {
            "none".to_owned()
        } else {
            kinds.join(", ")
        },
        t.bytes,
        human_size(t.bytes)
    )
}

fn stats(dir: &Path, remote: Option<&RemoteConfig>, runs: usize) -> Result<(), CliError> {
    let s = cache::stats(dir, runs)?;
    println!("cache: {}", dir.display());
    match remote {
        Some(r) => println!(
            "remote: {}{}",
            cache::redact_url(&r.url),
            if r.read_only { " (read-only)" } else { "" }
        ),
        None => println!("remote: none"),
    }
    println!("entries: {}", tier_line(&s.entries));
    println!("support objects: {}", tier_line(&s.objects));
    let g = golden_cache(dir).stats().map_err(tier)?;
    println!(
        "goldens: {}, {} bytes ({})",
        g.entries,
        g.bytes,
        human_size(g.bytes)
    );
    let envs = python_envs(dir).list().map_err(tier)?;
    let bytes: u64 = envs.iter().map(|e| e.bytes).sum();
    println!(
        "python environments: {}, {} bytes ({})",
        envs.len(),
        bytes,
        human_size(bytes)
    );
    for e in &envs {
        match &e.env {
            Some(env) => println!(
                "  {} ({}): from {}: {}",
                e.dir.display(),
                human_size(e.bytes),
                env.base,
                env.pinned()
            ),
            None => println!(
                "  {} ({}): half-built (prune removes it)",
                e.dir.display(),
                human_size(e.bytes)
            ),
        }
    }
    if s.runs.is_empty() {
        println!("no runs recorded");
        return Ok(());
    }
    println!("last {} runs:", s.runs.len());
    for r in &s.runs {
        println!(
            "  pid {:>7}: hits {:>4}, misses {:>4}, compiles {:>4}, compile {:.2} s, saved {:.2} s",
            r.pid, r.hits, r.misses, r.compiles, r.compile_s, r.saved_s
        );
    }
    let (hits, misses, compiles) = s.runs.iter().fold((0, 0, 0), |(h, m, c), r| {
        (h + r.hits, m + r.misses, c + r.compiles)
    });
    let saved: f64 = s.runs.iter().map(|r| r.saved_s).sum();
    println!("total: hits {hits}, misses {misses}, compiles {compiles}, time saved {saved:.2} s");
    let sum = |f: fn(&cache::RunStats) -> u64| s.runs.iter().map(f).sum::<u64>();
    let remote_hits = sum(|r| r.remote_hits);
    println!(
        "local: hits {}, misses {}",
        hits.saturating_sub(remote_hits),
        misses + remote_hits
    );
    let (read, written) = (
        sum(|r| r.remote_read_bytes),
        sum(|r| r.remote_written_bytes),
    );
    println!(
        "remote: hits {remote_hits}, misses {}, errors {}, read {read} bytes ({}), written {written} bytes ({})",
        sum(|r| r.remote_misses),
        sum(|r| r.remote_errors),
        human_size(read),
        human_size(written)
    );
    Ok(())
}

fn verify(dir: &Path) -> Result<(), CliError> {
    let report = cache::verify_all(dir)?;
    for (key, place, damage) in report.entries.damaged.iter().chain(&report.objects.damaged) {
        println!("damaged {key}: {damage} (removed {place})");
    }
    println!(
        "checked {} entries: {} damaged",
        report.entries.checked,
        report.entries.damaged.len()
    );
    println!(
        "checked {} support objects: {} damaged",
        report.objects.checked,
        report.objects.damaged.len()
    );
    let goldens = golden_cache(dir).verify().map_err(tier)?;
    for (key, place, why) in &goldens.damaged {
        println!("damaged golden {key}: {why} (removed {})", place.display());
    }
    println!(
        "checked {} golden entries: {} damaged",
        goldens.checked,
        goldens.damaged.len()
    );
    CliError::unless(!(report.is_clean() && goldens.damaged.is_empty()))
}

/// `removed N <what> (...), freed ...; kept N <what> (...)` for one tier.
fn prune_line(what: &str, r: &cache::PruneReport, policy: &PrunePolicy) -> String {
    format!(
        "removed {} {what} ({} unused for over {:.1} days, {} over the {} size limit), freed {}; \
         kept {} {what} ({})",
        r.removed_old + r.removed_for_size,
        r.removed_old,
        policy.max_age.as_secs_f64() / 86400.0,
        r.removed_for_size,
        human_size(policy.max_size),
        human_size(r.freed_bytes),
        r.kept,
        human_size(r.kept_bytes),
    )
}

fn prune(dir: &Path, policy: &PrunePolicy) -> Result<(), CliError> {
    let report = cache::prune(dir, policy)?;
    let r = &report.entries;
    println!(
        "{}; removed {} stale lock files",
        prune_line("entries", r, policy),
        report.stale_locks
    );
    let o = &report.objects;
    if o.removed_old + o.removed_for_size > 0 {
        println!(
            "removed {} support objects, freed {}; kept {} ({})",
            o.removed_old + o.removed_for_size,
            human_size(o.freed_bytes),
            o.kept,
            human_size(o.kept_bytes)
        );
    }
    let g = golden_cache(dir).prune(policy).map_err(tier)?;
    println!(
        "{}; removed {} stale golden records",
        prune_line("golden entries", &g.entries, policy),
        g.stale_records
    );
    let p = python_envs(dir).prune(policy.max_age).map_err(tier)?;
    println!(
        "removed {} Python environments (unused for over {:.1} days), freed {}; kept {}; removed {} half-built",
        p.removed,
        policy.max_age.as_secs_f64() / 86400.0,
        human_size(p.freed_bytes),
        p.kept,
        p.leftovers
    );
    let busy = r.busy + o.busy + g.entries.busy + p.busy;
    if busy > 0 {
        println!("skipped {busy} entries in use by another process");
    }
    Ok(())
}
