//! A scene cannot take the harness down: kernels and orchestrations that
//! crash (segfault, integer division by zero, trap, stack overflow, abort,
//! exit(0)) or write outside their buffers fail *their* case, with what
//! happened and who was running, while the other scenes of the same run
//! pass, the report files are complete and the exit status is 1.

use crate::common;

use std::path::Path;

use common::{TestEnv, copy_scene};

/// One task: `f = kernel(a, b)` (func_id 0), over vector_example's tensors
/// and golden, so a well-behaved kernel body passes.
pub(crate) const SCENE: &str = r#"
name = "NAME"
level = 2
platforms = ["a2a3sim", "a5sim"]
golden = "vector_example"

[orchestration]
source = "orchestration.c"
function = "one_task_orch"
signature = ["in", "in", "out"]

[[incores]]
func_id = 0
name = "kernel"
core = "aiv"
source = "kernel.c"

[[tensors]]
name = "a"
dtype = "f32"
shape = ["N"]
init = { kind = "uniform", low = -2.0, high = 2.0 }

[[tensors]]
name = "b"
dtype = "f32"
shape = ["N"]
init = { kind = "normal", mean = 0.0, std = 1.0 }

[[tensors]]
name = "f"
dtype = "f32"
shape = ["N"]
init = { kind = "zeros" }

[[cases]]
name = "odd"
params = { N = 12347 }
"#;

pub(crate) const ORCH: &str = r#"
#include <stdlib.h>
#include "scene_orch.h"
SCENE_ORCH_ENTRY(one_task_orch, ctx, args, nargs) {
    (void)nargs;
    PROLOGUE
    SceneTaskArg t[3] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2])};
    return scene_orch_submit(ctx, 0, 4, t, 3);
}
"#;

const KERNEL: &str = r#"
#include "scene_kernel.h"
BEFORE
SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { BODY }
}
"#;

pub(crate) const GOOD_BODY: &str = "c[i] = (a[i] + b[i] + 1) * (a[i] + b[i] + 2) + (a[i] + b[i]);";

pub(crate) struct Bad {
    pub(crate) name: &'static str,
    /// Orchestration statements before the submit.
    pub(crate) prologue: &'static str,
    /// Kernel file-scope code and loop body.
    pub(crate) before: &'static str,
    pub(crate) body: &'static str,
    /// Every one of these must be in the case's failure message.
    pub(crate) expect: Vec<&'static str>,
}

pub(crate) fn write_scene(scenes: &Path, name: &str, prologue: &str, before: &str, body: &str) {
    let dir = scenes.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scene.toml"), SCENE.replace("NAME", name)).unwrap();
    std::fs::write(
        dir.join("orchestration.c"),
        ORCH.replace("PROLOGUE", prologue),
    )
    .unwrap();
    std::fs::write(
        dir.join("kernel.c"),
        KERNEL.replace("BEFORE", before).replace("BODY", body),
    )
    .unwrap();
}

