//! `scene cache ...`: inspect and maintain the persistent kernel cache.
//!
//! The cache itself (keys, entries, verification, locking) lives in
//! `scene_kernels::cache`; this module is only its command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{Args, Subcommand};
use scene_kernels::cache::{self, PrunePolicy};

/// `--cache-dir` given on the command line; wins over `SCENE_CACHE_DIR` for
/// every subcommand of this process (see [`crate::RunConfig::from_env`]).
static CACHE_DIR_FLAG: OnceLock<PathBuf> = OnceLock::new();

/// Records the global `--cache-dir` flag (once, from `cli::main`).
pub fn set_cache_dir_flag(dir: PathBuf) {
    let _ = CACHE_DIR_FLAG.set(dir);
}

/// The cache directory for `root`: `--cache-dir`, else `SCENE_CACHE_DIR`,
/// else `<root>/target/scene-cache`.
pub fn cache_dir(root: &Path) -> PathBuf {
    CACHE_DIR_FLAG
        .get()
        .cloned()
        .or_else(|| {
            std::env::var_os("SCENE_CACHE_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| root.join("target").join("scene-cache"))
}

#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Debug, Subcommand)]
enum CacheCommand {
    /// Entries, bytes, and hits/misses/compiles and time saved of the last runs.
    Stats {
        /// How many recent runs to show.
        #[arg(long, default_value_t = 10, value_name = "N")]
        runs: usize,
    },
    /// Check every entry against its manifest; remove and report damaged
    /// ones (exit 1 if any were damaged).
    Verify,
    /// Remove entries unused for longer than --max-age, then the least
    /// recently used until the cache is under --max-size.
    Prune {
        /// Maximum age in days since last use [default: 14].
        #[arg(long, value_name = "DAYS", value_parser = parse_days)]
        max_age: Option<Duration>,
        /// Maximum total size, in bytes (suffixes K, M, G, T = powers of 1024) [default: 5G].
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
        max_size: Option<u64>,
    },
    /// Remove every entry.
    Clear,
}

fn parse_days(s: &str) -> Result<Duration, String> {
    let days: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of days"))?;
    if !(days >= 0.0 && days.is_finite()) {
        return Err(format!("`{s}` is not a non-negative number of days"));
    }
    Ok(Duration::from_secs_f64(days * 86400.0))
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'B' => 0,
                _ => return Err(format!("`{s}`: unknown size suffix `{c}`")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

fn human(bytes: u64) -> String {
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

/// Runs `scene cache <command>` against `dir`.
pub fn run(dir: &Path, args: &CacheArgs) -> ExitCode {
    let result = match &args.command {
        CacheCommand::Stats { runs } => stats(dir, *runs),
        CacheCommand::Verify => verify(dir),
        CacheCommand::Prune { max_age, max_size } => {
            let defaults = PrunePolicy::default();
            let policy = PrunePolicy {
                max_age: max_age.unwrap_or(defaults.max_age),
                max_size: max_size.unwrap_or(defaults.max_size),
            };
            prune(dir, &policy)
        }
        CacheCommand::Clear => cache::clear(dir).map(|n| {
            println!("removed {n} entries from {}", dir.display());
            true
        }),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn stats(dir: &Path, runs: usize) -> Result<bool, cache::CacheError> {
    let s = cache::stats(dir, runs)?;
    println!("cache: {}", dir.display());
    let kinds: Vec<String> = s.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "entries: {} ({}), {} bytes ({})",
        s.entries,
        if kinds.is_empty() {
            "none".to_owned()
        } else {
            kinds.join(", ")
        },
        s.bytes,
        human(s.bytes)
    );
    if s.runs.is_empty() {
        println!("no runs recorded");
        return Ok(true);
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
    Ok(true)
}

fn verify(dir: &Path) -> Result<bool, cache::CacheError> {
    let report = cache::verify_all(dir)?;
    for (key, path, damage) in &report.damaged {
        println!("damaged {key}: {damage} (removed {})", path.display());
    }
    println!(
        "checked {} entries: {} damaged",
        report.checked,
        report.damaged.len()
    );
    Ok(report.damaged.is_empty())
}

fn prune(dir: &Path, policy: &PrunePolicy) -> Result<bool, cache::CacheError> {
    let r = cache::prune(dir, policy)?;
    println!(
        "removed {} entries ({} unused for over {:.1} days, {} over the {} size limit), freed {}; \
         kept {} entries ({}); removed {} stale lock files",
        r.removed_old + r.removed_for_size,
        r.removed_old,
        policy.max_age.as_secs_f64() / 86400.0,
        r.removed_for_size,
        human(policy.max_size),
        human(r.freed_bytes),
        r.kept,
        human(r.kept_bytes),
        r.stale_locks
    );
    if r.busy > 0 {
        println!("skipped {} entries in use by another process", r.busy);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_days_parse() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("5G"), Ok(5 << 30));
        assert_eq!(parse_bytes("2k"), Ok(2048));
        assert!(parse_bytes("5X").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        assert_eq!(parse_days("1"), Ok(Duration::from_secs(86400)));
        assert!(parse_days("-2").is_err());
        assert!(parse_days("soon").is_err());
    }
}
