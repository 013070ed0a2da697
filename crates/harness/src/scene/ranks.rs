//! Level-3 scenes: rank groups, the communication window and per-rank
//! tensors.
//!
//! A level-3 scene runs its chip callable once per rank, each rank on its
//! own card, all in one communication domain (`scene_rt_comm_create`).
//! `scene.toml` says how many ranks (`ranks = 2` or an expression of the
//! case params such as `ranks = "nranks"`) and how large each rank's window
//! is (`[comm] window = "<bytes expression>"`), or which per-rank tensor
//! is every rank's window (`[comm] window_tensor = "scratch"`: rank r's
//! slice of it is rank r's window, so the orchestration passes the window
//! to its tasks as a tensor argument, views included). A tensor declared
//! `per_rank = true` has a leading rank dimension: rank r gets slice r as
//! its argument, and its fixture slice r is seeded from (scene, case,
//! `<tensor>@rank<r>`). Other tensors go whole to every rank. Goldens see
//! the full tensors (every rank's slice), and every output of a level-3
//! scene is per-rank.

use scene_golden::Tensor;

use crate::scene::shape::Dim;

/// Largest rank group (`SCENE_COMM_MAX_RANKS`).
pub const MAX_RANKS: usize = scene_device::abi::SCENE_COMM_MAX_RANKS;

/// A level-3 scene's group, as written.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    /// `ranks`: a number or an expression of the case params.
    pub ranks: Dim,
    /// `[comm] window` or `[comm] window_tensor`.
    pub window: WindowSpec,
}

/// Where a level-3 scene's windows come from.
#[derive(Clone, Debug)]
pub enum WindowSpec {
    /// `[comm] window`: bytes of every rank's window (the runtime's own,
    /// zeroed memory).
    Bytes(Dim),
    /// `[comm] window_tensor`: the per-rank `inout` tensor at this index
    /// of the scene's tensors; rank r's slice of it, a run argument in the
    /// rank's device memory, is rank r's window.
    Tensor(usize),
}

