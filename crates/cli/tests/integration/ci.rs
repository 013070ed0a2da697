//! CI support: `--partition hash:K/N|slice:K/N` on the real `scene` binary,
//! `scene report` over several partition reports (totals, JUnit read back
//! with `junitparser`), and `ci/simulate` running the two-pass workflow of
//! `ci/workflows/` as two runners (and failing when the cache restore step
//! is removed from it), and its failing-case scenario (`--break SCENE`):
//! one scene's kernel does not compile, and the workflow still runs every
//! other case on the cards and writes the summary (and a workflow that
//! stops at pass 1's failure fails that scenario).
//!
//! The Python parts (`junitparser`, PyYAML for `ci/simulate`) are installed
//! by `.ci/run`; without them these tests print why and skip, except under
//! CI (`CI` set), where a missing tool fails them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TestEnv, assert_success, copy_scene, run_ok, show};

/// The `scene::case` lines of `scene list ARGS` (hardware-only lines left out).
fn list(env: &TestEnv, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list"];
    all.extend_from_slice(args);
    let out = run_ok(&mut env.scene(&all));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.contains("[hardware only"))
        .map(str::to_string)
        .collect()
}

/// Whether python3 can import `module`; under CI a missing one fails.
fn python_has(module: &str, install: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "python3 cannot import {module} under CI: .ci/run installs it ({install})"
        );
        println!("skipped: python3 cannot import {module} ({install}; .ci/run installs it)");
    }
    ok
}

#[test]
fn partitions_are_disjoint_and_cover_the_list() {
    let env = TestEnv::new();
    let all = list(&env, &[]);
    assert!(all.len() >= 10, "{all:?}");
    let everything: BTreeSet<&String> = all.iter().collect();
    for kind in ["hash", "slice"] {
        for n in 1..=5 {
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for k in 1..=n {
                let part = list(&env, &["--partition", &format!("{kind}:{k}/{n}")]);
                for id in part {
                    if let Some(other) = seen.insert(id.clone(), k) {
                        panic!("{kind}:_/{n}: {id} is in partitions {other} and {k}");
                    }
                }
            }
            let union: BTreeSet<&String> = seen.keys().collect();
            assert_eq!(union, everything, "{kind}:K/{n}: the union is not the list");
        }
    }
    // slice: sizes differ by at most one.
    let sizes: Vec<usize> = (1..=3)
        .map(|k| list(&env, &["--partition", &format!("slice:{k}/3")]).len())
        .collect();
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "{sizes:?}"
    );
}

/// Which hash partition of `n` each listed case is in.
fn hash_partitions(env: &TestEnv, n: usize) -> BTreeMap<String, usize> {
    let mut at = BTreeMap::new();
    for k in 1..=n {
        for id in list(env, &["--partition", &format!("hash:{k}/{n}")]) {
            at.insert(id, k);
        }
    }
    at
}

#[test]
fn adding_a_scene_moves_no_case_between_hash_partitions() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "mid_vec");
    copy_scene(&env, "softmax", "mid_softmax");
    copy_scene(&env, "rmsnorm", "mid_rmsnorm");
    let before: Vec<BTreeMap<String, usize>> = (2..=5).map(|n| hash_partitions(&env, n)).collect();
    // One scene sorted before the others and one after.
    copy_scene(&env, "gemm", "aaa_gemm");
    copy_scene(&env, "softmax", "zzz_softmax");
    for (i, n) in (2..=5).enumerate() {
        let after = hash_partitions(&env, n);
        assert!(after.len() > before[i].len(), "n = {n}: no case was added");
        for (id, k) in &before[i] {
            assert_eq!(
                after.get(id),
                Some(k),
                "hash:_/{n}: {id} moved after adding two scenes"
            );
        }
    }
}

