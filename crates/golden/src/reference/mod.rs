//! CPU reference operators for goldens.
//!
//! Everything works on row-major `f32` slices with `f32` results; sizes are
//! passed explicitly and checked, and a size that does not add up panics
//! with a message naming the operand (goldens are code, not user input —
//! [`matmul_tensors`] is the checked, `Result`-returning entry point for
//! tensors). Results do not depend on the number of threads: parallel ops
//! split by output rows and keep each row's accumulation order fixed.
//!
//! Run goldens under a thread cap with [`with_thread_cap`] or an explicit
//! [`golden_pool`].

mod attention;
mod elementwise;
mod matmul;
mod norm;
mod pool;
mod rope;

pub use attention::{
    AttentionShape, PagedKv, attention_decode, attention_decode_gqa, attention_decode_paged,
};
pub use elementwise::{
    add, add_scalar, div, gelu_tanh, mul, mul_scalar, relu, sigmoid, silu, silu_mul, sub,
};
pub use matmul::{RefError, matmul, matmul_tensors};
pub use norm::{rmsnorm, softmax_rows};
pub use pool::{default_thread_cap, golden_pool, try_golden_pool, with_thread_cap};
pub use rope::{rope, rope_cos_sin};

/// Panics unless `data.len() == expected`.
#[track_caller]
pub(crate) fn check_len(what: &str, data: usize, expected: usize) {
    assert!(
        data == expected,
        "reference op: `{what}` has {data} elements, expected {expected}"
    );
}
