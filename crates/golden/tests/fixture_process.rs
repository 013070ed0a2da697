//! Fixture bytes are identical across processes (and pinned across
//! machines and dependency updates).

use std::process::Command;

use scene_golden::{DType, FixtureSeed, Init, Tensor, make_fixture};

const CHILD_ENV: &str = "SCENE_GOLDEN_FIXTURE_CHILD";

fn fixtures() -> Vec<(&'static str, Tensor)> {
    let seed = |tensor| FixtureSeed {
        scene: "decode_attention",
        case: "b1_h8",
        tensor,
        seed: 42,
    };
    vec![
        (
            "normal_bf16",
            make_fixture(
                DType::BF16,
                &[8, 128],
                &Init::Normal {
                    mean: 0.0,
                    std: 1.0,
                },
                &seed("q"),
            ),
        ),
        (
            "normal_f32",
            make_fixture(
                DType::F32,
                &[1000],
                &Init::Normal {
                    mean: 0.5,
                    std: 0.1,
                },
                &seed("k"),
            ),
        ),
        (
            "uniform_f16",
            make_fixture(
                DType::F16,
                &[3, 77],
                &Init::Uniform {
                    low: -1.0,
                    high: 1.0,
                },
                &seed("v"),
            ),
        ),
        (
            "uniform_f64",
            make_fixture(
                DType::F64,
                &[513],
                &Init::Uniform {
                    low: 0.0,
                    high: 1e6,
                },
                &seed("w"),
            ),
        ),
        (
            "randint_i32",
            make_fixture(
                DType::I32,
                &[4, 64],
                &Init::Randint { low: 0, high: 4096 },
                &seed("block_table"),
            ),
        ),
        (
            "randint_i64",
            make_fixture(
                DType::I64,
                &[100],
                &Init::Randint {
                    low: i64::MIN,
                    high: i64::MAX,
                },
                &seed("big"),
            ),
        ),
        (
            "permutation_i32",
            make_fixture(
                DType::I32,
                &[4, 64],
                &Init::Permutation { n: 128 },
                &seed("block_table"),
            ),
        ),
    ]
}

/// In a child process (env var set) prints one `DIGEST name hex` line per
/// fixture; otherwise does nothing.
#[test]
fn child_prints_digests() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    for (name, t) in fixtures() {
        println!("DIGEST {name} {}", blake3::hash(t.bytes()).to_hex());
    }
}

#[test]
fn same_bytes_in_another_process() {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            "child_prints_digests",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("re-run the test binary");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let theirs: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|l| l.find("DIGEST ").map(|at| &l[at + 7..]))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let ours: Vec<(&str, String)> = fixtures()
        .into_iter()
        .map(|(n, t)| (n, blake3::hash(t.bytes()).to_hex().to_string()))
        .collect();
    assert_eq!(theirs.len(), ours.len(), "child printed: {stdout}");
    for ((n1, d1), (n2, d2)) in theirs.iter().zip(&ours) {
        assert_eq!((*n1, *d1), (*n2, d2.as_str()));
    }
}

/// The generator is specified down to the byte: these digests must never
/// change on any machine. If they do, every recorded fixture changes too.
#[test]
fn digests_are_pinned() {
    let pinned = [
        (
            "normal_bf16",
            "8e01297026b71b767b46b82bfe57f19b79e552f3907e5d5208648cd559f999dc",
        ),
        (
            "normal_f32",
            "7fd4e1e2522f2061b82673ee67264f1eb4cde7594bab0bac93867950ebd96a5c",
        ),
        (
            "uniform_f16",
            "59be87847da9153603869f8c150f6cca031f991d222462df77e9f3ecc2b20b98",
        ),
        (
            "uniform_f64",
            "28113cbe9e692c84179d629ec80c5b3af9ecf2a6d3608511bb85b1b362825cf3",
        ),
        (
            "randint_i32",
            "075d52a87c28d0ad406a03dec45377b05f2fd9667e487b163a68ba1d27a2c9eb",
        ),
        (
            "randint_i64",
            "298038b821d91447f262ba1c8ff21b6b68721e9e7cdb07fa402d480db6ddb761",
        ),
        (
            "permutation_i32",
            "5a50210fb82590214afb443fbffc8ea04589a258d698b89a667417a46887818f",
        ),
    ];
    assert_eq!(pinned.len(), fixtures().len());
    let got: Vec<(&str, String)> = fixtures()
        .into_iter()
        .map(|(n, t)| (n, blake3::hash(t.bytes()).to_hex().to_string()))
        .collect();
    for ((n, want), (gn, g)) in pinned.iter().zip(&got) {
        assert_eq!(n, gn);
        assert_eq!(*want, g.as_str(), "fixture `{n}` changed");
    }
}
