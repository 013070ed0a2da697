//! Level-3 scenes: rank groups, the communication window and per-rank
//! tensors.
//!
//! A level-3 scene runs its chip callable once per rank, each rank on its
//! own card, all in one communication domain (`scene_rt_comm_create`).
//! `scene.toml` says how many ranks (`ranks = 2` or an expression of the
//! case params such as `ranks = "nranks"`) and how large each rank's window
//! is (`[comm] window = "<bytes expression>"`). A tensor declared
//! `per_rank = true` has a leading rank dimension: rank r gets slice r as
//! its argument, and its fixture slice r is seeded from (scene, case,
//! `<tensor>@rank<r>`). Other tensors go whole to every rank. Goldens see
//! the full tensors (every rank's slice), and every output of a level-3
//! scene is per-rank.

use scene_golden::Tensor;

use crate::shape::Dim;

/// Largest rank group (`SCENE_COMM_MAX_RANKS`).
pub const MAX_RANKS: usize = scene_device::abi::SCENE_COMM_MAX_RANKS;

/// A level-3 scene's group, as written.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    /// `ranks`: a number or an expression of the case params.
    pub ranks: Dim,
    /// `[comm] window`: bytes of every rank's window.
    pub window: Dim,
}

/// A level-3 case's group, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseGroup {
    pub ranks: usize,
    pub window: u64,
}

/// The fixture name of slice `rank` of a per-rank tensor (what seeds it).
pub fn slice_fixture_name(tensor: &str, rank: usize) -> String {
    format!("{tensor}@rank{rank}")
}

/// Bytes of slice `rank` of `t` along its leading dimension of `ranks`.
pub fn rank_slice(t: &Tensor, ranks: usize, rank: usize) -> &[u8] {
    let bytes = t.bytes();
    let per = bytes.len() / ranks.max(1);
    &bytes[per * rank..per * (rank + 1)]
}

/// The shape of one rank's slice of a per-rank tensor of `shape`.
pub fn slice_shape(shape: &[usize]) -> Vec<usize> {
    match shape {
        [_] => vec![1],
        [_, rest @ ..] => rest.to_vec(),
        [] => Vec::new(),
    }
}

/// One tensor from `ranks` slices of `slice_shape` (rank-major).
pub fn join_slices(
    like: &Tensor,
    slices: Vec<Vec<u8>>,
) -> Result<Tensor, scene_golden::TensorError> {
    let bytes: Vec<u8> = slices.into_iter().flatten().collect();
    Tensor::from_bytes(like.dtype(), like.shape(), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scene_golden::DType;

    #[test]
    fn slices_split_and_join_along_the_rank_dimension() {
        let t = Tensor::from_f64(DType::F32, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let s1 = rank_slice(&t, 2, 1);
        assert_eq!(s1.len(), 12);
        let back = join_slices(&t, vec![rank_slice(&t, 2, 0).to_vec(), s1.to_vec()]).unwrap();
        assert_eq!(back, t);
        assert_eq!(slice_shape(&[4, 2, 8]), vec![2, 8]);
        assert_eq!(slice_shape(&[4]), vec![1]);
        assert_eq!(slice_fixture_name("x", 3), "x@rank3");
    }
}
