//! `scene run --dump-args` and `scene replay DIR TASK` (issue 19): every
//! task's arguments are recorded (views, span bytes before and after as
//! `.npy`, scalars, func_id, blocks), and one recorded task re-run alone
//! on the simulator reproduces its outputs bit for bit; a mutated kernel's
//! replay names the mismatching output.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TestEnv, assert_success, copy_scene, read_report, show};
use scene_golden::{DType, npy};

/// `scene replay` in `env` (its cache and lock dirs).
fn replay(env: &TestEnv, dir: &Path, task: &str, extra: &[&str]) -> Output {
    let mut args = vec!["replay", dir.to_str().unwrap(), task];
    args.extend_from_slice(extra);
    env.scene(&args).output().unwrap()
}

/// Runs `filter` with `--dump-args=<tmp>/args` and returns the root.
fn run_dumping(env: &TestEnv, filter: &str, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let root = env.dir.path().join("args");
    let dump = format!("--dump-args={}", root.display());
    let mut args = vec!["run", filter, dump.as_str()];
    args.extend_from_slice(extra);
    let (out, report) = env.run_with_report_using(&args, |cmd| {
        cmd.env_remove("SCENE_RUNTIME_OPTIONS");
    });
    assert_success(&out);
    (root, report)
}

#[test]
fn every_task_is_recorded_and_replays_bit_for_bit_and_a_mutated_kernel_does_not() {
    let env = TestEnv::with_scenes(&[]);
    let scene_dir = copy_scene(&env, "scalar_data", "scalar_data");
    let (root, report) = run_dumping(&env, "scalar_data::default", &[]);
    let case = root.join("scalar_data").join("default");
    let c = &report["cases"][0];
    assert_eq!(
        c["args_dump"].as_str(),
        Some(case.to_str().unwrap()),
        "the report names the case's dump: {c}"
    );

    // The manifest names the scene, the case, the platform, the kernels.
    let m = read_report(&case.join("manifest.json"));
    assert_eq!(m["format"], "scene-args/1");
    assert_eq!(m["scene"], "scalar_data");
    assert_eq!(m["case"], "default");
    assert_eq!(m["platform"], "a2a3sim");
    assert_eq!(
        Path::new(m["scene_dir"].as_str().unwrap()),
        scene_dir.canonicalize().unwrap()
    );
    assert_eq!(m["kernels"][0]["name"], "kernel_add");
    // scalar_data submits six tasks: add, noop, add, add, noop, add.
    assert_eq!(m["tasks"], 6, "{m}");
    let kernels: Vec<String> = (0..6)
        .map(|t| {
            let task = read_report(&case.join(format!("task{t}")).join("task.json"));
            assert_eq!(task["task"], t);
            task["kernel"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        kernels,
        [
            "kernel_add",
            "kernel_noop",
            "kernel_add",
            "kernel_add",
            "kernel_noop",
            "kernel_add"
        ]
    );
    assert!(!case.join("task6").exists());

    // Task 0: c = a + b with a = 2, b = 0, 1, 2, ...: the .npy files are
    // the views as f32 [16384], before and after.
    let t0 = case.join("task0");
    let task = read_report(&t0.join("task.json"));
    assert_eq!(task["func_id"], 0);
    assert_eq!(task["core"], "aiv");
    assert_eq!(task["block_num"], 4);
    let args = task["args"].as_array().unwrap();
    assert_eq!(args.len(), 3);
    assert_eq!(args[0]["direction"], "in");
    assert_eq!(args[2]["direction"], "out");
    assert_eq!(args[2]["dtype"], "f32");
    assert_eq!(args[2]["shape"], serde_json::json!([16384]));
    assert_eq!(args[2]["output"], "arg2.out.npy");
    let a = npy::read_npy(&t0.join("arg0.in.npy")).unwrap();
    let b = npy::read_npy(&t0.join("arg1.in.npy")).unwrap();
    let c_out = npy::read_npy(&t0.join("arg2.out.npy")).unwrap();
    for t in [&a, &b, &c_out] {
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.shape(), &[16384]);
    }
    let (a, b, c_out) = (a.to_f32_vec(), b.to_f32_vec(), c_out.to_f32_vec());
    assert_eq!((a[5], b[5], c_out[5]), (2.0, 5.0, 7.0));
    assert!(
        !t0.join("arg0.out.npy").exists(),
        "inputs have no after-file"
    );

    // Every task replays bit for bit.
    for (t, kernel) in kernels.iter().enumerate() {
        let out = replay(&env, &case, &t.to_string(), &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "task {t}: {}", show(&out));
        assert!(
            stdout.starts_with(&format!("replay of task {t} (kernel {kernel}, func_id "))
                && stdout.contains("outputs match bit for bit"),
            "{stdout}"
        );
    }

    // Unknown task ids and directories are clear errors.
    let out = replay(&env, &case, "6", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the recorded task ids are 0..=5"),
        "{}",
        show(&out)
    );
    let out = replay(&env, &case, "first", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let out = replay(&env, &root.join("nope"), "0", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no such directory"),
        "{}",
        show(&out)
    );

    // Mutate kernel_add (a + b becomes a - b): its tasks' replays report
    // the mismatch, naming the output argument, the first differing
    // element and both values; kernel_noop's still match.
    let src = scene_dir.join("kernels").join("kernel_add.c");
    let code = std::fs::read_to_string(&src).unwrap();
    let plus = "out[i * so] = x[i * sx] + y[i * sy];";
    assert!(code.contains(plus));
    std::fs::write(
        &src,
        code.replace(plus, "out[i * so] = x[i * sx] - y[i * sy];"),
    )
    .unwrap();
    let out = replay(&env, &case, "0", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout.contains("replay of task 0 (kernel kernel_add, func_id 0): outputs differ")
            && stdout.contains("argument 2 (out, f32 [16384]): 16383 of 16384 elements differ")
            && stdout
                .contains("first at element 1: replay 1.0 (0x3f800000), recorded 3.0 (0x40400000)"),
        "{stdout}"
    );
    let out = replay(&env, &case, "1", &[]);
    assert!(
        out.status.success(),
        "the noop is unchanged: {}",
        show(&out)
    );

    // A kernel that no longer compiles, and a scene that moved, say so.
    std::fs::write(&src, format!("{code}\nint broken = ;\n")).unwrap();
    let out = replay(&env, &case, "0", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("kernel `kernel_add` (func_id 0) of scene `scalar_data` no longer compiles"),
        "{}",
        show(&out)
    );
    let moved = env.dir.path().join("moved").join("scalar_data");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&scene_dir, &moved).unwrap();
    let out = replay(&env, &case, "1", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pass its directory with --scene DIR"),
        "{}",
        show(&out)
    );
    let out = replay(&env, &case, "1", &["--scene", moved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
}

/// paged_attention's batch-4 case passes kernels views at element offsets
/// into larger buffers, strided (non-contiguous) views and scalars: every
/// one of its tasks replays bit for bit, in the worker and in process.
#[test]
fn views_offsets_and_scalars_replay_bit_for_bit() {
    let env = TestEnv::new();
    let (root, _) = run_dumping(&env, "paged_attention::small_batch4", &[]);
    let case = root.join("paged_attention").join("small_batch4");
    let m = read_report(&case.join("manifest.json"));
    let tasks = m["tasks"].as_u64().unwrap();
    assert!(tasks >= 8, "{m}");
    let (mut offsets, mut strided, mut scalars) = (0, 0, 0);
    for t in 0..tasks {
        let dir = case.join(format!("task{t}"));
        let task = read_report(&dir.join("task.json"));
        for a in task["args"].as_array().unwrap() {
            if a["direction"] == "scalar" {
                assert!(a["value"].is_u64(), "{a}");
                scalars += 1;
                continue;
            }
            let input = npy::read_npy_as(
                &dir.join(a["input"].as_str().unwrap()),
                if a["contiguous"] == true {
                    match a["dtype"].as_str().unwrap() {
                        "f32" => DType::F32,
                        "bf16" => DType::BF16,
                        "i32" => DType::I32,
                        "i64" => DType::I64,
                        d => panic!("dtype {d}"),
                    }
                } else {
                    DType::U8
                },
            )
            .unwrap();
            let span = a["span_bytes"].as_u64().unwrap() as usize;
            assert_eq!(input.bytes().len(), span, "{a}");
            if a["contiguous"] == true {
                let shape: Vec<usize> = a["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as usize)
                    .collect();
                assert_eq!(input.shape(), shape.as_slice(), "{a}");
            } else {
                assert_eq!(input.shape(), &[span], "a strided view is its span's bytes");
                strided += 1;
            }
            if a["offset"].as_u64().unwrap() > 0 {
                offsets += 1;
            }
        }
    }
    assert!(
        offsets > 0 && strided > 0 && scalars > 0,
        "{offsets} {strided} {scalars}"
    );
    for t in 0..tasks {
        let extra: &[&str] = if t % 2 == 0 { &[] } else { &["--in-process"] };
        let out = replay(&env, &case, &t.to_string(), extra);
        assert!(out.status.success(), "task {t}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("outputs match bit for bit"),
            "{}",
            show(&out)
        );
    }
}

/// A level-3 case is dumped per rank; `--rounds` keeps the last round's
/// record; a rank group's top directory is not replayed as one.
#[test]
fn rank_groups_are_dumped_per_rank() {
    let env = TestEnv::new();
    let (root, report) = run_dumping(&env, "allgather::p2", &["--rounds", "3"]);
    let case = root.join("allgather").join("p2");
    assert_eq!(report["cases"][0]["args_dump"].as_str(), case.to_str());
    let m = read_report(&case.join("manifest.json"));
    assert_eq!(m["rank_dirs"], serde_json::json!(["rank0", "rank1"]), "{m}");
    for r in 0..2 {
        let rm = read_report(&case.join(format!("rank{r}")).join("manifest.json"));
        assert_eq!(rm["rank"], r);
        assert!(rm["tasks"].as_u64().unwrap() >= 1, "{rm}");
        assert!(case.join(format!("rank{r}/task0/task.json")).is_file());
    }
    let out = replay(&env, &case, "0", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a rank group's dump"),
        "{}",
        show(&out)
    );
    let out = replay(&env, &case.join("rank0"), "0", &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without a communication domain"),
        "{}",
        show(&out)
    );
}

/// A runtime without `scene_rt_args_record` still runs cases, but
/// `--dump-args` fails the case naming the runtime and the symbol.
#[test]
fn a_runtime_without_args_record_fails_the_dump_clearly() {
    let env = TestEnv::new();
    // The real simulator's entry points, minus scene_rt_args_record: a
    // wrapper library that loads the simulator and forwards to it.
    let sim = common::built_runtime();
    let dir = env.dir.path();
    let src = dir.join("noargs.c");
    let mut c = String::from(
        "#include <stdint.h>\n#include <dlfcn.h>\nstatic void *sim;\nstatic void *f(const char *n) { if (!sim) sim = dlopen(SIM, RTLD_NOW | RTLD_LOCAL); return dlsym(sim, n); }\n",
    );
    for (ret, name, params, call) in [
        ("int32_t", "scene_rt_abi_version", "void", ""),
        (
            "int32_t",
            "scene_rt_open",
            "int32_t a, const char *b, void **c",
            "a, b, c",
        ),
        ("int32_t", "scene_rt_close", "void *a", "a"),
        (
            "int32_t",
            "scene_rt_malloc",
            "void *a, uint64_t b, uint64_t *c",
            "a, b, c",
        ),
        ("int32_t", "scene_rt_free", "void *a, uint64_t b", "a, b"),
        (
            "int32_t",
            "scene_rt_copy_to_device",
            "void *a, uint64_t b, const void *c, uint64_t d",
            "a, b, c, d",
        ),
        (
            "int32_t",
            "scene_rt_copy_from_device",
            "void *a, void *b, uint64_t c, uint64_t d",
            "a, b, c, d",
        ),
        (
            "int32_t",
            "scene_rt_register_callable",
            "void *a, const void *b, uint32_t *c",
            "a, b, c",
        ),
        (
            "int32_t",
            "scene_rt_unregister_callable",
            "void *a, uint32_t b",
            "a, b",
        ),
        (
            "int32_t",
            "scene_rt_run",
            "void *a, uint32_t b, const void *c, uint32_t d",
            "a, b, c, d",
        ),
        (
            "int32_t",
            "scene_rt_run2",
            "void *a, uint32_t b, const void *c, const void *d, uint32_t e",
            "a, b, c, d, e",
        ),
        ("const char *", "scene_rt_last_error", "void", ""),
    ] {
        c.push_str(&format!(
            "{ret} {name}({params}) {{ {ret} (*g)({params}) = ({ret} (*)({params}))f(\"{name}\"); return g({call}); }}\n"
        ));
    }
    std::fs::write(&src, c).unwrap();
    let so = dir.join("libnoargs.so");
    let out = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1"])
        .arg(format!("-DSIM=\"{}\"", sim.display()))
        .arg(&src)
        .arg("-o")
        .arg(&so)
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "vector_example::small",
            "--runtime",
            so.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        env.scene(&args)
            .env_remove("SCENE_RUNTIME_OPTIONS")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert!(
        out.status.success(),
        "the wrapper runs cases: {}",
        show(&out)
    );
    let dump = format!("--dump-args={}", dir.join("args").display());
    let out = run(&[&dump]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("recording task arguments")
            && stdout.contains(so.to_str().unwrap())
            && stdout.contains("has no scene_rt_args_record"),
        "{stdout}"
    );
}

/// A case whose second task crashes: the dump keeps the first task whole
/// (it replays bit for bit) and the crashing one's inputs, so the crash can
/// be replayed alone, and a fixed kernel run on them.
#[test]
fn a_crashed_run_keeps_its_tasks_and_the_crashing_one_replays_alone() {
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.as_ref().unwrap().join("two_tasks");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("scene.toml"),
        r#"
name = "two_tasks"
level = 2
platforms = ["a2a3sim"]
golden = "vector_example"

[orchestration]
source = "orchestration.c"
function = "two_tasks_orch"
signature = ["in", "in", "out"]

[[incores]]
func_id = 0
name = "add"
core = "aiv"
source = "add.c"

[[incores]]
func_id = 1
name = "bad"
core = "aiv"
source = "bad.c"

[[tensors]]
name = "a"
dtype = "f32"
shape = [1024]
init = { kind = "uniform", low = -2.0, high = 2.0 }

[[tensors]]
name = "b"
dtype = "f32"
shape = [1024]
init = { kind = "normal", mean = 0.0, std = 1.0 }

[[tensors]]
name = "f"
dtype = "f32"
shape = [1024]
init = { kind = "zeros" }

[[cases]]
name = "one"
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("orchestration.c"),
        r#"#include "scene_orch.h"
SCENE_ORCH_ENTRY(two_tasks_orch, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArg t[3] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2])};
    int32_t rc = scene_orch_submit(ctx, 0, 2, t, 3);
    if (rc != 0) return rc;
    SceneTaskArg u[1] = {SCENE_INOUT(args[2])};
    return scene_orch_submit(ctx, 1, 1, u, 1);
}
"#,
    )
    .unwrap();
    let kernel = |body: &str| {
        format!(
            "#include \"scene_kernel.h\"\nSCENE_KERNEL_ENTRY(ka) {{\n    float *c = SCENE_ARG_PTR(ka, 0, float);\n    uint64_t n = SCENE_ARG_LEN(ka, 0, float);\n    {body}\n}}\n"
        )
    };
    std::fs::write(
        dir.join("add.c"),
        "#include \"scene_kernel.h\"\nSCENE_KERNEL_ENTRY(ka) {\n    const float *a = SCENE_ARG_PTR(ka, 0, const float);\n    const float *b = SCENE_ARG_PTR(ka, 1, const float);\n    float *c = SCENE_ARG_PTR(ka, 2, float);\n    uint64_t n = SCENE_ARG_LEN(ka, 2, float);\n    SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("bad.c"),
        kernel("(void)n; if (c[0] == c[0]) *(volatile int *)(uintptr_t)0 = 1;"),
    )
    .unwrap();

    let root = env.dir.path().join("args");
    let dump = format!("--dump-args={}", root.display());
    let (out, report) = env.run_with_report_using(&["run", "two_tasks", &dump], |cmd| {
        cmd.env_remove("SCENE_RUNTIME_OPTIONS");
    });
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("killed by SIGSEGV"),
        "{}",
        show(&out)
    );
    let case = root.join("two_tasks").join("one");
    assert_eq!(
        report["cases"][0]["args_dump"].as_str(),
        case.to_str(),
        "a failed case's dump is named too"
    );
    let m = read_report(&case.join("manifest.json"));
    assert_eq!(m["tasks"], 1, "{m}");
    assert_eq!(m["incomplete"], serde_json::json!([1]), "{m}");
    let t1 = read_report(&case.join("task1").join("task.json"));
    assert_eq!(t1["complete"], false);
    assert_eq!(t1["args"][0]["input"], "arg0.in.npy");
    assert!(t1["args"][0].get("output").is_none(), "{t1}");

    let out = replay(&env, &case, "0", &[]);
    assert!(out.status.success(), "{}", show(&out));
    // The crash, alone.
    let out = replay(&env, &case, "1", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("killed by SIGSEGV")
            && String::from_utf8_lossy(&out.stderr).contains("kernel func_id 1"),
        "{}",
        show(&out)
    );
    // Fixed, it runs on the recorded inputs; nothing to compare with.
    std::fs::write(
        dir.join("bad.c"),
        kernel("SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = c[i] * 2.0f; }"),
    )
    .unwrap();
    let out = replay(&env, &case, "1", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("the recorded run did not complete this task"),
        "{}",
        show(&out)
    );
    let out = replay(&env, &case, "2", &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the recorded task ids are 0..=1"),
        "{}",
        show(&out)
    );
}

/// Issue 38, cause 5, for `scene replay`: with a cache directory that is
/// a file (the command line drops the cache) or one even root cannot
/// write in (the kernel cache refuses it), an installed `scene` replays a
/// task after one warning. Before the fix the first failed (exit 2,
/// "cannot find the device runtime ...": the embedded one had gone with
/// the cache) and the second could not write the replay orchestration's
/// source into `<cache>/replay/`, nor then unpack the runtime there.
#[test]
fn replay_with_an_unusable_cache_dir_runs_with_one_warning() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "scalar_data", "scalar_data");
    let (root, _) = run_dumping(&env, "scalar_data::default", &[]);
    let case = root.join("scalar_data").join("default");
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    for cache in [file, PathBuf::from("/proc/self/fdinfo")] {
        let out = env
            .lone_scene(&["replay", case.to_str().unwrap(), "0"])
            .env("SCENE_CACHE_DIR", &cache)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            cache.display(),
            show(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{}: {}", cache.display(), show(&out));
        assert!(
            warnings[0].contains(&cache.display().to_string()),
            "{warnings:?}"
        );
        let left: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("scene-runtime-"))
            .collect();
        assert_eq!(left, Vec::<String>::new(), "left behind");
    }
}