pub(crate) fn bad_scenes() -> Vec<Bad> {
    let kernel = "kernel func_id 0 (aiv core, block";
    let trap_signal = if cfg!(target_arch = "x86_64") {
        "SIGILL"
    } else {
        "SIGTRAP"
    };
    let mut bad = vec![
        Bad {
            name: "crash_segv",
            prologue: "",
            before: "",
            body: "if (i == 7) *(volatile int *)(uintptr_t)0 = 1; c[i] = a[i];",
            expect: vec!["killed by SIGSEGV", kernel, "NULL pointer"],
        },
        Bad {
            name: "crash_trap",
            prologue: "",
            before: "",
            body: "if (i == 7) __builtin_trap(); c[i] = a[i];",
            expect: vec![trap_signal, kernel],
        },
        Bad {
            name: "crash_stack",
            prologue: "",
            before: "static int deep(volatile int *p, int n) { volatile char pad[4096]; pad[0] = (char)n; *p += pad[0]; return deep(p, n + 1) + pad[n & 7]; }",
            body: "volatile int sink = 0; if (i == 7) sink = deep(&sink, 0); c[i] = a[i] + (float)sink;",
            expect: vec!["killed by SIGSEGV", kernel, "stack overflow"],
        },
        Bad {
            name: "crash_abort",
            prologue: "abort();",
            before: "",
            body: GOOD_BODY,
            expect: vec!["killed by SIGABRT", "the orchestration was running"],
        },
        Bad {
            name: "crash_exit",
            prologue: "exit(0);",
            before: "",
            body: GOOD_BODY,
            expect: vec!["the orchestration called exit(0)"],
        },
        Bad {
            name: "oob_after",
            prologue: "",
            before: "",
            body: "c[i + n] = a[i];",
            expect: vec![
                "killed by SIGSEGV",
                kernel,
                "tensor `f` (run argument 2) (49388 bytes at",
                "past its end",
            ],
        },
        Bad {
            name: "oob_before",
            prologue: "",
            before: "",
            body: "c[(int64_t)i - (int64_t)n] = a[i];",
            expect: vec![
                "killed by SIGSEGV",
                kernel,
                "tensor `f` (run argument 2)",
                "before its start",
            ],
        },
        Bad {
            // One element past the end lands in the canary bytes before
            // the guard page: found after the block, not by a fault.
            name: "oob_canary",
            prologue: "",
            before: "",
            body: "c[i] = a[i]; if (i == n - 1) c[n] = 0.0f;",
            expect: vec![
                // The block whose canary check finds the damage first:
                // the writer (block 3) or one finishing beside it.
                "kernel func_id 0 (aiv core, block ",
                "of 4) wrote outside its buffers",
                "tensor `f` (run argument 2) (49388 bytes at",
                "at offset 49388, past its end",
            ],
        },
    ];
    if cfg!(target_arch = "x86_64") {
        // Integer division by zero traps on x86 only (arm64 returns 0).
        bad.push(Bad {
            name: "crash_div0",
            prologue: "",
            before: "",
            body: "volatile int zero = 0; int q = (int)i / zero; c[i] = a[i] + (float)q;",
            expect: vec!["killed by SIGFPE", kernel],
        });
    }
    bad
}

