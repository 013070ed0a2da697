//! The persistent cache through the builder, with the real host compiler,
//! in temp cache dirs.

mod common;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{ORCH_SRC, Root, incore, kernel_src, orch, spec, toolchain};
use scene_kernels::cache::{self, CacheConfig, EntryKind, LocalDisk, StatKind, Storage};
use scene_kernels::{
    BuildOptions, Builder, CACHE_SCHEMA, CallableSpec, CoreType, MissReason, UnitOutcome,
};

/// A compiler that logs its arguments, one line per process, then runs `cc`.
struct LoggingCc {
    _dir: tempfile::TempDir,
    path: PathBuf,
    log: PathBuf,
}

impl LoggingCc {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("cc.log");
        let path = dir.path().join("cc-wrapper");
        scene_util::write_executable(
            &path,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\nexec cc \"$@\"\n",
                log.display()
            ),
        )
        .expect("write wrapper");
        LoggingCc {
            _dir: dir,
            path,
            log,
        }
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn compiles_of(&self, source: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.split(' ').any(|a| a == source))
            .count()
    }

    fn reset(&self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

type Warnings = Arc<Mutex<Vec<String>>>;

fn cached_builder(root: &Root, cc: &Path, config: CacheConfig) -> (Builder, Warnings) {
    let warnings: Warnings = Arc::default();
    let sink = Arc::clone(&warnings);
    let config = config.with_warn(Arc::new(move |w| {
        sink.lock().expect("warnings").push(w.to_owned());
    }));
    let options = BuildOptions {
        workers: NonZeroUsize::new(2).expect("non-zero"),
        work_dir: None,
        cache: Some(config),
        ..BuildOptions::default()
    };
    let builder =
        Builder::new(root.path(), toolchain().with_compiler(cc), options).expect("builder");
    (builder, warnings)
}

/// Two incores sharing `include/common.h`, one also including `extra.h`
/// through it (transitively), and an orchestration.
fn scene(root: &Root) -> CallableSpec {
    root.write("orch.c", ORCH_SRC);
    root.write("include/extra.h", "#define EXTRA 1.0f\n");
    root.write("include/mid.h", "#include \"extra.h\"\n");
    root.write(
        "add.c",
        &kernel_src("+").replace(
            "#include \"scene_kernel.h\"",
            "#include \"scene_kernel.h\"\n#include \"mid.h\"",
        ),
    );
    root.write("mul.c", &kernel_src("*"));
    spec(
        "s",
        orch("orch.c", "run_orch"),
        vec![
            incore("mul", 1, CoreType::Aiv, "mul.c"),
            incore("add", 0, CoreType::Aiv, "add.c"),
        ],
    )
}

fn miss_of<'a>(out: &'a scene_kernels::BuildOutput, unit: &str) -> &'a MissReason {
    out.units
        .iter()
        .find(|u| u.unit == unit)
        .and_then(|u| u.miss.as_ref())
        .unwrap_or_else(|| panic!("{unit} has no miss reason: {:?}", out.units))
}

#[test]
fn second_builder_is_served_from_disk_without_starting_the_compiler() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);

    let (cold, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let first = cold.build_all(std::slice::from_ref(&spec));
    assert_eq!(first.count(UnitOutcome::Compiled), 3);
    assert_eq!(
        miss_of(&first, "s/add"),
        &MissReason::NoPreviousEntry,
        "empty cache"
    );
    let built = first.callables[0].as_ref().expect("builds").clone();
    drop(cold);
    cc.reset();

    let (warm, warnings) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let second = warm.build_all(std::slice::from_ref(&spec));
    assert_eq!(second.count(UnitOutcome::Cached), 3, "{:?}", second.units);
    assert!(second.units.iter().all(|u| u.miss.is_none()));
    assert_eq!(
        cc.lines(),
        Vec::<String>::new(),
        "a warm build starts no compiler process, not even --version"
    );
    assert_eq!(second.callables[0].as_ref().expect("builds"), &built);
    warm.forget_artifacts();
    assert_eq!(
        warm.build(&spec).expect("builds from the cache").as_ref(),
        built.as_ref(),
        "the cache entries assemble the same callable"
    );
    assert!(warnings.lock().expect("warnings").is_empty());
    drop(warm);

    let stats = cache::stats(cache_dir.path(), 10).expect("stats");
    let count = |kind| stats.entries.by_kind.get(&StatKind::Kind(kind));
    assert_eq!(count(EntryKind::Callable), Some(&1));
    assert_eq!(count(EntryKind::Incore), Some(&2));
    assert_eq!(stats.runs.len(), 2, "one stats line per builder");
    assert_eq!((stats.runs[0].compiles, stats.runs[0].hits), (3, 0));
    // Three units from build_all, the same three again from the second build.
    assert_eq!((stats.runs[1].compiles, stats.runs[1].hits), (0, 6));
    assert!(stats.runs[1].saved_s > 0.0);
}

