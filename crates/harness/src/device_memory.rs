//! Device memory per case (issue 30): which setting is in force and where
//! it came from, what the case's tensors need of it, and the runtime
//! option that gives the device that much.
//!
//! Precedence, first that applies: `arena_mb=N` in the run's runtime
//! options (`SCENE_RUNTIME_OPTIONS`: an explicit override of the person
//! running, so it wins), the scene's `device_memory` (in this case), the
//! platform entry's `device_memory`, the simulator's built-in 256 MiB. The
//! scene's and the platform's are passed to the runtime's open as
//! `arena_mb` (rounded up to whole MiB), placed before the run's own
//! options so an explicit `arena_mb` there is the one the runtime keeps.
//!
//! The check before fixtures ([`check`]) compares the case's argument
//! tensors, as the simulator's allocator counts them, with that setting:
//! a case that cannot fit fails at once, without fixtures, golden or card.

use std::fmt;
use std::path::PathBuf;

use crate::config::RunConfig;
use crate::scene::{Case, Scene};
use crate::size::Bytes;

/// The simulator's device memory when nothing says otherwise (its
/// `arena_mb` default).
pub const DEFAULT_DEVICE_MEMORY: u64 = 256 << 20;
/// The runtime option sizing the simulator's device memory, in MiB.
pub const ARENA_OPTION: &str = "arena_mb";
/// The simulator's allocation granule (`memory.rs` `ALIGN`).
const ALIGN: u64 = 64;
/// The smallest host page: the simulator gives every allocation whole
/// pages, so on a 4 KiB-page host [`needed_bytes`] is exactly what its
/// allocator counts; on larger pages the true need is larger still.
const PAGE: u64 = 4096;

/// Where the device memory in force came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemorySource {
    /// `arena_mb=N` in the run's runtime options (`SCENE_RUNTIME_OPTIONS`).
    RuntimeOptions,
    /// The scene's `device_memory`, as written.
    Scene { manifest: PathBuf, written: String },
    /// The platform entry's `device_memory`.
    Platform(String),
    /// Nothing set it: the simulator's default.
    Builtin { platform: String },
}

/// The device memory a case runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    pub bytes: u64,
    pub source: MemorySource,
}

impl DeviceMemory {
    /// The `arena_mb` to add to the runtime's open options: only for a
    /// setting of the scene or the platform (the run's own options carry
    /// theirs already; the default needs none, and a runtime that is not
    /// the simulator sees the options it always saw).
    pub fn arena_option(&self) -> Option<u64> {
        match self.source {
            MemorySource::Scene { .. } | MemorySource::Platform(_) => {
                Some(self.bytes.div_ceil(1 << 20))
            }
            MemorySource::RuntimeOptions | MemorySource::Builtin { .. } => None,
        }
    }
}

impl fmt::Display for MemorySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemorySource::RuntimeOptions => write!(
                f,
                "`{ARENA_OPTION}` in SCENE_RUNTIME_OPTIONS, which wins over the scene's and the platform's `device_memory`"
            ),
            MemorySource::Scene { manifest, written } => {
                write!(f, "`device_memory = {written:?}` in {}", manifest.display())
            }
            MemorySource::Platform(p) => write!(
                f,
                "the `device_memory` of platform `{p}` in scene-platforms.toml"
            ),
            MemorySource::Builtin { platform } => write!(
                f,
                "the simulator's default: neither the scene nor platform `{platform}` sets `device_memory`"
            ),
        }
    }
}

/// The last `arena_mb=N` in a runtime options string (`key=value;...`),
/// as the simulator reads it; a malformed one (or 0) is left to the
/// runtime to refuse.
pub fn explicit_arena_mb(options: &str) -> Option<u64> {
    options
        .split(';')
        .filter_map(|item| item.split_once('='))
        .filter(|(k, _)| k.trim() == ARENA_OPTION)
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .next_back()
        .filter(|&mb| mb > 0)
}

