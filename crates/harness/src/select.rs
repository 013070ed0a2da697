//! Which cases a run covers: `scene::case` ids filtered by text, platform
//! and the `manual` flag.

use std::sync::Arc;

use crate::scene::{Case, Scene};

/// One selected `scene::case`.
#[derive(Clone, Debug)]
pub struct SelectedCase {
    pub scene: Arc<Scene>,
    pub case: usize,
}

impl SelectedCase {
    pub fn case(&self) -> &Case {
        &self.scene.cases[self.case]
    }
    /// Cards the case holds in its device stage: its ranks (level 3),
    /// else the scene's `devices`.
    pub fn cards(&self) -> usize {
        self.case().group.map_or(self.scene.devices, |g| g.ranks)
    }
    pub fn id(&self) -> String {
        format!("{}::{}", self.scene.name, self.case().name)
    }
}

/// Whether `id` (`scene::case`) matches the filters: it contains any of
/// them, or there are none.
pub fn matches_filters(id: &str, filters: &[String]) -> bool {
    filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str()))
}

/// Cases of `scenes` enabled on `platform` (a scene platform name, as
/// scene.toml spells it) whose `scene::case` contains any of `filters`
/// (every case when there are none); `manual` cases only when asked or
/// named exactly by one of them.
pub fn select_cases(
    scenes: &[Arc<Scene>],
    filters: &[String],
    platform: crate::platform::BuiltinPlatform,
    include_manual: bool,
) -> Vec<SelectedCase> {
    let mut out = Vec::new();
    for scene in scenes {
        for (i, case) in scene.cases.iter().enumerate() {
            let sel = SelectedCase {
                scene: Arc::clone(scene),
                case: i,
            };
            let id = sel.id();
            if !matches_filters(&id, filters) {
                continue;
            }
            if !scene.case_enabled_on(case, platform.as_str()) {
                continue;
            }
            if case.manual.on(platform.as_str()) && !include_manual && !filters.contains(&id) {
                continue;
            }
            out.push(sel);
        }
    }
    out
}

/// Cases of `scenes` whose `scene::case` matches `filters` and that run on
/// hardware only (their platforms are all hardware platforms such as
/// `a2a3`): no simulator runs them, `scene list` shows them marked.
pub fn hardware_only_cases(scenes: &[Arc<Scene>], filters: &[String]) -> Vec<SelectedCase> {
    let mut out = Vec::new();
    for scene in scenes {
        for (i, case) in scene.cases.iter().enumerate() {
            let sel = SelectedCase {
                scene: Arc::clone(scene),
                case: i,
            };
            if matches_filters(&sel.id(), filters) && scene.case_hardware_only(case) {
                out.push(sel);
            }
        }
    }
    out
}

/// Why a selection is empty, case by case: the cases `filters` match
/// that are manual on `platform` (they need `--include-manual`) or run on
/// hardware only. Empty when nothing matches at all.
pub fn why_not_selected(
    scenes: &[Arc<Scene>],
    filters: &[String],
    platform: crate::platform::BuiltinPlatform,
) -> Vec<String> {
    let mut out: Vec<String> = select_cases(scenes, filters, platform, true)
        .iter()
        .filter(|c| c.case().manual.on(platform.as_str()))
        .map(|c| format!("case {} is manual: add --include-manual", c.id()))
        .collect();
    out.extend(hardware_only_cases(scenes, filters).iter().map(|c| {
        format!(
            "case {} runs on hardware only ({}), not on {platform}",
            c.id(),
            c.scene.case_platforms(c.case()).join(", ")
        )
    }));
    out
}

/// The scenes of `cases`, each once, in selection order.
/// Linear in the cases (a set of the names seen, not a scan of the scenes
/// kept: that was quadratic, 90% of a warm 100k-unit `scene compile`).
pub fn distinct_scenes(cases: &[SelectedCase]) -> Vec<Arc<Scene>> {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut scenes: Vec<Arc<Scene>> = Vec::new();
    for c in cases {
        if seen.insert(c.scene.name.as_str()) {
            scenes.push(Arc::clone(&c.scene));
        }
    }
    scenes
}

/// `--partition hash:K/N` or `slice:K/N`: the share of a selection one of
/// `N` runners takes (K counts from 1), as `cargo nextest --partition`
/// splits a suite. Applied after every other filter (text, platform,
/// `manual`). The `N` partitions of a selection are pairwise disjoint and
/// cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partition {
    /// The cases whose stable hash of `scene::case` is `K - 1` modulo
    /// `N`: a case stays in its partition when other cases or scenes are
    /// added or removed.
    Hash { shard: u64, total: u64 },
    /// The K-th of every N cases of the selection sorted by `scene::case`:
    /// even sizes, but adding a case can move others.
    Slice { shard: u64, total: u64 },
}

/// A `--partition` value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    #[error("`{0}`: expected hash:K/N or slice:K/N (K from 1 to N)")]
    Kind(String),
    #[error("`{0}`: expected K/N after `{1}:`, two whole numbers (K from 1 to N)")]
    Numbers(String, &'static str),
    #[error("`{0}`: N (the number of partitions) must be at least 1")]
    ZeroTotal(String),
    #[error("`{value}`: K must be from 1 to {total} (partitions count from 1)")]
    ShardOutOfRange { value: String, total: u64 },
}