#[test]
fn crashing_scenes_fail_only_their_case() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    copy_scene(&env, "vector_example", "vector_example");
    write_scene(&scenes, "good_one_task", "", "", GOOD_BODY);
    let bad = bad_scenes();
    for b in &bad {
        write_scene(&scenes, b.name, b.prologue, b.before, b.body);
    }
    let junit = env.dir.path().join("junit.xml");
    let (out, r) = env.run_with_report(&["run", "--junit", junit.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");

    let cases = r["cases"].as_array().unwrap();
    let by_name = |n: &str| {
        cases
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("no case {n} in the report:\n{stdout}"))
    };
    for good in [
        "vector_example::small",
        "vector_example::odd",
        "good_one_task::odd",
    ] {
        assert_eq!(by_name(good)["status"], "passed", "{good}: {stdout}");
    }
    for b in &bad {
        let c = by_name(&format!("{}::odd", b.name));
        assert_eq!(c["status"], "failed", "{}: {c}", b.name);
        let msg = c["message"].as_str().unwrap_or_default();
        for e in &b.expect {
            assert!(msg.contains(e), "{}: `{e}` not in:\n{msg}", b.name);
        }
    }
    assert_eq!(cases.len(), 3 + bad.len(), "{stdout}");
    assert_eq!(r["totals"]["passed"], 3);
    assert_eq!(r["totals"]["failed"], bad.len());
    assert!(
        stdout.contains(&format!("3 passed, {} failed", bad.len())),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase").count(), 3 + bad.len(), "{xml}");
    assert_eq!(xml.matches("<failure").count(), bad.len(), "{xml}");
}

/// With `--in-process` the session runs in the harness itself: the same
/// well-behaved scenes pass (the worker is a choice, not a requirement).
#[test]
fn in_process_sessions_still_pass() {
    let env = TestEnv::new();
    let out = env
        .scene(&["run", "vector_example", "--in-process"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
}

/// An orchestration that writes its process id to `pid_file`, then stops
/// itself with `SIGSTOP`, as a worker stuck in a driver would look.
fn write_stopping_scene(scenes: &Path, name: &str, pid_file: &Path) {
    write_scene(scenes, name, "", "", GOOD_BODY);
    let prologue = format!(
        "{{ FILE *pf = fopen(\"{}\", \"w\"); if (pf) {{ fprintf(pf, \"%d\", (int)getpid()); fclose(pf); }} raise(SIGSTOP); }}",
        pid_file.display()
    );
    let orch = ORCH
        .replace(
            "#include <stdlib.h>",
            "#include <stdlib.h>\n#include <stdio.h>\n#include <signal.h>\n#include <unistd.h>",
        )
        .replace("PROLOGUE", &prologue);
    std::fs::write(scenes.join(name).join("orchestration.c"), orch).unwrap();
}

/// Whether any process is left in process group `pgid` (the worker leads
/// its own group, so its pid is the group id). A leftover group is killed
/// so a failing test leaves no stopped process behind.
fn group_left(pid_file: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(pid_file).expect("the orchestration wrote its pid");
    let pgid: i32 = text.trim().parse().expect("a pid");
    let group = rustix::process::Pid::from_raw(pgid).expect("a positive pid");
    if rustix::process::test_kill_process_group(group).is_ok() {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        return Some(pgid);
    }
    None
}

/// Issue 27 cause 4: a worker stopped with `SIGSTOP` was reported after
/// ~22 s as "did not stop within 10 s of its deadline" and left alive,
/// device open, while its card stayed in use. Now it is killed (its whole
/// process group) and reaped, the case says it was stopped / unresponsive,
/// the card is retired, and the next case on the one-card pool fails
/// naming the case that retired it.
#[test]
fn a_stopped_worker_is_killed_and_its_card_retired_naming_the_case() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    copy_scene(&env, "vector_example", "vector_example");
    let pid_file = env.dir.path().join("worker.pid");
    write_stopping_scene(&scenes, "a_stopped", &pid_file);
    let (out, r) = env.run_with_report(&[
        "run",
        "a_stopped::odd",
        "vector_example::small",
        "--device",
        "0",
        "--case-timeout",
        "1",
    ]);
    let left = group_left(&pid_file);
    assert_eq!(left, None, "the stopped worker's group outlived the run");
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let stopped = common::report_case(&r, "a_stopped::odd");
    assert_eq!(stopped["status"], "failed", "{stopped}");
    let msg = stopped["message"].as_str().unwrap_or_default();
    assert!(msg.contains("stopped / unresponsive"), "{msg}");
    assert!(msg.contains("process state T"), "{msg}");
    assert!(msg.contains("card(s) [0] retired"), "{msg}");
    let next = common::report_case(&r, "vector_example::small");
    assert_eq!(next["status"], "failed", "{next}");
    let msg = next["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("card 0 was retired by a_stopped::odd: case timeout"),
        "{msg}"
    );
}

/// Issue 27 cause 4, with a second card: the stopped worker's card is
/// retired and every other case runs, and passes, on the other one.
#[test]
fn a_stopped_worker_on_two_cards_leaves_later_cases_the_other_card() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    copy_scene(&env, "vector_example", "vector_example");
    let pid_file = env.dir.path().join("worker.pid");
    write_stopping_scene(&scenes, "a_stopped", &pid_file);
    let (out, r) = env.run_with_report(&[
        "run",
        "a_stopped::odd",
        "vector_example::small",
        "vector_example::odd",
        "--device",
        "0,1",
        "--case-timeout",
        "1",
    ]);
    let left = group_left(&pid_file);
    assert_eq!(left, None, "the stopped worker's group outlived the run");
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let stopped = common::report_case(&r, "a_stopped::odd");
    let msg = stopped["message"].as_str().unwrap_or_default();
    assert!(msg.contains("stopped / unresponsive"), "{msg}");
    let retired = stopped["devices"][0]
        .as_u64()
        .expect("the stopped case's card");
    assert!(
        msg.contains(&format!("card(s) [{retired}] retired")),
        "{msg}"
    );
    for name in ["vector_example::small", "vector_example::odd"] {
        let c = common::report_case(&r, name);
        assert_eq!(c["status"], "passed", "{c}");
        assert_ne!(c["devices"][0].as_u64(), Some(retired), "{c}");
    }
}

/// Issue 27 cause 6: the device worker inherited stdout, so a `printf` in
/// an orchestration landed before the JSON of `--report-json -`. The
/// worker's stdout is the harness's stderr now: stdout is the report alone,
/// and the printed line is still shown.
#[test]
fn printf_in_an_orchestration_keeps_a_report_on_stdout_pure() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    write_scene(&scenes, "printing", "", "", GOOD_BODY);
    let orch = ORCH
        .replace(
            "#include <stdlib.h>",
            "#include <stdlib.h>\n#include <stdio.h>",
        )
        .replace(
            "PROLOGUE",
            "printf(\"hello from the orchestration\\n\"); fflush(stdout);",
        );
    std::fs::write(scenes.join("printing").join("orchestration.c"), orch).unwrap();
    let out = env
        .scene(&["run", "printing::odd", "--report-json", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::show(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", common::show(&out)));
    assert_eq!(report["cases"][0]["status"], "passed", "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hello from the orchestration"),
        "{}",
        common::show(&out)
    );
}

/// Whether `pid` names a live process (a zombie awaiting its reaper is
/// dead: it runs nothing and holds no device).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Whether process `pid` (not a child of ours) has exited, or exits within
/// `secs`: a pidfd becomes readable at its exit, so this wakes on the exit
/// itself, not on a timer.
fn exits_within(pid: i32, secs: i64) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(pid) = Pid::from_raw(pid) else {
        return true;
    };
    let fd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        // ESRCH: gone and reaped already.
        Err(_) => return !alive(pid.as_raw_nonzero().get()),
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let timeout = Timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0) || !alive(pid.as_raw_nonzero().get())
}