#[test]
fn explain_names_the_changed_header_define_and_compiler() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let mut spec = scene(&root);
    let build = |spec: &CallableSpec, cc: &Path| {
        let (b, _) = cached_builder(&root, cc, CacheConfig::new(cache_dir.path()));
        b.build_all(std::slice::from_ref(spec))
    };
    build(&spec, &cc.path);

    // A transitively included header: only the unit including it recompiles.
    root.write("include/extra.h", "#define EXTRA 2.0f\n");
    cc.reset();
    let out = build(&spec, &cc.path);
    assert_eq!(out.count(UnitOutcome::Compiled), 1, "{:?}", out.units);
    assert_eq!(out.count(UnitOutcome::Cached), 2);
    assert_eq!((cc.compiles_of("add.c"), cc.compiles_of("mul.c")), (1, 0));
    let why = miss_of(&out, "s/add").to_string();
    assert!(why.contains("file:include/extra.h changed"), "{why}");
    assert!(!why.contains("add.c"), "only the header changed: {why}");

    // A define: a flag of that unit only.
    spec.incores[0].defines.push(("TILE".into(), "64".into()));
    let out = build(&spec, &cc.path);
    assert_eq!(out.count(UnitOutcome::Compiled), 1);
    let why = miss_of(&out, "s/mul").to_string();
    assert!(why.contains("defines changed: +TILE=64"), "{why}");

    // Another compiler (same real cc behind a different wrapper).
    let other = LoggingCc::new();
    std::fs::write(
        &other.path,
        format!(
            "#!/bin/sh\n# another build of the compiler\necho \"$*\" >> '{}'\nexec cc \"$@\"\n",
            other.log.display()
        ),
    )
    .expect("rewrite wrapper");
    let out = build(&spec, &other.path);
    assert_eq!(out.count(UnitOutcome::Compiled), 3, "{:?}", out.units);
    let why = miss_of(&out, "s/orch").to_string();
    assert!(why.contains("compiler.digest changed"), "{why}");
    assert!(why.contains("compiler.path changed"), "{why}");
}

#[test]
fn a_schema_bump_invalidates_every_entry() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    b.build_all(std::slice::from_ref(&spec));
    drop(b);

    let mut bumped = CacheConfig::new(cache_dir.path());
    bumped.schema = CACHE_SCHEMA + 1;
    let (b, warnings) = cached_builder(&root, &cc.path, bumped);
    let out = b.build_all(std::slice::from_ref(&spec));
    assert_eq!(out.count(UnitOutcome::Compiled), 3, "{:?}", out.units);
    let why = miss_of(&out, "s/add").to_string();
    assert!(why.contains("schema changed"), "{why}");
    assert!(
        warnings.lock().expect("warnings").is_empty(),
        "old entries are unreachable, not damaged"
    );
    assert!(
        cache::verify_all(cache_dir.path())
            .expect("verify")
            .is_clean()
    );
}