/// What of the run decides a case's device memory besides its scene.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySettings {
    /// `arena_mb` in the run's runtime options.
    explicit_mb: Option<u64>,
    platform: String,
    /// The platform entry's `device_memory`.
    platform_memory: Option<u64>,
    /// The runtime is the simulator (no library named by the run or the
    /// platform), whose default is [`DEFAULT_DEVICE_MEMORY`].
    simulator: bool,
}

impl MemorySettings {
    pub fn of(config: &RunConfig) -> Self {
        Self {
            explicit_mb: explicit_arena_mb(&config.runtime_options),
            platform: config.platform.name().to_string(),
            platform_memory: config.platform.device_memory(),
            simulator: config.runtime_lib.is_none() && config.platform.runtime().is_none(),
        }
    }

    /// The device memory `case` runs with, and why; `None` when the
    /// runtime is not the simulator and nothing sets it (the device's
    /// memory is then the runtime's business, and nothing is checked).
    pub fn in_force(&self, scene: &Scene, case: &Case) -> Option<DeviceMemory> {
        if let Some(mb) = self.explicit_mb {
            return Some(DeviceMemory {
                bytes: mb.saturating_mul(1 << 20),
                source: MemorySource::RuntimeOptions,
            });
        }
        if let (Some(bytes), Some(spec)) = (case.device_memory, &scene.device_memory) {
            return Some(DeviceMemory {
                bytes,
                source: MemorySource::Scene {
                    manifest: scene.manifest.clone(),
                    written: spec.to_string(),
                },
            });
        }
        if let Some(bytes) = self.platform_memory {
            return Some(DeviceMemory {
                bytes,
                source: MemorySource::Platform(self.platform.clone()),
            });
        }
        self.simulator.then(|| DeviceMemory {
            bytes: DEFAULT_DEVICE_MEMORY,
            source: MemorySource::Builtin {
                platform: self.platform.clone(),
            },
        })
    }
}

/// Device memory the case's argument tensors take on one device (one
/// rank's, at level 3), as the simulator's allocator counts it: each
/// tensor rounded up to 64 bytes, then to whole 4 KiB pages. A lower
/// bound: buffers the orchestration allocates itself come on top.
/// `None` when the sum does not fit a `u64`.
pub fn needed_bytes(scene: &Scene, case: &Case) -> Option<u64> {
    scene
        .tensors
        .iter()
        .zip(&case.tensors)
        .try_fold(0u64, |total, (spec, t)| {
            let elements = t
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
            let mut bytes = elements.checked_mul(u64::try_from(t.dtype.size_of()).ok()?)?;
            if let Some(g) = case.group
                && spec.per_rank
            {
                bytes /= u64::try_from(g.ranks.max(1)).ok()?;
            }
            let held = bytes
                .max(1)
                .checked_next_multiple_of(ALIGN)?
                .checked_next_multiple_of(PAGE)?;
            total.checked_add(held)
        })
}

/// The case needs more device memory than it will have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "not run: the case's tensors need at least {needed} of device memory{per_rank}, more than the {have} in force ({source}); {fix}",
    needed = needed.map_or_else(|| "2^64 bytes".to_string(), |n| Bytes(n).to_string()),
    have = Bytes(memory.bytes),
    source = memory.source,
    per_rank = if *level3 { " per rank" } else { "" },
    fix = fix(memory, needed, manifest),
)]
pub struct DeviceMemoryError {
    /// `None`: more than fits a `u64`.
    pub needed: Option<u64>,
    pub memory: DeviceMemory,
    pub manifest: PathBuf,
    pub level3: bool,
}

/// A round size that holds `needed`: the next power of two of MiB.
fn suggestion(needed: u64) -> u64 {
    needed
        .div_ceil(1 << 20)
        .checked_next_power_of_two()
        .and_then(|mb| mb.checked_mul(1 << 20))
        .unwrap_or(u64::MAX)
}

