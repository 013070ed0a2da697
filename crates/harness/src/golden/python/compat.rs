//! Our own `simpler` / `simpler_setup` Python packages (issue 40, part 2):
//! the names the original project's `test_*.py` files import
//! (`scene_test`, `SceneTestCase`, `TaskArgsBuilder`, `TensorArg`,
//! `Scalar`, `simpler.task_interface.ArgDirection`, `scalar_to_uint64`,
//! ...), with the behaviour its harness gives them, written by us from
//! the names and that behaviour (`tests/simpler-compat/design/
//! test-files.md`); nothing of the original is copied.
//!
//! The sources are embedded in the harness ([`FILES`]) and written, once,
//! under a directory named by their digest ([`materialise`]), which the
//! Python worker puts first on `sys.path` for a test file. Its
//! `simpler_setup.goldens` (shared golden code of the original's tests)
//! is taken from the checkout `SCENE_SIMPLER_ROOT` names, where it stands.
//!
//! `simpler.worker` holds only `Worker`, which raises when used: a file
//! whose own `test_*` methods drive the original's runtime imports it,
//! and its cases still run. The tests below check the behaviours the
//! original's files rely on, with plain Python values (no torch).

use std::path::{Path, PathBuf};

/// Each module: its path under the package root and its source.
pub const FILES: &[(&str, &str)] = &[
    (
        "simpler/__init__.py",
        include_str!("compat/simpler/__init__.py"),
    ),
    (
        "simpler/task_interface.py",
        include_str!("compat/simpler/task_interface.py"),
    ),
    (
        "simpler/worker.py",
        include_str!("compat/simpler/worker.py"),
    ),
    (
        "simpler_setup/__init__.py",
        include_str!("compat/simpler_setup/__init__.py"),
    ),
    (
        "simpler_setup/scene_test.py",
        include_str!("compat/simpler_setup/scene_test.py"),
    ),
];