#[test]
fn a_corrupt_entry_is_removed_with_a_warning_and_rebuilt() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let first = b.build_all(std::slice::from_ref(&spec));
    let good = first.callables[0].as_ref().expect("builds").clone();
    drop(b);
    let add_key = first
        .units
        .iter()
        .find(|u| u.unit == "s/add")
        .and_then(|u| u.key)
        .expect("key");
    let disk = LocalDisk::new(cache_dir.path());
    let artifact = disk.artifact_path(&add_key);
    let mut bytes = std::fs::read(&artifact).expect("artifact");
    bytes[0] ^= 0xff;
    std::fs::write(&artifact, &bytes).expect("corrupt");

    let (b, warnings) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    assert!(
        matches!(
            b.cache().expect("cache").lookup(&add_key),
            cache::Lookup::Damaged(_)
        ),
        "never served damaged"
    );
    cc.reset();
    let out = b.build_all(std::slice::from_ref(&spec));
    assert_eq!(out.callables[0].as_ref().expect("builds"), &good);
    assert_eq!(cc.compiles_of("add.c"), 1);
    assert!(matches!(miss_of(&out, "s/add"), MissReason::Damaged(_)));
    let warnings = warnings.lock().expect("warnings").clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(&add_key.to_hex()), "{warnings:?}");
    assert!(disk.get(&add_key).expect("get").is_some(), "republished");
    assert!(
        cache::verify_all(cache_dir.path())
            .expect("verify")
            .is_clean()
    );
}

#[test]
fn an_unusable_cache_dir_warns_once_and_builds_without_it() {
    let root = Root::new();
    let blocker = tempfile::NamedTempFile::new().expect("file");
    // A path under a regular file cannot be created, even by root.
    let dir = blocker.path().join("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, warnings) = cached_builder(&root, &cc.path, CacheConfig::new(&dir));
    let out = b.build_all(std::slice::from_ref(&spec));
    assert!(out.callables[0].is_ok());
    assert!(b.cache().is_none());
    let again = b.build_all(std::slice::from_ref(&spec));
    assert_eq!(
        again.count(UnitOutcome::Reused),
        3,
        "the in-process memo still works"
    );
    let warnings = warnings.lock().expect("warnings").clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("cache"), "{warnings:?}");
    assert!(!dir.exists());
}

#[test]
fn a_hit_refreshes_the_entry_mtime() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    b.build_all(std::slice::from_ref(&spec));
    drop(b);
    let disk = LocalDisk::new(cache_dir.path());
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for e in disk.list().expect("list") {
        std::fs::File::options()
            .write(true)
            .open(disk.manifest_path(&e.key))
            .expect("manifest")
            .set_modified(old)
            .expect("age it");
    }
    let mut config = CacheConfig::new(cache_dir.path());
    config.prune_after_publish = false;
    let (b, _) = cached_builder(&root, &cc.path, config);
    let out = b.build_all(std::slice::from_ref(&spec));
    assert_eq!(out.count(UnitOutcome::Cached), 3);
    let listed = disk.list().expect("list");
    assert_eq!(listed.len(), 4, "three units and the callable");
    assert!(listed.iter().all(|e| e.last_used > old), "{listed:?}");
}

/// Compiler processes that compiled the builtins object.
fn builtins_compiles(cc: &LoggingCc) -> usize {
    cc.lines()
        .iter()
        .filter(|l| l.contains("scene_builtins.c"))
        .count()
}

/// Appends a comment to the first incore's source, so the next build must
/// compile and link that kernel (and so needs the builtins object).
fn edit_first_kernel(root: &Root, spec: &CallableSpec, n: usize) {
    let path = root.path().join(&spec.incores[0].source);
    let text = std::fs::read_to_string(&path).expect("kernel");
    std::fs::write(&path, format!("{text}\n/* edit {n} */\n")).expect("edit");
}

