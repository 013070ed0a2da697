//! The two ports of simpler's paged attention scene tests
//! (`paged_attention`, `paged_attention_unroll_4dims`) run through the real
//! `scene` binary: they pass on a2a3sim, and each fails, naming its output
//! tensor, when one kernel or the orchestration is mutated (copies in a
//! temp scenes dir, so the package's scenes are never touched).

use crate::common;

use std::path::Path;

use common::{TestEnv, copy_dir, package_scenes_dir};

const PA: &str = "paged_attention";
const UNROLL: &str = "paged_attention_unroll_4dims";

/// A private scenes dir with both ports and their shared kernels.
fn env_with_ports() -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.clone().unwrap();
    for s in [PA, UNROLL, "common_pa"] {
        copy_dir(&package_scenes_dir().join(s), &dir.join(s));
    }
    env
}

/// Replaces `from` (which must occur exactly once) by `to` in `file`.
fn mutate(env: &TestEnv, file: &str, from: &str, to: &str) {
    let path = env.scenes_dir.as_ref().unwrap().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "{file}: the mutation site `{from}` must occur exactly once"
    );
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

fn run(env: &TestEnv, filter: &str) -> (bool, String) {
    let out = env
        .scene(&["run", filter, "--platform", "a2a3sim"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `filter` fails on a comparison of `out` (not a crash, not a load error).
fn assert_fails_on_out(env: &TestEnv, filter: &str, what: &str) {
    let (ok, text) = run(env, filter);
    assert!(!ok, "{what}: the mutated scene passed\n{text}");
    assert!(
        text.contains(&format!("FAIL {filter}")) && text.contains("tensor `out` mismatch"),
        "{what}: expected `{filter}` to fail on tensor `out`\n{text}"
    );
}

#[test]
fn both_ports_pass_on_a2a3sim() {
    let env = env_with_ports();
    let (ok, text) = run(&env, "paged_attention");
    assert!(ok, "{text}");
    for case in [
        "paged_attention::small1",
        "paged_attention::small_batch4",
        "paged_attention_unroll_4dims::small1",
        "paged_attention_unroll_4dims::small_batch4",
        "paged_attention_unroll_4dims::small_groups",
    ] {
        assert!(
            text.contains(&format!("PASS {case} ")),
            "{case} did not pass\n{text}"
        );
    }
    // The hardware-sized cases are manual: there, but not run by default;
    // small2 is manual as in the original, and runs when named.
    assert!(!text.contains("Case1"), "{text}");
    assert!(!text.contains("paged_attention::small2"), "{text}");
    let (ok, text) = run(&env, "paged_attention::small2");
    assert!(
        ok && text.contains("PASS paged_attention::small2 "),
        "{text}"
    );
    let listed = env
        .scene(&["list", "paged_attention", "--include-manual"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    for case in [
        "paged_attention::Case1  [hardware only: a2a3]",
        "paged_attention::Case2  [hardware only: a2a3]",
        "paged_attention::small2",
        "paged_attention_unroll_4dims::Case1",
        "paged_attention_unroll_4dims::Case3",
    ] {
        assert!(listed.contains(case), "{listed}");
    }
}

#[test]
fn fixtures_draw_distinct_blocks_and_varying_lengths() {
    let env = env_with_ports();
    let dump = env.dir.path().join("dump");
    let out = env
        .scene(&[
            "run",
            "paged_attention::small_batch4",
            "--dump",
            dump.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let inputs = dump.join("paged_attention/small_batch4/inputs");
    let lens = read_i32_npy(&inputs.join("context_lens.npy"));
    let table = read_i32_npy(&inputs.join("block_table.npy"));
    assert_eq!(lens.len(), 4);
    assert!(lens.iter().all(|&l| (1..=64).contains(&l)), "{lens:?}");
    let mut distinct = lens.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 1, "context_lens do not vary: {lens:?}");
    // Every block a batch uses is used by no other batch, and is a block.
    let mut used: Vec<i32> = Vec::new();
    for (b, &l) in lens.iter().enumerate() {
        let nb = (l as usize).div_ceil(16);
        used.extend(&table[b * 16..b * 16 + nb]);
    }
    let n = used.len();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used.len(), n, "blocks shared between batches: {table:?}");
    assert!(used.iter().all(|&x| (0..16).contains(&x)));
}

/// The original's cases keep the original's fixtures: every context length
/// is `context_len`, the block table is drawn from the cache's
/// `total_blocks` blocks (repeats allowed) and is `max_model_len /
/// block_size` wide (the derived params).
#[test]
fn original_cases_keep_the_original_fixtures() {
    let env = env_with_ports();
    let dump = env.dir.path().join("dump");
    let out = env
        .scene(&[
            "run",
            "paged_attention::small2",
            "--dump",
            dump.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let inputs = dump.join("paged_attention/small2/inputs");
    assert_eq!(read_i32_npy(&inputs.join("context_lens.npy")), [64]);
    let table = read_i32_npy(&inputs.join("block_table.npy"));
    // max_num_blocks_per_req = 256 / 16; total_blocks = 1 * ceil(64 / 16).
    assert_eq!(table.len(), 16);
    assert!(table.iter().all(|&x| (0..4).contains(&x)), "{table:?}");
    let meta = common::read_report(&dump.join("paged_attention/small2/meta.json"));
    let key = meta["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "key_cache")
        .unwrap()
        .clone();
    assert_eq!(key["dtype"], "bf16", "{key}");
    assert_eq!(key["shape"], serde_json::json!([4, 16, 1, 16]), "{key}");
}

/// The data of a little-endian i32 `.npy` file.
fn read_i32_npy(path: &Path) -> Vec<i32> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8_lossy(&bytes[10..10 + header_len]);
    assert!(header.contains("<i4"), "{header}");
    bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn paged_attention_fails_with_a_wrong_index_in_pv_matmul() {
    let env = env_with_ports();
    // pij[m][k] @ vj[k][n] -> vj[k][n] taken from row K-1-k.
    mutate(
        &env,
        "paged_attention/kernels/aic_pv_matmul.c",
        "*SCENE_AT2(ka, 1, uint16_t, k, n)",
        "*SCENE_AT2(ka, 1, uint16_t, K - 1 - k, n)",
    );
    assert_fails_on_out(&env, "paged_attention::small_batch4", "pv_matmul index");
}

#[test]
fn paged_attention_original_cases_fail_with_a_mutated_kernel() {
    let env = env_with_ports();
    // The QK kernel drops the first term of every dot product.
    mutate(
        &env,
        "paged_attention/kernels/aic_qk_matmul.c",
        "for (uint64_t k = 0; k < K; k++)",
        "for (uint64_t k = 1; k < K; k++)",
    );
    assert_fails_on_out(&env, "paged_attention::small1", "qk_matmul dropped term");
    assert_fails_on_out(&env, "paged_attention::small2", "qk_matmul dropped term");
}

#[test]
fn paged_attention_fails_reading_the_next_block_table_entry() {
    let env = env_with_ports();
    mutate(
        &env,
        "paged_attention/orchestration.c",
        "uint64_t bt_idx[2] = {b, bn};",
        "uint64_t bt_idx[2] = {b, bn + 1};",
    );
    assert_fails_on_out(
        &env,
        "paged_attention::small_batch4",
        "block_table[b][bn+1]",
    );
}

#[test]
fn paged_attention_fails_ignoring_context_lens() {
    let env = env_with_ports();
    // Every block taken as full: the last block's tail is attended to.
    mutate(
        &env,
        "paged_attention/orchestration.c",
        "uint64_t valid_len = rest < pa->block_size ? rest : pa->block_size;",
        "uint64_t valid_len = pa->block_size; (void)rest;",
    );
    assert_fails_on_out(
        &env,
        "paged_attention::small_batch4",
        "ignoring context_lens",
    );
}

#[test]
fn unroll_fails_with_a_wrong_index_in_pv_matmul() {
    let env = env_with_ports();
    // pij column i*K+k paired with value row k+1 (wrapping in the block).
    mutate(
        &env,
        "paged_attention_unroll_4dims/kernels/aic_pv_matmul.c",
        "*SCENE_AT4(ka, 1, uint16_t, blk, k, 0, n)",
        "*SCENE_AT4(ka, 1, uint16_t, blk, (k + 1) % K, 0, n)",
    );
    assert_fails_on_out(
        &env,
        "paged_attention_unroll_4dims::small_batch4",
        "pv_matmul index",
    );
}

#[test]
fn unroll_fails_with_the_block_table_view_one_column_off() {
    let env = env_with_ports();
    mutate(
        &env,
        "paged_attention_unroll_4dims/orchestration.c",
        "uint64_t bt_off[2] = {b, bn}",
        "uint64_t bt_off[2] = {b, bn + 1}",
    );
    assert_fails_on_out(
        &env,
        "paged_attention_unroll_4dims::small_batch4",
        "block_table view one column off",
    );
}

#[test]
fn unroll_fails_ignoring_context_lens() {
    let env = env_with_ports();
    // The last block of a group taken as full.
    mutate(
        &env,
        "paged_attention_unroll_4dims/orchestration.c",
        "uint64_t valid_len_last = rest < pa->block_size ? rest : pa->block_size;",
        "uint64_t valid_len_last = pa->block_size; (void)rest;",
    );
    assert_fails_on_out(
        &env,
        "paged_attention_unroll_4dims::small_batch4",
        "ignoring context_lens",
    );
}