/// A level-3 case's group, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseGroup {
    pub ranks: usize,
    /// Bytes of every rank's window (a window tensor's slice bytes).
    pub window: u64,
    /// `[comm] window_tensor`: the index of the window tensor among the
    /// scene's tensors (and so among each rank's tensor arguments).
    pub window_tensor: Option<usize>,
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
    // One slice (every level-2 output) is moved, several are copied
    // whole: a byte-wise iterator chain was seconds for a 65 MB output
    // in a debug build.
    let bytes: Vec<u8> = if slices.len() == 1 {
        slices.into_iter().next().unwrap_or_default()
    } else {
        slices.concat()
    };
    Tensor::from_bytes(like.dtype(), like.shape(), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;
    use scene_golden::DType;

    /// A level-3 scene.toml with `head` lines after `level` and the
    /// tensors' extra `x` / `y` lines.
    fn toml(head: &str, x: &str, y: &str) -> String {
        format!(
            r#"name = "demo"
platforms = ["a2a3sim"]
golden = "g"
{head}
[orchestration]
source = "orch.c"
function = "o"
signature = ["in", "out"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "x"
dtype = "f32"
shape = ["nranks", "N"]
{x}

[[tensors]]
name = "y"
dtype = "f32"
shape = ["nranks", "N"]
{y}

[[cases]]
name = "c"
params = {{ nranks = 4, N = 8 }}
"#
        )
    }

    fn load(text: &str) -> Result<Scene, String> {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("demo");
        std::fs::create_dir(&dir).unwrap();
        for f in ["orch.c", "k.c"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        std::fs::write(dir.join("scene.toml"), text).unwrap();
        Scene::load(&dir).map_err(|e| e.to_string())
    }

    const L3: &str = "level = 3\nranks = \"nranks\"\n[comm]\nwindow = \"N * 4\"\n";

    #[test]
    fn a_level_3_scene_resolves_ranks_and_window_per_case() {
        let s = load(&toml(L3, "per_rank = true", "per_rank = true")).unwrap();
        assert_eq!(s.level, 3);
        assert!(s.tensors.iter().all(|t| t.per_rank));
        assert_eq!(
            s.cases[0].group,
            Some(CaseGroup {
                ranks: 4,
                window: 32,
                window_tensor: None,
            })
        );
    }

    /// A group whose ranks do not communicate needs no window: 0 is a
    /// size, a negative one is not, whether written or computed.
    #[test]
    fn a_window_may_be_0_but_not_negative() {
        for window in ["0", "\"0\"", "\"N - N\""] {
            let l3 = format!("level = 3\nranks = \"nranks\"\n[comm]\nwindow = {window}\n");
            let s = load(&toml(&l3, "per_rank = true", "per_rank = true")).unwrap();
            assert_eq!(
                s.cases[0].group,
                Some(CaseGroup {
                    ranks: 4,
                    window: 0,
                    window_tensor: None,
                }),
                "{window}"
            );
        }
        let l3 = "level = 3\nranks = \"nranks\"\n[comm]\nwindow = -8\n";
        let e = load(&toml(l3, "per_rank = true", "per_rank = true")).unwrap_err();
        assert!(
            e.contains("comm.window") && e.contains("must be 0 or more, got -8"),
            "{e}"
        );
        let l3 = "level = 3\nranks = \"nranks\"\n[comm]\nwindow = \"N - 9\"\n";
        let e = load(&toml(l3, "per_rank = true", "per_rank = true")).unwrap_err();
        assert!(
            e.contains("comm.window") && e.contains("not a size (0 or more)"),
            "{e}"
        );
        let l3 = "level = 3\nranks = 0\n[comm]\nwindow = 0\n";
        let e = load(&toml(l3, "per_rank = true", "per_rank = true")).unwrap_err();
        assert!(e.contains("ranks") && e.contains("must be positive"), "{e}");
    }

    #[test]
    fn level_3_fields_are_checked_naming_the_field() {
        let e = load(&toml("level = 3\n", "per_rank = true", "per_rank = true")).unwrap_err();
        assert!(
            e.contains("ranks") && e.contains("level-3 scene says how many ranks"),
            "{e}"
        );
        let e = load(&toml(
            "level = 3\nranks = 2\n",
            "per_rank = true",
            "per_rank = true",
        ))
        .unwrap_err();
        assert!(e.contains("[comm] window"), "{e}");
        let e = load(&toml(L3, "per_rank = true", "")).unwrap_err();
        assert!(
            e.contains("output tensor `y`") && e.contains("per_rank"),
            "{e}"
        );
        let e = load(&toml("level = 2\n", "per_rank = true", "")).unwrap_err();
        assert!(
            e.contains("tensor `x` is per_rank but the scene is not level 3"),
            "{e}"
        );
        let e = load(&toml("level = 2\nranks = 2\n", "", "")).unwrap_err();
        assert!(e.contains("only a level-3 scene has ranks"), "{e}");
        let e = load(&toml(
            "level = 3\nranks = 2\n[comm]\nwindow = 64\n",
            "per_rank = true",
            "per_rank = true",
        ))
        .unwrap_err();
        assert!(
            e.contains(
                "per-rank tensor `x` has shape [4, 8]; its first dimension must be the 2 ranks"
            ),
            "{e}"
        );
        let e = load(&toml(
            "level = 3\nranks = 17\n[comm]\nwindow = 64\n",
            "per_rank = true",
            "per_rank = true",
        ))
        .unwrap_err();
        assert!(e.contains("17 ranks; a group has 1 to 16"), "{e}");
        let e = load(&toml("level = 4\n", "", "")).unwrap_err();
        assert!(e.contains("level 4 is not supported"), "{e}");
    }

    /// A level-3 scene.toml with a third tensor `w` (`w` lines), a scalar
    /// `n`, signature `[in, out, <dir>, scalar]`, and `comm` as [comm].
    fn with_window(comm: &str, dir: &str, w: &str) -> String {
        toml(
            &format!("level = 3\nranks = \"nranks\"\n[comm]\n{comm}\n"),
            "per_rank = true",
            &format!(
                "per_rank = true\n\n[[tensors]]\nname = \"w\"\ndtype = \"f32\"\nshape = [\"nranks\", \"3 * N\"]\n{w}\n\n[[scalars]]\nname = \"n\"\ndtype = \"i64\"\nvalue = \"N\""
            ),
        )
        .replace(
            "signature = [\"in\", \"out\"]",
            &format!("signature = [\"in\", \"out\", \"{dir}\", \"scalar\"]"),
        )
    }

    /// `[comm] window_tensor`: a per-rank inout tensor whose slice is the
    /// window, so the window's size is the slice's bytes.
    #[test]
    fn a_window_tensor_is_a_per_rank_inout_tensor_and_sizes_the_window() {
        let s = load(&with_window(
            "window_tensor = \"w\"",
            "inout",
            "per_rank = true",
        ))
        .unwrap();
        assert_eq!(
            s.cases[0].group,
            Some(CaseGroup {
                ranks: 4,
                window: 3 * 8 * 4,
                window_tensor: Some(2),
            })
        );
        let err = |comm: &str, dir: &str, w: &str| load(&with_window(comm, dir, w)).unwrap_err();
        let e = err(
            "window = 64\nwindow_tensor = \"w\"",
            "inout",
            "per_rank = true",
        );
        assert!(
            e.contains("comm.window_tensor") && e.contains("both window and window_tensor"),
            "{e}"
        );
        let e = err("window_tensor = \"v\"", "inout", "per_rank = true");
        assert!(
            e.contains("comm.window_tensor")
                && e.contains("`v` is not a tensor of the scene (tensors: x, y, w)"),
            "{e}"
        );
        let e = err("window_tensor = \"n\"", "inout", "per_rank = true");
        assert!(
            e.contains("comm.window_tensor") && e.contains("`n` is a scalar"),
            "{e}"
        );
        let e = err("window_tensor = \"w\"", "inout", "");
        assert!(
            e.contains("comm.window_tensor") && e.contains("must be per_rank = true"),
            "{e}"
        );
        let e = err("window_tensor = \"w\"", "in", "per_rank = true");
        assert!(
            e.contains("comm.window_tensor")
                && e.contains("must be `inout`")
                && e.contains("not `in`"),
            "{e}"
        );
        let e = err("", "inout", "per_rank = true");
        assert!(
            e.contains("[comm] needs window") && e.contains("or window_tensor"),
            "{e}"
        );
    }

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