#[test]
fn bad_partitions_are_usage_errors_and_an_empty_one_is_not() {
    let env = TestEnv::new();
    for (value, says) in [
        ("hash:0/3", "K must be from 1 to 3"),
        ("hash:4/3", "K must be from 1 to 3"),
        ("foo:1/2", "expected hash:K/N or slice:K/N"),
        ("hash:1/0", "at least 1"),
        ("slice:x/2", "two whole numbers"),
    ] {
        for cmd in ["list", "run", "compile", "precompile"] {
            let mut args = vec![cmd, "--partition", value];
            if cmd == "precompile" {
                args.extend(["--out", "unused-bundle"]);
            }
            let out = env.scene(&args).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd} {value}: {}", show(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(value) && err.contains(says),
                "{cmd} {value}: {}",
                show(&out)
            );
        }
    }
    // One case over 5 partitions: four are empty. An empty partition runs
    // nothing and passes (as in cargo-nextest); an empty selection fails.
    let id = "vector_example::small";
    let home = hash_partitions(&env, 5)[id];
    let empty = (1..=5).find(|k| *k != home).unwrap();
    let out = env
        .scene(&["run", id, "--partition", &format!("hash:{empty}/5")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "note: partition hash:{empty}/5 selected none of the 1 selected cases"
        )),
        "{}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("0 passed, 0 failed"),
        "{}",
        show(&out)
    );
    let out = env
        .scene(&["run", "no_such_scene", "--partition", "hash:1/5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
}

/// The `| name | value |` rows of the Markdown totals table.
fn totals_table(markdown: &str) -> BTreeMap<String, String> {
    let start = markdown.find("### Totals").expect("a totals section");
    markdown[start..]
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            (cells.len() == 2 && cells[0] != "total" && !cells[0].starts_with("---"))
                .then(|| (cells[0].to_string(), cells[1].to_string()))
        })
        .collect()
}

