//! Cards are machine-wide: a card held by one user's `scene` cannot be
//! taken by another user's process sharing the lock directory, and lock
//! files one user created can be taken by another.
//!
//! Needs root (to run a process as another uid); without it the test says
//! so and does nothing.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};

use common::{TestEnv, stderr_line_containing};
use scene_device::CardPool;

/// `nobody` on this machine.
const OTHER_UID: u32 = 65534;

fn running_as_root() -> bool {
    // `/proc/self` is owned by the process's uid (no libc call needed).
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Root of a user namespace that maps only itself (as in tests run with a
/// hidden checkout, crates/cli/tests/integration/archive.rs) cannot start other users.
/// Nor can another user run a binary under a directory it cannot enter
/// (a checkout in a 0700 temp dir): probed with the binary itself.
fn can_start_as(uid: u32) -> bool {
    std::process::Command::new(crate::common::scene_exe())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(uid)
        .gid(uid)
        .status()
        .is_ok_and(|s| s.success())
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Kills the child when the test ends, failed or not: a hung holder must
/// not outlive it.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_card_held_by_another_user_cannot_be_taken() {
    if !running_as_root() || !can_start_as(OTHER_UID) {
        println!(
            "SKIPPED a_card_held_by_another_user_cannot_be_taken: not running as root (or as root \
             of a user namespace that maps no other user, or the checkout is not readable by \
             others), so `scene` cannot be started as uid {OTHER_UID}"
        );
        return;
    }
    let env = TestEnv::new();
    // The other user reads the scenes and writes its kernel cache here.
    chmod(env.dir.path(), 0o755);
    std::fs::create_dir(&env.cache_dir).unwrap();
    chmod(&env.cache_dir, 0o777);
    let dumps = env.dir.path().join("failure-dumps");
    std::fs::create_dir(&dumps).unwrap();
    chmod(&dumps, 0o777);
    // A shared lock directory as the default one is made: sticky and
    // world-writable, like /tmp.
    let lock_dir = env.dir.path().join("cards");
    std::fs::create_dir(&lock_dir).unwrap();
    chmod(&lock_dir, 0o1777);

    // Root's pool creates card 0's lock file (with root's umask)...
    let pool = CardPool::new("0".parse().unwrap(), lock_dir.clone()).unwrap();
    let lock = pool.lock_path(0);
    let meta = std::fs::metadata(&lock).unwrap();
    assert_eq!(meta.uid(), 0);
    assert_eq!(meta.permissions().mode() & 0o777, 0o666);

    // ...and the other user's run takes card 0 through it and hangs there.
    let child = env
        .scene(&[
            "run",
            "vector_example::small",
            "--case-timeout",
            "600",
            "--verbose",
        ])
        .env("SCENE_LOCK_DIR", &lock_dir)
        .env("SCENE_RUNTIME_OPTIONS", "fault=hang")
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let (line, _rest) = stderr_line_containing(&mut child.0, "acquired card");
    assert!(line.contains("[0]"), "{line}");

    // Root cannot take card 0 while the other user holds it.
    assert!(
        pool.try_acquire(1, "root").unwrap().is_none(),
        "root took card 0 while uid {OTHER_UID} held it"
    );
    let holder = pool
        .holder(0)
        .expect("the holder is named in the lock file");
    assert_eq!(holder.pid, child.0.id(), "{holder}");

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let lease = pool
        .try_acquire(1, "root")
        .unwrap()
        .expect("card 0 still locked after the other user's holder died");
    assert_eq!(lease.cards(), [0]);
}