/// The builtins object is cached like a unit, in the support-object tier:
/// a second builder (a new process, in effect) with the same cache links a
/// changed kernel without compiling the builtins again, and `entries/`
/// still holds only the scene's units and callables.
#[test]
fn builtins_compile_once_per_cache_not_per_process() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    assert!(b.build_all(std::slice::from_ref(&spec)).callables[0].is_ok());
    drop(b);
    assert_eq!(builtins_compiles(&cc), 1, "{:?}", cc.lines());
    let objects = LocalDisk::objects(cache_dir.path());
    assert_eq!(objects.list().expect("list").len(), 1, "one core type");

    cc.reset();
    edit_first_kernel(&root, &spec, 1);
    let (b, warnings) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let out = b.build_all(std::slice::from_ref(&spec));
    assert!(out.callables[0].is_ok(), "{:?}", out.callables[0]);
    assert_eq!(out.count(UnitOutcome::Compiled), 1, "{:?}", out.units);
    assert_eq!(builtins_compiles(&cc), 0, "{:?}", cc.lines());
    assert_eq!(cc.compiles_of(&spec.incores[0].source.to_string_lossy()), 1);
    assert!(warnings.lock().expect("warnings").is_empty());
    drop(b);

    let stats = cache::stats(cache_dir.path(), 10).expect("stats");
    let builtins = StatKind::Kind(EntryKind::Builtins);
    assert_eq!(stats.objects.by_kind.get(&builtins), Some(&1));
    assert_eq!(stats.objects.entries, 1);
    assert_eq!(stats.entries.by_kind.get(&builtins), None);
    // Not a scene unit: the counters are the units' only.
    assert_eq!((stats.runs[0].compiles, stats.runs[0].hits), (3, 0));
    assert_eq!((stats.runs[1].compiles, stats.runs[1].hits), (1, 2));
}

#[test]
fn a_damaged_builtins_entry_is_detected_and_rebuilt() {
    let root = Root::new();
    let cache_dir = tempfile::tempdir().expect("cache");
    let cc = LoggingCc::new();
    let spec = scene(&root);
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let good = b.build_all(std::slice::from_ref(&spec)).callables[0]
        .as_ref()
        .expect("builds")
        .clone();
    drop(b);
    let objects = LocalDisk::objects(cache_dir.path());
    let listed = objects.list().expect("list");
    assert_eq!(listed.len(), 1);
    let key = listed[0].key;
    let artifact = objects.artifact_path(&key);
    let mut bytes = std::fs::read(&artifact).expect("artifact");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&artifact, &bytes).expect("corrupt");

    // An edited kernel must be linked again, with the builtins.
    edit_first_kernel(&root, &spec, 1);
    cc.reset();
    let (b, warnings) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let out = b.build_all(std::slice::from_ref(&spec));
    assert_eq!(
        out.callables[0].as_ref().expect("builds"),
        &good,
        "a comment changes no byte of the images"
    );
    assert_eq!(builtins_compiles(&cc), 1, "rebuilt: {:?}", cc.lines());
    let warnings = warnings.lock().expect("warnings").clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(&key.to_hex()), "{warnings:?}");
    assert!(warnings[0].contains("builtins/aiv"), "{warnings:?}");
    assert!(warnings[0].contains("damaged"), "{warnings:?}");
    drop(b);
    assert!(
        cache::verify_all(cache_dir.path())
            .expect("verify")
            .is_clean(),
        "the rebuilt object was republished intact"
    );
    assert_eq!(objects.list().expect("list").len(), 1);

    // verify finds damage in the support tier too, and removes it.
    let mut bytes = std::fs::read(&artifact).expect("artifact");
    bytes[mid] ^= 0xff;
    std::fs::write(&artifact, &bytes).expect("corrupt");
    let report = cache::verify_all(cache_dir.path()).expect("verify");
    assert!(report.entries.damaged.is_empty());
    assert_eq!(report.objects.checked, 1);
    assert_eq!(report.objects.damaged.len(), 1);
    assert_eq!(report.objects.damaged[0].0, key);
    assert!(objects.list().expect("list").is_empty());
}