#[test]
fn report_totals_are_the_sums_of_three_partition_reports() {
    let env = TestEnv::new();
    let dir = env.dir.path();
    let mut reports: Vec<PathBuf> = Vec::new();
    let mut parts: Vec<serde_json::Value> = Vec::new();
    for k in 1..=3 {
        let r = dir.join(format!("report-{k}.json"));
        let partition = format!("hash:{k}/3");
        let (out, json) = common::output_with_report(
            &mut env.scene(&["run", "softmax", "--partition", &partition]),
            &r,
        );
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        reports.push(r);
        parts.push(json);
    }
    for p in &parts {
        assert_eq!(p["schema"], 1, "{p}");
    }
    let junit = dir.join("merged.xml");
    let summary = dir.join("summary.md");
    let step_summary = dir.join("step-summary.md");
    std::fs::write(&step_summary, "earlier step\n").unwrap();
    let mut args: Vec<&str> = vec!["report"];
    args.extend(reports.iter().map(|r| r.to_str().unwrap()));
    args.extend([
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        summary.to_str().unwrap(),
        "--github-summary",
    ]);
    let out = env
        .scene(&args)
        .env("GITHUB_STEP_SUMMARY", &step_summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let md = std::fs::read_to_string(&summary).unwrap();
    // Appended to the step summary, after what was there.
    assert_eq!(
        std::fs::read_to_string(&step_summary).unwrap(),
        format!("earlier step\n{md}")
    );
    let t = totals_table(&md);
    let sum_f = |k: &str| -> f64 { parts.iter().map(|p| p["totals"][k].as_f64().unwrap()).sum() };
    let sum_u = |k: &str| -> u64 { parts.iter().map(|p| p["totals"][k].as_u64().unwrap()).sum() };
    let cases: usize = parts
        .iter()
        .map(|p| p["cases"].as_array().unwrap().len())
        .sum();
    assert_eq!(t["reports"], "3", "{md}");
    assert_eq!(t["cases"], cases.to_string(), "{md}");
    assert!(cases >= 3, "{md}");
    assert_eq!(t["passed"], sum_u("passed").to_string(), "{md}");
    assert_eq!(t["failures"], sum_u("failed").to_string(), "{md}");
    assert_eq!(t["cache hits"], sum_u("units_cached").to_string(), "{md}");
    assert_eq!(
        t["units compiled"],
        sum_u("units_compiled").to_string(),
        "{md}"
    );
    for (row, key) in [
        ("card-seconds held", "card_seconds_held"),
        ("device-seconds", "device_seconds"),
        ("compile seconds", "compile_seconds"),
        ("queueing seconds", "queueing_seconds"),
    ] {
        let shown: f64 = t[row].parse().unwrap();
        assert!(
            (shown - sum_f(key)).abs() <= 0.0005 + 1e-9,
            "{row}: {shown} vs {}\n{md}",
            sum_f(key)
        );
    }
    // Every case is a row of the table, once.
    for p in &parts {
        for c in p["cases"].as_array().unwrap() {
            let row = format!("| `{}` | PASS |", c["name"].as_str().unwrap());
            assert_eq!(md.matches(&row).count(), 1, "{row}\n{md}");
        }
    }
    // The merged JUnit, read by a real JUnit parser.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(&format!("tests=\"{cases}\"")), "{xml}");
    if python_has("junitparser", "python3 -m pip install junitparser") {
        let out = Command::new("python3")
            .args([
                "-c",
                "import sys\nfrom junitparser import JUnitXml\nx = JUnitXml.fromfile(sys.argv[1])\n\
                 print(x.tests, x.failures, x.errors, sum(1 for s in x for c in s))",
                junit.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_success(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{cases} 0 0 {cases}"),
            "{}",
            show(&out)
        );
    }
    // `--junit -`: the JUnit alone on stdout.
    let mut args: Vec<&str> = vec!["report"];
    args.extend(reports.iter().map(|r| r.to_str().unwrap()));
    args.extend(["--junit", "-"]);
    let out = env.scene(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<?xml"));
}

#[test]
fn report_refuses_unreadable_and_old_reports_naming_the_file() {
    let env = TestEnv::new();
    let dir = env.dir.path();
    let old = dir.join("old.json");
    std::fs::write(
        &old,
        r#"{"platform":"a2a3sim","cases":[],"totals":{"passed":0,"failed":0},"started_at":0}"#,
    )
    .unwrap();
    let newer = dir.join("newer.json");
    std::fs::write(
        &newer,
        r#"{"schema":99,"platform":"a2a3sim","cases":[],"totals":{},"started_at":0}"#,
    )
    .unwrap();
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let missing = dir.join("missing.json");
    for (file, says) in [
        (&old, "no `schema` field"),
        (&newer, "report schema 99"),
        (&junk, "not valid report JSON"),
        (&missing, "No such file"),
    ] {
        let out = env
            .scene(&["report", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&file.display().to_string()) && err.contains(says),
            "{}",
            show(&out)
        );
    }
    let out = env
        .scene(&["report", old.to_str().unwrap(), "--github-summary"])
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GITHUB_STEP_SUMMARY"));
}

fn repo() -> PathBuf {
    common::workspace_root()
}

/// Runs `ci/simulate` on `workflow` with 2 partitions in a temp dir.
fn simulate(workflow: &Path, work: &Path) -> Output {
    simulate_with(workflow, work, &[])
}

/// `simulate` with more `ci/simulate` arguments.
fn simulate_with(workflow: &Path, work: &Path, extra: &[&str]) -> Output {
    Command::new("python3")
        .arg(repo().join("ci/simulate"))
        .args(["--workflow", workflow.to_str().unwrap()])
        .arg("--scene")
        .arg(common::scene_exe())
        .arg("--runtime")
        .arg(common::built_runtime())
        .args(["--work", work.to_str().unwrap()])
        .args(["--input", "partitions=2"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn ci_simulate_runs_the_two_pass_workflow_as_two_runners() {
    let dir = tempfile::tempdir().unwrap();
    let out = simulate(&repo().join("ci/workflows/two-pass.yml"), dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in [
        "ok: run 2: pass 1 on runner 2 got 100% kernel cache hits",
        "ok: run 2: pass 2 started no compiler",
        "ok: run 2: pass 2 compiled nothing and computed no fixture or golden",
        "ok: run 2: the partitions cover all",
        "ok: run 2: the summary's totals equal the sums of the 2 reports",
        "ci/simulate: all checks passed",
    ] {
        assert!(stdout.contains(check), "{check}\n{}", show(&out));
    }
}

#[test]
fn ci_simulate_fails_when_the_cache_restore_step_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read_to_string(repo().join("ci/workflows/two-pass.yml")).unwrap();
    // Drop the step named "Restore the kernel cache": its lines up to the
    // next step of the same indentation.
    let mut copy = String::new();
    let mut dropping = false;
    let mut dropped = 0;
    for line in original.lines() {
        if line.starts_with("      - ") {
            dropping = line.contains("name: Restore the kernel cache");
        }
        if dropping {
            dropped += 1;
        } else {
            copy.push_str(line);
            copy.push('\n');
        }
    }
    assert!(dropped >= 5, "the restore step was not found");
    assert!(!copy.contains("actions/cache/restore"));
    let workflow = dir.path().join("two-pass-without-restore.yml");
    std::fs::write(&workflow, copy).unwrap();
    let out = simulate(&workflow, &dir.path().join("work"));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAIL: run 2: pass 1 on runner 2 got 100% kernel cache hits"),
        "{}",
        show(&out)
    );
}

/// The failing-case scenario of issue 31: `vector_example`'s first kernel
/// does not compile in the checkout, partition 2's cards return wrong
/// numbers and partition 3's hang. Pass 1 records the cases it cannot
/// prepare and still uploads the bundle; the card jobs run every other
/// case (passing on the healthy card, failing their comparison with a
/// dump on the corrupting one, stopped at the case timeout or naming the
/// case that retired the card on the hung one) and fail those with pass
/// 1's cause on no card; the summary lists them with that cause and
/// uploads the merged JUnit, the Markdown, the HTML and the dumps, every
/// link of the page resolving inside its artifact; the workflow concludes
/// failure.
#[test]
fn ci_simulate_one_bad_kernel_fails_its_cases_and_runs_every_other() {
    let dir = tempfile::tempdir().unwrap();
    let out = simulate_with(
        &repo().join("ci/workflows/two-pass.yml"),
        dir.path(),
        &[
            "--break",
            "vector_example",
            "--input",
            "partitions=3",
            "--corrupt-card",
            "2",
            "--hang-card",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in [
        "ok: run 1: the workflow concluded failure",
        "ok: run 1: pass 1's job `precompile` failed",
        "ok: run 1: pass 1 still uploaded the bundle (*-pass2)",
        "ok: run 1: no job was skipped",
        "every case of `vector_example` among them",
        "failed in pass 2 with pass 1's cause",
        "ok: run 1: they took no card",
        "ok: run 1: the card jobs ran every other case",
        "ok: run 1: partition 2's corrupting card:",
        "ok: run 1: partition 3's hung cards:",
        "failing cases with pass 1's cause",
        "ok: run 1: the summary job uploaded scenes-junit.xml, summary.md, scenes-report.html",
        "ok: run 1: the merged JUnit fails those cases and the misbehaving cards' failures and no other",
        "ok: run 1: the summary artifact holds the",
        "ok: run 1: the HTML report's",
        "ok: run 1: the partitions cover all",
        "ok: run 1: pass 2 started no compiler",
        "ok: run 1: the summary's totals equal the sums of the 3 reports",
        "ci/simulate: all checks passed",
    ] {
        assert!(stdout.contains(check), "{check}\n{}", show(&out));
    }
    assert!(!stdout.contains("run 2"), "one run only: {}", show(&out));
    // The dumps are linked: at least one per corrupted case.
    let links = stdout
        .lines()
        .find(|l| l.starts_with("ok: run 1: the HTML report's"))
        .unwrap_or_default();
    assert!(!links.contains(" 0 of them to dumps"), "{links}");
}

/// A pull request from a fork that no maintainer labelled: pass 1 runs on
/// the ordinary runner, no job reaches a card runner, and the summary says
/// why (and fails, so the pull request does not look tested).
#[test]
fn ci_simulate_a_forks_pull_request_never_reaches_a_card_runner() {
    let dir = tempfile::tempdir().unwrap();
    let out = simulate_with(
        &repo().join("ci/workflows/two-pass.yml"),
        dir.path(),
        &["--fork-pr"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in [
        "-- job card: skipped",
        "ok: run 1: no card job ran for the fork's pull request",
        "ok: run 1: the summary says the cards were not used, and why",
        "ok: run 1: the workflow concluded failure",
    ] {
        assert!(stdout.contains(check), "{check}\n{}", show(&out));
    }
    let summary =
        std::fs::read_to_string(dir.path().join("runner-1/tmp/summary/step-summary.md")).unwrap();
    assert!(summary.contains("`run-on-cards`"), "{summary}");
}

/// `ci/simulate --break vector_example` of a copy of two-pass.yml (named
/// `name`) whose one occurrence of `from` is `to`: it must exit 1 and say
/// every line of `checks`; returns the step summary the summary job wrote.
fn simulate_broken_variant(name: &str, from: &str, to: &str, checks: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read_to_string(repo().join("ci/workflows/two-pass.yml")).unwrap();
    assert_eq!(original.matches(from).count(), 1, "{from}\n{original}");
    let workflow = dir.path().join(name);
    std::fs::write(&workflow, original.replace(from, to)).unwrap();
    let work = dir.path().join("work");
    let out = simulate_with(&workflow, &work, &["--break", "vector_example"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in checks {
        assert!(stdout.contains(check), "{check}\n{}", show(&out));
    }
    std::fs::read_to_string(work.join("runner-1/tmp/summary/step-summary.md")).unwrap()
}

/// The finding of issue 31: a pass 1 that stops at its first failing case
/// (its precompile step exits 1) skips the cards and leaves no summary;
/// the failing-case scenario says so.
#[test]
fn ci_simulate_failing_case_scenario_fails_a_workflow_that_stops_at_pass_one() {
    // Pass 1's step as it was: any non-zero exit fails the step.
    let summary = simulate_broken_variant(
        "two-pass-stopping.yml",
        "target/release/scene precompile --out bundle || status=$?",
        "target/release/scene precompile --out bundle",
        &[
            "ok: run 1: the workflow concluded failure",
            "FAIL: run 1: pass 1 still uploaded the bundle (*-pass2)",
            "FAIL: run 1: no job was skipped",
            "FAIL: run 1: the card jobs ran every other case",
        ],
    );
    // No bundle: the summary job still ran and said so on the step summary.
    assert!(
        summary.starts_with("## Scene tests: no bundle\n"),
        "{summary}"
    );
}

/// A card job that dies before writing its report uploads nothing: the
/// summary job still merges the other partition's report, names the
/// missing partition on the step summary, uploads the merged JUnit, the
/// Markdown and the HTML, and fails.
#[test]
fn ci_simulate_summary_names_a_partition_that_uploaded_no_report() {
    // Partition 2's runner dies before `scene run` writes anything.
    let summary = simulate_broken_variant(
        "two-pass-dying-card.yml",
        "          mkdir -p out\n",
        "          mkdir -p out\n          if [ \"$K\" = 2 ]; then exit 9; fi\n",
        &[
            "ok: run 1: the workflow concluded failure",
            "ok: run 1: no job was skipped",
            "FAIL: run 1: each pass-2 job uploaded its JSON report (1 reports)",
            "ok: run 1: the summary job uploaded scenes-junit.xml, summary.md, scenes-report.html",
        ],
    );
    assert!(summary.contains("### Totals"), "{summary}");
    assert!(
        summary.contains("**No report from partition(s) 2 of 2**"),
        "{summary}"
    );
}

/// Exit 2 from pass 1 (no bundle: here `--out` names a directory that is
/// not a bundle) stops the workflow, unlike exit 1: nothing is packed, the
/// cards are skipped, and the summary job says there is no bundle.
#[test]
fn ci_simulate_pass_one_without_a_bundle_stops_the_workflow() {
    let step = "          target/release/scene precompile --out bundle || status=$?\n";
    let summary = simulate_broken_variant(
        "two-pass-no-bundle.yml",
        step,
        &format!("          mkdir -p bundle && touch bundle/not-a-bundle\n{step}"),
        &[
            "FAIL  Precompile (compile, fixtures, goldens; no card) (exit 2)",
            "skip  Pack pass 2",
            "-- job card: skipped",
            "ok: run 1: the workflow concluded failure",
            "FAIL: run 1: pass 1 still uploaded the bundle (*-pass2)",
        ],
    );
    assert!(
        summary.starts_with("## Scene tests: no bundle\n"),
        "{summary}"
    );
}

/// The workflows build with the toolchain they pin (`RUSTUP_TOOLCHAIN`),
/// which must be the workspace's `rust-version`: moving one without the
/// other would test a toolchain the crates do not claim, or claim one no
/// job builds with.
#[test]
fn workflows_pin_the_toolchain_of_rust_version() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let rust_version = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version"))
        .and_then(|rest| rest.split('"').nth(1))
        .expect("rust-version in Cargo.toml");
    for file in ["sim.yml", "two-pass.yml"] {
        let text = std::fs::read_to_string(repo().join("ci/workflows").join(file)).unwrap();
        let pins: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("RUSTUP_TOOLCHAIN: "))
            .collect();
        assert_eq!(pins.len(), 1, "{file}: one RUSTUP_TOOLCHAIN pin: {pins:?}");
        let pin = pins[0];
        assert!(
            pin == rust_version || pin.starts_with(&format!("{rust_version}.")),
            "{file} pins {pin}, Cargo.toml's rust-version is {rust_version}"
        );
        assert!(
            text.contains("rustup toolchain install \"$RUSTUP_TOOLCHAIN\""),
            "{file}: no step installs the pinned toolchain"
        );
    }
}

/// `ci/simulate --plan` on sim.yml (which has nothing to simulate: its
/// jobs are cargo commands): every job and matrix entry evaluates, each
/// uploads under a name of its own, runs the scene tests once and has a
/// timeout. Two findings of issue 31 fail it: artifact names that collide
/// across the platform axis, and a job running the scene tests three times.
#[test]
fn ci_simulate_plans_sim_yml_and_catches_colliding_artifacts_and_repeated_tests() {
    let dir = tempfile::tempdir().unwrap();
    let plan = |workflow: &Path| {
        Command::new("python3")
            .arg(repo().join("ci/simulate"))
            .args(["--plan", "--workflow", workflow.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let sim = repo().join("ci/workflows/sim.yml");
    let out = plan(&sim);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for platform in ["a2a3sim", "a5sim"] {
        for os in ["ubuntu-latest", "macos-latest"] {
            let line =
                format!("-- job sim {os} {platform} on {os}: 9 steps, 1 run(s) of the scene tests");
            assert!(stdout.contains(&line), "{line}\n{}", show(&out));
        }
    }
    assert!(
        stdout.contains("-- job workspace on ubuntu-latest:"),
        "{stdout}"
    );
    assert!(stdout.contains("1 run(s) of the scene tests"), "{stdout}");

    let original = std::fs::read_to_string(&sim).unwrap();
    let name = "name: nextest-junit-${{ matrix.os }}-${{ matrix.platform }}";
    assert_eq!(original.matches(name).count(), 1);
    let colliding = dir.path().join("colliding.yml");
    std::fs::write(
        &colliding,
        original.replace(name, "name: nextest-junit-${{ matrix.os }}"),
    )
    .unwrap();
    let out = plan(&colliding);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(
            "`nextest-junit-ubuntu-latest` from sim ubuntu-latest a2a3sim, sim ubuntu-latest a5sim"
        ),
        "{}",
        show(&out)
    );

    let step = "        run: cargo nextest run --locked -p scenes --profile ci\n";
    assert_eq!(original.matches(step).count(), 1);
    let thrice = dir.path().join("thrice.yml");
    std::fs::write(
        &thrice,
        original.replace(
            step,
            "        run: |\n          cargo test --locked -p scenes\n          \
             cargo test --locked --workspace\n          \
             cargo nextest run --locked -p scenes --profile ci\n",
        ),
    )
    .unwrap();
    let out = plan(&thrice);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("sim ubuntu-latest a2a3sim: the scene tests run 3 times in one job"),
        "{}",
        show(&out)
    );
}

/// The finding of issue 31: a self-hosted card runner keeps `out/` between
/// jobs, and a run that failed before writing its report uploaded the
/// previous job's. With `--stale-workdir` every job starts among such
/// files. Partition 2's runner fails before `scene run` writes anything:
/// the card job's clean step removed the leftovers, so it uploads nothing
/// and the summary names the partition; a copy without the clean steps
/// uploads the stale report, which the check catches.
#[test]
fn ci_simulate_a_self_hosted_runners_leftovers_are_never_uploaded() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read_to_string(repo().join("ci/workflows/two-pass.yml")).unwrap();
    let refused = "          mkdir -p out\n";
    assert_eq!(original.matches(refused).count(), 1);
    let dying = original.replace(
        refused,
        "          mkdir -p out\n          if [ \"$K\" = 2 ]; then exit 9; fi\n",
    );
    let clean = "run: rm -rf pass2 out scene-pass2.tar.gz";
    assert_eq!(dying.matches(clean).count(), 2, "the card job cleans twice");
    for (name, text, verdict) in [
        ("cleaning.yml", dying.clone(), "ok"),
        (
            "not-cleaning.yml",
            dying.replace(clean, "run: 'true'"),
            "FAIL",
        ),
    ] {
        let workflow = dir.path().join(name);
        std::fs::write(&workflow, text).unwrap();
        let work = dir.path().join(name.replace(".yml", ""));
        let out = simulate_with(
            &workflow,
            &work,
            &["--break", "vector_example", "--stale-workdir"],
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {}", show(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let check =
            format!("{verdict}: run 1: no file an earlier job left on the runner was uploaded");
        assert!(stdout.contains(&check), "{name}: {check}\n{}", show(&out));
        if verdict == "ok" {
            let summary =
                std::fs::read_to_string(work.join("runner-1/tmp/summary/step-summary.md")).unwrap();
            assert!(
                summary.contains("**No report from partition(s) 2 of 2**"),
                "{summary}"
            );
        }
    }
}
