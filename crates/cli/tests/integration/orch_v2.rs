//! Orchestration ABI v2 through the whole harness: the `scope_loop` scene
//! runs 100,000 iterations with a scoped temporary in a device memory bound
//! the test sets, and the same loop without the scope fails with an
//! out-of-memory message naming the case.

use crate::common;

use common::{TestEnv, copy_scene};

/// Device memory for the 100k loop: 1 MiB holds `acc` and a few 64 KiB
/// temporaries, never 100,000 of them.
const ONE_MIB: &str = "arena_mb=1";

#[test]
fn a_scoped_loop_stays_in_bounded_memory_and_the_unscoped_one_fails() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "scope_loop", "scope_loop");
    let unscoped = copy_scene(&env, "scope_loop", "scope_loop_unscoped");
    let orch = unscoped.join("orchestration.c");
    let text = std::fs::read_to_string(&orch).unwrap();
    assert!(text.contains("SCENE_SCOPE(ctx)"));
    // The same loop body, a plain block instead of a scope.
    std::fs::write(&orch, text.replace("SCENE_SCOPE(ctx)", "")).unwrap();

    let out = env
        .scene(&["run", "::loop_100k", "--include-manual"])
        .env("SCENE_RUNTIME_OPTIONS", ONE_MIB)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("PASS scope_loop::loop_100k"), "{stdout}");
    let fail = stdout
        .split("FAIL ")
        .nth(1)
        .unwrap_or_else(|| panic!("no failing case:\n{stdout}"));
    assert!(
        fail.starts_with("scope_loop_unscoped::loop_100k"),
        "{stdout}"
    );
    assert!(fail.contains("device memory exhausted"), "{stdout}");
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");
}