impl std::str::FromStr for Partition {
    type Err = PartitionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| PartitionError::Kind(s.to_string()))?;
        let kind: &'static str = match kind {
            "hash" => "hash",
            "slice" => "slice",
            _ => return Err(PartitionError::Kind(s.to_string())),
        };
        let numbers = || PartitionError::Numbers(s.to_string(), kind);
        let (k, n) = rest.split_once('/').ok_or_else(numbers)?;
        let whole = |t: &str| {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(numbers());
            }
            t.parse::<u64>().map_err(|_| numbers())
        };
        let (shard, total) = (whole(k)?, whole(n)?);
        if total == 0 {
            return Err(PartitionError::ZeroTotal(s.to_string()));
        }
        if shard == 0 || shard > total {
            return Err(PartitionError::ShardOutOfRange {
                value: s.to_string(),
                total,
            });
        }
        Ok(match kind {
            "hash" => Partition::Hash { shard, total },
            _ => Partition::Slice { shard, total },
        })
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Partition::Hash { shard, total } => write!(f, "hash:{shard}/{total}"),
            Partition::Slice { shard, total } => write!(f, "slice:{shard}/{total}"),
        }
    }
}

/// The stable hash `--partition hash:` buckets by: the first 8 bytes of
/// the blake3 digest of `scene::case`, little-endian. Fixed across
/// processes, machines and releases (never std's randomised hasher).
pub fn partition_hash(id: &str) -> u64 {
    let digest = blake3::hash(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

impl Partition {
    /// Whether the case `id` (`scene::case`) of a selection is in this
    /// partition; `rank` is its 0-based index in the selection's ids
    /// sorted (used by `slice:` only).
    fn takes(&self, id: &str, rank: usize) -> bool {
        match *self {
            Partition::Hash { shard, total } => partition_hash(id) % total == shard - 1,
            Partition::Slice { shard, total } => rank as u64 % total == shard - 1,
        }
    }

    /// The ids of `ids` in this partition, in their order (for selections
    /// known only by name, such as a report's entries).
    pub fn apply_ids<'a>(&self, ids: &[&'a str]) -> Vec<&'a str> {
        let mut sorted: Vec<&str> = ids.to_vec();
        sorted.sort_unstable();
        ids.iter()
            .copied()
            .filter(|id| self.takes(id, sorted.binary_search(id).unwrap_or(0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_filters_match_any_of_them() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches_filters("softmax::small", &[]));
        assert!(matches_filters("softmax::small", &f(&["softmax"])));
        assert!(!matches_filters("softmax::small", &f(&["rmsnorm"])));
        assert!(matches_filters(
            "softmax::small",
            &f(&["rmsnorm", "max::sm"])
        ));
        assert!(matches_filters("rmsnorm::odd", &f(&["softmax", "rmsnorm"])));
        assert!(!matches_filters("gemm::tall", &f(&["softmax", "rmsnorm"])));
    }

    #[test]
    fn partitions_parse_and_refuse_clearly() {
        assert_eq!(
            "hash:1/3".parse::<Partition>(),
            Ok(Partition::Hash { shard: 1, total: 3 })
        );
        assert_eq!(
            "slice:3/3".parse::<Partition>(),
            Ok(Partition::Slice { shard: 3, total: 3 })
        );
        assert_eq!(
            "hash:2/5".parse::<Partition>().unwrap().to_string(),
            "hash:2/5"
        );
        let err = |s: &str| s.parse::<Partition>().unwrap_err().to_string();
        assert!(
            err("hash:0/3").contains("K must be from 1 to 3"),
            "{}",
            err("hash:0/3")
        );
        assert!(
            err("hash:4/3").contains("K must be from 1 to 3"),
            "{}",
            err("hash:4/3")
        );
        assert!(
            err("foo:1/2").contains("expected hash:K/N or slice:K/N"),
            "{}",
            err("foo:1/2")
        );
        assert!(err("count:1/2").contains("`count:1/2`"));
        assert!(err("hash:1/0").contains("at least 1"));
        for bad in [
            "hash:",
            "hash:1",
            "hash:a/2",
            "hash:-1/2",
            "hash:1/2/3",
            "slice:+1/2",
            "hash",
        ] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
            assert!(err(bad).contains(bad), "{bad}: {}", err(bad));
        }
    }

    #[test]
    fn partitions_are_disjoint_and_cover() {
        let names: Vec<String> = (0..40).map(|i| format!("s{}::c{}", i % 7, i)).collect();
        let ids: Vec<&str> = names.iter().map(String::as_str).collect();
        for total in 1..=5 {
            for make in [
                (|shard, total| Partition::Hash { shard, total }) as fn(u64, u64) -> Partition,
                |shard, total| Partition::Slice { shard, total },
            ] {
                let mut seen: Vec<&str> = Vec::new();
                for shard in 1..=total {
                    seen.extend(make(shard, total).apply_ids(&ids));
                }
                seen.sort_unstable();
                let mut all = ids.clone();
                all.sort_unstable();
                assert_eq!(seen, all, "N = {total}");
            }
        }
    }

    #[test]
    fn the_hash_is_fixed() {
        // A changed hash would move every case between runners: pinned.
        assert_eq!(
            partition_hash("vector_example::small"),
            7_664_045_004_183_069_191
        );
        let a = partition_hash("gemm::square");
        assert_eq!(a, partition_hash("gemm::square"));
        assert_ne!(a, partition_hash("gemm::squarf"));
    }
}