fn fix(memory: &DeviceMemory, needed: &Option<u64>, manifest: &std::path::Path) -> String {
    let Some(needed) = *needed else {
        return "no device can hold it: check the case's shapes".into();
    };
    let size = suggestion(needed);
    match &memory.source {
        MemorySource::RuntimeOptions => format!(
            "raise it (SCENE_RUNTIME_OPTIONS={ARENA_OPTION}={}) or drop `{ARENA_OPTION}` from SCENE_RUNTIME_OPTIONS",
            size.div_ceil(1 << 20)
        ),
        MemorySource::Scene { .. } => format!(
            "change it to `device_memory = \"{}\"` in {}",
            Bytes(size),
            manifest.display()
        ),
        MemorySource::Platform(_) | MemorySource::Builtin { .. } => format!(
            "set `device_memory = \"{}\"` in {}",
            Bytes(size),
            manifest.display()
        ),
    }
}

/// Fails a case whose argument tensors cannot fit the device memory it
/// will have; passes when the memory is unknown (another runtime).
pub fn check(
    settings: &MemorySettings,
    scene: &Scene,
    case: &Case,
) -> Result<(), DeviceMemoryError> {
    let Some(memory) = settings.in_force(scene, case) else {
        return Ok(());
    };
    let needed = needed_bytes(scene, case);
    if needed.is_some_and(|n| n <= memory.bytes) {
        return Ok(());
    }
    Err(DeviceMemoryError {
        needed,
        memory,
        manifest: scene.manifest.clone(),
        level3: case.group.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scene of `x` (f32 [N, 4], in), `y` (f32 [N * 4], out) and one
    /// case `c` with N = 8 and `extra` added to scene.toml's top.
    fn load(extra: &str) -> Scene {
        let tmp = tempfile::Builder::new().prefix("scene").tempdir().unwrap();
        let dir = tmp.path().join("demo");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("orch.c"), "").unwrap();
        std::fs::write(dir.join("k.c"), "").unwrap();
        let text = format!(
            "name = \"demo\"\nplatforms = [\"a2a3sim\"]\ngolden = \"demo\"\n{extra}\n\
             [orchestration]\nsource = \"orch.c\"\nfunction = \"o\"\nsignature = [\"in\", \"out\"]\n\
             [[incores]]\nfunc_id = 0\nname = \"k\"\ncore = \"aiv\"\nsource = \"k.c\"\n\
             [[tensors]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"N\", 4]\n\
             [[tensors]]\nname = \"y\"\ndtype = \"f32\"\nshape = [\"N * 4\"]\n\
             [[cases]]\nname = \"c\"\nparams = {{ N = 8 }}\n\
             [[cases]]\nname = \"big\"\nparams = {{ N = 1048576 }}\n"
        );
        std::fs::write(dir.join("scene.toml"), text).unwrap();
        Scene::load(&dir).unwrap()
    }

    #[test]
    fn need_is_pages_of_every_tensor() {
        let scene = load("");
        // 8 * 4 * 4 = 128 bytes each: one 4 KiB page each.
        assert_eq!(needed_bytes(&scene, &scene.cases[0]), Some(2 * 4096));
        // 16 MiB each, already whole pages.
        assert_eq!(needed_bytes(&scene, &scene.cases[1]), Some(32 << 20));
        assert_eq!(scene.device_memory, None);
        assert_eq!(scene.cases[1].device_memory, None);
    }

    #[test]
    fn scene_device_memory_is_a_size_or_an_expression_per_case() {
        let scene = load("device_memory = \"1.5 GiB\"");
        assert_eq!(scene.cases[0].device_memory, Some(3 << 29));
        let scene = load("device_memory = \"N * 64 + 1048576\"");
        assert_eq!(scene.cases[0].device_memory, Some(512 + (1 << 20)));
        assert_eq!(scene.cases[1].device_memory, Some(65 << 20));
        let scene = load("device_memory = 4096");
        assert_eq!(scene.cases[1].device_memory, Some(4096));
    }

    #[test]
    fn precedence_is_options_scene_platform_default() {
        let mut scene = load("");
        let mut settings = MemorySettings {
            explicit_mb: None,
            platform: "p".into(),
            platform_memory: None,
            simulator: true,
        };
        let case = scene.cases[0].clone();
        let source = |s: &MemorySettings, scene: &Scene, case: &Case| {
            s.in_force(scene, case).map(|m| (m.bytes, m.source))
        };
        assert_eq!(
            source(&settings, &scene, &case),
            Some((
                DEFAULT_DEVICE_MEMORY,
                MemorySource::Builtin {
                    platform: "p".into()
                }
            ))
        );
        settings.simulator = false;
        assert_eq!(source(&settings, &scene, &case), None, "another runtime");
        settings.platform_memory = Some(1 << 30);
        assert_eq!(
            source(&settings, &scene, &case),
            Some((1 << 30, MemorySource::Platform("p".into())))
        );
        scene.device_memory = Some(crate::scene::DeviceMemorySpec::Size {
            text: "2 GiB".into(),
            bytes: 2 << 30,
        });
        let mut case = case;
        case.device_memory = Some(2 << 30);
        assert!(matches!(
            source(&settings, &scene, &case),
            Some((b, MemorySource::Scene { .. })) if b == 2 << 30
        ));
        settings.explicit_mb = Some(64);
        assert_eq!(
            source(&settings, &scene, &case),
            Some((64 << 20, MemorySource::RuntimeOptions))
        );
    }

    #[test]
    fn an_explicit_arena_is_the_last_one_written() {
        assert_eq!(explicit_arena_mb(""), None);
        assert_eq!(explicit_arena_mb("aiv=4"), None);
        assert_eq!(explicit_arena_mb("arena_mb=64"), Some(64));
        assert_eq!(
            explicit_arena_mb(" arena_mb = 8 ;aiv=1; arena_mb=1024"),
            Some(1024)
        );
        assert_eq!(explicit_arena_mb("arena_mb=lots"), None);
        assert_eq!(
            explicit_arena_mb("arena_mb=0"),
            None,
            "the runtime refuses it"
        );
    }

    #[test]
    fn the_arena_option_is_whole_mib_for_scene_and_platform_only() {
        let m = |bytes, source| DeviceMemory { bytes, source };
        let scene = MemorySource::Scene {
            manifest: "/s/scene.toml".into(),
            written: "786 MB".into(),
        };
        assert_eq!(m(786_000_000, scene).arena_option(), Some(750));
        assert_eq!(
            m(1 << 30, MemorySource::Platform("p".into())).arena_option(),
            Some(1024)
        );
        assert_eq!(m(1, MemorySource::RuntimeOptions).arena_option(), None);
        let builtin = MemorySource::Builtin {
            platform: "a2a3sim".into(),
        };
        assert_eq!(m(DEFAULT_DEVICE_MEMORY, builtin).arena_option(), None);
    }

    #[test]
    fn the_message_names_need_setting_source_and_fix() {
        let e = DeviceMemoryError {
            needed: Some((300 << 20) + 8192),
            memory: DeviceMemory {
                bytes: DEFAULT_DEVICE_MEMORY,
                source: MemorySource::Builtin {
                    platform: "a5sim".into(),
                },
            },
            manifest: "/s/scene.toml".into(),
            level3: false,
        };
        let text = e.to_string();
        for part in [
            "need at least 314580992 bytes (~301 MiB) of device memory",
            "more than the 256 MiB in force",
            "neither the scene nor platform `a5sim` sets `device_memory`",
            "set `device_memory = \"512 MiB\"` in /s/scene.toml",
        ] {
            assert!(text.contains(part), "{part}\n{text}");
        }
        let e = DeviceMemoryError {
            memory: DeviceMemory {
                bytes: 128 << 20,
                source: MemorySource::RuntimeOptions,
            },
            ..e
        };
        let text = e.to_string();
        assert!(
            text.contains("SCENE_RUNTIME_OPTIONS=arena_mb=512"),
            "{text}"
        );
    }
}
