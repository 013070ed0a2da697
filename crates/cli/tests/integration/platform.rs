//! Platforms as data: the committed `scene-platforms.toml` entry that builds
//! every scene with a second real toolchain (clang + ld.lld), run through the
//! real `scene` binary, and a platform whose tool is missing.

use crate::common;

use std::path::{Path, PathBuf};

use common::TestEnv;

fn workspace_file(name: &str) -> PathBuf {
    common::workspace_root().join(name)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// A shell wrapper that logs its name to `log`, then runs `tool`.
fn wrapper(dir: &Path, tool: &str, log: &Path) -> PathBuf {
    let path = dir.join(format!("{tool}-wrapper"));
    scene_util::write_executable(
        &path,
        format!(
            "#!/bin/sh\necho {tool} >> '{}'\nexec {tool} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn clang_and_lld_platform_passes_every_scene() {
    if !on_path("clang") || !on_path("ld.lld") {
        println!("skipped: clang or ld.lld not installed (.ci/run installs them)");
        return;
    }
    let env = TestEnv::new();
    let log = env.dir.path().join("tools.log");
    let cc = wrapper(env.dir.path(), "clang", &log);
    let ld = wrapper(env.dir.path(), "ld.lld", &log);
    // The committed entry, with only its tools swapped for logging wrappers.
    let committed = std::fs::read_to_string(workspace_file("scene-platforms.toml")).unwrap();
    assert!(committed.contains("cc = \"clang\"") && committed.contains("ld = \"ld.lld\""));
    let table = committed
        .replace("cc = \"clang\"", &format!("cc = \"{}\"", cc.display()))
        .replace("ld = \"ld.lld\"", &format!("ld = \"{}\"", ld.display()));
    let table_path = env.dir.path().join("scene-platforms.toml");
    std::fs::write(&table_path, table).unwrap();

    let (out, report) = env.run_with_report_using(&["run", "--platform", "a2a3sim-clang"], |cmd| {
        cmd.env("SCENE_PLATFORMS_FILE", &table_path);
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let cases = report["cases"].as_array().unwrap();
    // Every case the built-in a2a3sim platform selects, all passed (the
    // list also shows hardware-only cases, marked, which no sim runs).
    let listed = env
        .scene(&["list", "--platform", "a2a3sim"])
        .output()
        .unwrap();
    let expected = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| !l.contains("[hardware only"))
        .count();
    assert!(expected >= 18, "{expected}");
    assert_eq!(cases.len(), expected, "{text}");
    assert!(cases.iter().all(|c| c["status"] == "passed"), "{text}");
    assert_eq!(report["platform"], "a2a3sim-clang");
    // clang compiled and ld.lld linked (and nothing else did).
    let used = std::fs::read_to_string(&log).unwrap();
    assert!(used.lines().any(|l| l == "clang"), "{used}");
    assert!(used.lines().any(|l| l == "ld.lld"), "{used}");
}

#[test]
fn a_platform_whose_tool_is_missing_says_which() {
    let env = TestEnv::new();
    let table_path = env.dir.path().join("platforms.toml");
    std::fs::write(
        &table_path,
        "[platforms.broken]\nextends = \"a2a3sim\"\ncc = \"no-such-compiler-xyz\"\n",
    )
    .unwrap();
    let out = env
        .scene(&["run", "--platform", "broken", "vector_example"])
        .env("SCENE_PLATFORMS_FILE", &table_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A setup error (exit 3), not a failed case.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(line.len(), 1, "{stderr}");
    assert!(
        line[0].contains("`no-such-compiler-xyz`") && line[0].contains("not found"),
        "{stderr}"
    );
    // The line names the platform entry and which tool it is.
    assert!(
        line[0].contains("platform `broken`: compiler `no-such-compiler-xyz` not found"),
        "{stderr}"
    );

    // Same for the linker, in an entry that does not say `extends`.
    std::fs::write(
        &table_path,
        "[platforms.nold]\nscenes = \"a2a3sim\"\nld = \"no-such-linker-xyz\"\n",
    )
    .unwrap();
    let out = env
        .scene(&["compile", "--platform", "nold", "vector_example"])
        .env("SCENE_PLATFORMS_FILE", &table_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let line: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(line.len(), 1, "{stderr}");
    assert!(
        line[0].contains("platform `nold`: linker `no-such-linker-xyz` not found"),
        "{stderr}"
    );

    // A malformed entry is a usage error naming the file and the field.
    std::fs::write(&table_path, "[platforms.x]\nextends = \"a9\"\n").unwrap();
    let out = env
        .scene(&["list", "--platform", "x"])
        .env("SCENE_PLATFORMS_FILE", &table_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("platforms.toml") && stderr.contains("platforms.x.extends"),
        "{stderr}"
    );
}

#[test]
fn an_entry_runtime_is_the_library_a_run_loads() {
    let env = TestEnv::new();
    let table_path = env.dir.path().join("platforms.toml");
    std::fs::write(
        &table_path,
        "[platforms.vendor]\nextends = \"a2a3sim\"\nruntime = \"lib/no-such-runtime.so\"\n",
    )
    .unwrap();
    let out = env
        .scene(&["run", "--platform", "vendor", "vector_example"])
        .env("SCENE_PLATFORMS_FILE", &table_path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The entry's library (relative to the file) is what the run tried to load.
    assert_ne!(out.status.code(), Some(0), "{text}");
    let expected = env.dir.path().join("lib/no-such-runtime.so");
    assert!(text.contains(&expected.display().to_string()), "{text}");
}