/// blake3 over every module's path and source, hex.
pub fn digest() -> String {
    let mut h = blake3::Hasher::new();
    for (path, text) in FILES {
        h.update(&(path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update(&(text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// Writes the packages under `base` (`<base>/simpler-compat-<digest>/`,
/// each file rewritten only when missing or different) and returns that
/// directory: what goes on `sys.path`.
pub fn materialise(base: &Path) -> std::io::Result<PathBuf> {
    let dir = base.join(format!("simpler-compat-{}", &digest()[..16]));
    for (path, text) in FILES {
        scene_util::write_atomically_if_changed(&dir.join(path), text.as_bytes())?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The behaviours a test file of the original relies on, as a Python
    /// script over the written packages; prints `ok` when all hold.
    const CHECKS: &str = r#"
import ctypes, os, sys, tempfile, textwrap, importlib.util
sys.path.insert(0, sys.argv[1])
from simpler.task_interface import ArgDirection as D, DataType, scalar_to_uint64
from simpler_setup import Scalar, SceneTestCase, TaskArgsBuilder, TensorArg, scene_test
from simpler_setup.scene_test import is_manual_for_platform

def raises(exc, f, *a):
    try:
        f(*a)
    except exc as e:
        return str(e)
    raise AssertionError(f"{f} did not raise {exc}")

# Directions and dtypes: enums with the original's values.
assert (D.SCALAR.value, D.IN.value, D.OUT.value, D.INOUT.value) == (0, 1, 2, 3)
assert not isinstance(D.IN, int)
assert DataType.BFLOAT16.value == 6 and DataType.UINT32.value == 10

# Scalars cross as 64 bits: a Python float as f32 bits.
assert scalar_to_uint64(1.5) == 0x3FC00000
assert scalar_to_uint64(ctypes.c_float(1.0)) == 0x3F800000
assert scalar_to_uint64(ctypes.c_double(1.0)) == 0x3FF0000000000000
assert scalar_to_uint64(ctypes.c_int64(-1)) == (1 << 64) - 1
assert scalar_to_uint64(-2) == (1 << 64) - 2
assert scalar_to_uint64(True) == 1

# TaskArgsBuilder: tensors then scalars, unique names, values by name.
a = [1.0, 2.0]
args = TaskArgsBuilder(TensorArg("a", a), "ignored", Scalar("n", ctypes.c_int64(3)))
assert args.a is a and args.n.value == 3
assert args.tensor_names() == ["a"] and [s.name for s in args.specs] == ["a", "n"]
assert "after scalar" in raises(ValueError, args.add_tensor, "b", [0.0])
assert "duplicate" in raises(ValueError, args.add_scalar, "n", 4)
assert "conflicts" in raises(ValueError, args.add_tensor, "clone", [0.0])
assert "no argument 'zz'" in raises(AttributeError, getattr, args, "zz")
copy = args.clone()
copy.a[0] = 9.0
assert a[0] == 1.0 and copy.n.value == 3 and copy.n is not args.n

# Manual: a string, a list, or a bool.
assert is_manual_for_platform(["a2a3sim"], "a2a3sim")
assert not is_manual_for_platform(["a2a3sim"], "a2a3")
assert is_manual_for_platform("a2a3", "a2a3") and not is_manual_for_platform("a2a3", "a2a3sim")
assert is_manual_for_platform(True, "x") and not is_manual_for_platform(None, "x")

# @scene_test: level, runtime, sources resolved beside the file, configs
# checked when the class is made.
src = textwrap.dedent('''
    from simpler.task_interface import ArgDirection as D
    from simpler_setup import SceneTestCase, scene_test

    @scene_test(level=2, runtime="host_build_graph")
    class TestT(SceneTestCase):
        CALLABLE = {
            "orchestration": {"source": "kernels/orch.cpp", "function_name": "aicpu_orchestration_entry",
                              "signature": [D.IN, D.OUT]},
            "incores": [{"func_id": 0, "source": "kernels/aiv/k.cpp", "core_type": "aiv"}],
        }
        CASES = [{"name": "c", "platforms": ["a2a3sim"], "config": {"aicpu_thread_num": 2}}]
''')
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "test_t.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("test_t", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    T = mod.TestT
    assert int(T._st_level) == 2 and T._st_runtime == "host_build_graph"
    assert T.CALLABLE["orchestration"]["source"] == os.path.join(d, "kernels/orch.cpp")
    assert T.CALLABLE["incores"][0]["source"] == os.path.join(d, "kernels/aiv/k.cpp")
    assert (T.RTOL, T.ATOL) == (1e-5, 1e-5)

class Bad(SceneTestCase):
    CASES = [{"name": "c", "config": {"threads": 2}}]
assert "threads" in raises(ValueError, scene_test(level=2, runtime="x"), Bad)
class Odd(SceneTestCase):
    CASES = []
assert "level" in raises(ValueError, scene_test(level=5, runtime="x"), Odd)
print("ok")
"#;

    #[test]
    fn the_packages_are_written_once_under_their_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = materialise(tmp.path()).unwrap();
        assert!(dir.ends_with(format!("simpler-compat-{}", &digest()[..16])));
        let scene_test = dir.join("simpler_setup/scene_test.py");
        std::fs::write(&scene_test, "raise SystemExit").unwrap();
        assert_eq!(materialise(tmp.path()).unwrap(), dir);
        assert_eq!(
            std::fs::read_to_string(&scene_test).unwrap(),
            FILES
                .iter()
                .find(|(path, _)| *path == "simpler_setup/scene_test.py")
                .map(|(_, text)| *text)
                .unwrap(),
            "a damaged module is rewritten"
        );
    }

    #[test]
    fn the_names_behave_as_the_original_test_files_expect() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = materialise(tmp.path()).unwrap();
        let out = Command::new("python3")
            .args(["-B", "-c", CHECKS])
            .arg(&dir)
            .env_remove("SCENE_SIMPLER_ROOT")
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
