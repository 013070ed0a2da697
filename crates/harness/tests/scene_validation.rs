//! Scene validation as data (rust-analyzer style): every directory under
//! `test_data/scene/` is a scene (`scene.toml` and the sources it names)
//! and an `expected.txt` holding what loading it says, one problem per
//! line. The scene directory's absolute path reads `$ROOT/<case>` and the
//! manifest `scene.toml`, so the files do not depend on the checkout.
//!
//! A new case: add the directory with an empty `expected.txt`, run with
//! `UPDATE_EXPECT=1` to fill it in, and read the result before committing.

use std::path::{Path, PathBuf};

use scene_harness::scene::{Scene, SceneError};

/// Read at run time first (a nextest archive run with `--workspace-remap`
/// sets it to the checkout it runs in).
fn data_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("test_data/scene")
}

fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data_root())
        .expect("test_data/scene is readable")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("scene.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// What loading `dir` says, with machine-specific paths replaced.
fn outcome(dir: &Path) -> (Result<Scene, SceneError>, String) {
    let result = Scene::load(dir);
    let text = match &result {
        Ok(_) => "ok\n".to_string(),
        Err(e) => {
            let root = data_root().canonicalize().expect("data root exists");
            let manifest = dir
                .canonicalize()
                .expect("case dir exists")
                .join("scene.toml");
            let text = e
                .to_string()
                .replace(&manifest.display().to_string(), "scene.toml")
                .replace(&root.display().to_string(), "$ROOT");
            format!("{text}\n")
        }
    };
    (result, text)
}

#[test]
fn every_data_case_says_what_expected_txt_says() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let cases = cases();
    assert!(cases.len() >= 20, "only {} cases found", cases.len());
    let mut failures = Vec::new();
    for dir in cases {
        let (_, actual) = outcome(&dir);
        let expected_file = dir.join("expected.txt");
        if update {
            std::fs::write(&expected_file, &actual).expect("expected.txt is writable");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_file).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{}:\n--- expected.txt\n{expected}--- actual\n{actual}",
                dir.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) differ (UPDATE_EXPECT=1 rewrites expected.txt):\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The acceptance case of issue 26: five independent mistakes in one
/// `scene.toml` (a name that is not the directory's, an unknown platform,
/// an orchestration function that is no C identifier, a duplicate
/// func_id, a negative tolerance) are five problems from one load, each
/// naming the file and its field.
#[test]
fn five_independent_mistakes_five_messages() {
    let dir = data_root().join("five_independent_mistakes");
    let (result, text) = outcome(&dir);
    let err = result.expect_err("the scene is invalid");
    let fields: Vec<&str> = err.problems().iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "name",
            "platforms",
            "orchestration.function",
            "incores[1].func_id",
            "tensors[1].atol",
        ],
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    for (line, field) in lines.iter().zip(&fields) {
        assert!(
            line.starts_with(&format!("scene.toml: `{field}`: ")),
            "{line}"
        );
    }
}