/// Issue 27: a process an orchestration forks lived on after the run (the
/// device worker exited, its child kept running with the device's
/// memory mapped). The worker's process group is now killed when it exits.
#[test]
fn a_grandchild_forked_by_an_orchestration_does_not_outlive_the_run() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    let pid_file = env.dir.path().join("grandchild.pid");
    write_scene(&scenes, "forking", "", "", GOOD_BODY);
    let prologue = format!(
        "pid_t child = fork();\n    \
         if (child == 0) {{ for (;;) pause(); }}\n    \
         if (child > 0) {{ FILE *f = fopen(\"{}\", \"w\"); \
         if (f) {{ fprintf(f, \"%d\", (int)child); fclose(f); }} }}",
        pid_file.display()
    );
    let orch = ORCH
        .replace(
            "#include <stdlib.h>",
            "#include <stdlib.h>\n#include <stdio.h>\n#include <unistd.h>\n#include <sys/types.h>",
        )
        .replace("PROLOGUE", &prologue);
    std::fs::write(scenes.join("forking").join("orchestration.c"), orch).unwrap();
    // Before the fix the child held the worker's output pipes, so the
    // run never ended: a deadline turns that into a failure.
    let out = common::output_within(
        &mut env.scene(&["run", "forking::odd"]),
        120,
        "scene run with a forking orchestration",
    );
    assert_eq!(out.status.code(), Some(0), "{}", common::show(&out));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| {
            panic!(
                "the orchestration wrote no pid ({e}):\n{}",
                common::show(&out)
            )
        })
        .trim()
        .parse()
        .unwrap();
    // SIGKILL to the worker's group is sent before `scene` exits, but the
    // kernel may finish the child a moment later on a loaded machine: its
    // exit is awaited (woken by the exit itself), up to a bound that only
    // a child that was never killed reaches.
    let still = !exits_within(pid, 30);
    if still {
        // Clean up before failing: the test must not leave it behind either.
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(!still, "the orchestration's child {pid} outlived the run");
}