/// A host program (a source linked with a driver into an executable) is a
/// unit of the cache: compiled once, then a hit for a new builder (a new
/// process) on the same cache, starting no compiler; a new key, so a
/// compile, when its source, a header it includes, or the driver changes.
/// A source that does not compile fails with the compiler's message.
#[test]
fn host_programs_are_cache_units_keyed_by_source_headers_and_driver() {
    let root = Root::new();
    root.write("include/answer.h", "#define ANSWER 41\n");
    root.write(
        "host.c",
        "#include \"answer.h\"\nint the_entry(void) { return ANSWER + 1; }\n",
    );
    let driver = "int ENTRY(void);\nint main(void) { return ENTRY() == 42 ? 0 : 1; }\n";
    let unit = |driver: &str| scene_kernels::HostUnit {
        label: "s".into(),
        name: "host.c:the_entry".into(),
        source: "host.c".into(),
        driver: Arc::from(driver),
        include_dirs: vec!["include".into()],
        defines: vec![("ENTRY".into(), "the_entry".into())],
    };
    let cc = LoggingCc::new();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let exe_dir = tempfile::tempdir().expect("tempdir");
    // Builds `unit` on a fresh builder: its outcome, key and exit code.
    let build = |unit: &scene_kernels::HostUnit| {
        let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
        let out = b.build_all_with_hosts(&[], std::slice::from_ref(unit));
        assert_eq!(out.units.len(), 1);
        assert_eq!(out.units[0].kind, scene_kernels::UnitKind::Host);
        assert_eq!(out.units[0].unit, "s/host.c:the_entry");
        let bytes = out.hosts[0].as_ref().expect("builds").clone();
        let exe = exe_dir.path().join("host");
        let _ = std::fs::remove_file(&exe);
        scene_util::write_executable(&exe, bytes.as_slice()).expect("write");
        let status = std::process::Command::new(&exe).status().expect("runs");
        (out.units[0].outcome, out.units[0].key, status.code())
    };

    let (outcome, first, code) = build(&unit(driver));
    assert_eq!(outcome, UnitOutcome::Compiled);
    assert_eq!(code, Some(0), "the host program calls the entry");
    assert_eq!(cc.compiles_of("host.c"), 1, "{:?}", cc.lines());

    cc.reset();
    let (outcome, key, code) = build(&unit(driver));
    assert_eq!(outcome, UnitOutcome::Cached);
    assert_eq!((key, code), (first, Some(0)));
    let compiles: Vec<String> = cc
        .lines()
        .into_iter()
        .filter(|l| l.trim() != "--version")
        .collect();
    assert!(
        compiles.is_empty(),
        "a hit starts no compiler: {compiles:?}"
    );

    // A header of its include closure.
    root.write("include/answer.h", "#define ANSWER 40\n");
    cc.reset();
    let (outcome, header_key, code) = build(&unit(driver));
    assert_eq!(outcome, UnitOutcome::Compiled);
    assert_ne!(header_key, first);
    assert_eq!(code, Some(1), "rebuilt with the edited header");
    assert_eq!(cc.compiles_of("host.c"), 1, "{:?}", cc.lines());

    // The source itself.
    root.write(
        "host.c",
        "#include \"answer.h\"\nint the_entry(void) { return ANSWER + 2; }\n",
    );
    let (outcome, source_key, code) = build(&unit(driver));
    assert_eq!(outcome, UnitOutcome::Compiled);
    assert!(source_key != header_key && source_key != first);
    assert_eq!(code, Some(0));

    // The driver's text.
    let other = driver.replace("42", "43");
    let (outcome, driver_key, code) = build(&unit(&other));
    assert_eq!(outcome, UnitOutcome::Compiled);
    assert!(driver_key != source_key);
    assert_eq!(code, Some(1));

    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let cache = b.cache().expect("cache");
    for key in [first, header_key, source_key, driver_key] {
        let key = key.expect("keyed");
        match cache.lookup(&key) {
            cache::Lookup::Hit { manifest, .. } => assert_eq!(manifest.kind, EntryKind::Host),
            _ => panic!("no entry for {key}"),
        }
    }
    drop(b);

    // A source that does not compile: the compiler's message names it.
    root.write("broken.c", "int the_entry(void) { return nope; }\n");
    let broken = scene_kernels::HostUnit {
        source: "broken.c".into(),
        ..unit(driver)
    };
    let (b, _) = cached_builder(&root, &cc.path, CacheConfig::new(cache_dir.path()));
    let out = b.build_all_with_hosts(&[], &[broken]);
    assert_eq!(out.units[0].outcome, UnitOutcome::Failed);
    let err = out.hosts[0]
        .as_ref()
        .expect_err("does not compile")
        .to_string();
    assert!(err.contains("broken.c") && err.contains("nope"), "{err}");
}
