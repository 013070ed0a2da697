//! `scene run --junit` read back by a real JUnit reader: the PyPI package
//! `junitparser` (`.ci/run` installs it; without python3 or the package
//! this test prints why and skips).

use crate::common;

use std::process::Command;

use common::{TestEnv, copy_scene};

/// Checks the file with junitparser and prints one line per case:
/// `<classname>::<name> <result> <type>`, plus the suite's counts.
const CHECK: &str = r#"
import sys
from junitparser import JUnitXml, Failure, Error
xml = JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    out = suite._elem.find("system-out")
    print("suite", suite.name, suite.tests, suite.failures, suite.errors,
          suite.timestamp is not None, bool(out is not None and out.text))
    for case in suite:
        kinds = [("failure" if isinstance(r, Failure) else
                  "error" if isinstance(r, Error) else type(r).__name__, r.type)
                 for r in case.result]
        kind = " ".join(f"{k} {t}" for k, t in kinds) or "passed"
        print(f"case {case.classname}::{case.name} {kind} {bool(case.system_out)}")
"#;

fn junitparser_available() -> bool {
    Command::new("python3")
        .args(["-c", "import junitparser"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn junit_reads_back_with_junitparser() {
    if !junitparser_available() {
        println!(
            "skipped: python3 with junitparser is not available \
             (`python3 -m pip install junitparser`; .ci/run installs it)"
        );
        return;
    }
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vec_ok");
    let wrong = copy_scene(&env, "vector_example", "vec_wrong");
    let add = wrong.join("kernels/add.c");
    let src = std::fs::read_to_string(&add).unwrap();
    std::fs::write(&add, src.replace("a[i] + b[i]", "a[i] - b[i]")).unwrap();
    let broken = copy_scene(&env, "vector_example", "vec_broken");
    let mul = broken.join("kernels/mul.c");
    let src = std::fs::read_to_string(&mul).unwrap();
    std::fs::write(&mul, src.replace("a[i] * b[i];", "a[i] * b[i] +;")).unwrap();
    let bad = copy_scene(&env, "vector_example", "vec_bad");
    let toml = bad.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, t.replace("func_id = 2", "func_id = 1")).unwrap();

    let junit = env.dir.path().join("junit.xml");
    let out = env
        .scene(&["run", "--junit", junit.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let check = Command::new("python3")
        .args(["-c", CHECK])
        .arg(&junit)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "junitparser refused the file: {}\n{}",
        String::from_utf8_lossy(&check.stderr),
        std::fs::read_to_string(&junit).unwrap_or_default()
    );
    let mut lines: Vec<&str> = said.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "case vec_bad::load error load True",
            "case vec_broken::odd error compile True",
            "case vec_broken::small error compile True",
            "case vec_ok::odd passed True",
            "case vec_ok::small passed True",
            "case vec_wrong::odd failure compare True",
            "case vec_wrong::small failure compare True",
            "suite scenes.a2a3sim 7 2 3 True True",
        ],
        "{said}"
    );
}
