//! Tensors, dtypes, seeded fixtures, CPU reference operators and the
//! comparison verdict (`assert_close`) of scene tests.
//!
//! This is the CPU side of the harness. It holds data and arithmetic only:
//! it compiles nothing, opens no device or simulator, and parses no scene
//! files. The harness builds inputs with [`make_fixture`], computes expected
//! outputs with goldens written against [`reference`](mod@reference), exchanges tensors as
//! NumPy files through [`npy`], and judges device outputs with
//! [`assert_close`].
//!
//! * [`DType`] / [`Tensor`] — dense little-endian row-major tensors, with
//!   hardware rounding (RNE) on every conversion ([`tensor`] module docs);
//! * [`make_fixture`] — platform-independent seeded inputs ([`fixture`]);
//! * [`assert_close`] — streaming, parallel tolerance check with a human
//!   report ([`closeness`]);
//!   [`assert_exact`] compares bit for bit;
//! * [`measure`] — whole-tensor measures for other comparisons (cosine
//!   similarity, absolute-error statistics, the first non-finite element);
//! * [`npy`] — `.npy` v1.0 read/write;
//! * [`reference`](mod@reference) — CPU reference ops (matmul, softmax, rmsnorm, rope,
//!   decode attention, ...) and thread caps for goldens.
//!
//! ```
//! use scene_golden::{DType, FixtureSeed, Init, Tensor, Tolerance, assert_close, make_fixture};
//! use scene_golden::reference::silu;
//!
//! let seed = FixtureSeed { scene: "act", case: "small", tensor: "x", seed: 0 };
//! let x = make_fixture(DType::BF16, &[4, 8], &Init::Normal { mean: 0.0, std: 1.0 }, &seed);
//! let expected = Tensor::from_f32(DType::BF16, x.shape(), &silu(&x.to_f32_vec())).unwrap();
//! let device_out = expected.clone(); // in the harness: read back from the device
//! assert!(assert_close("y", &device_out, &expected, Tolerance::default_for(DType::BF16)).is_ok());
//! ```
//!
//! PINNED API (the harness depends on these names and signatures):
//! `DType` (+ `FromStr`, `Display`, `size_of`), `Tensor` (`zeros`,
//! `from_f32`, `from_f64`, `to_f32_vec`, `to_f64_vec`, `dtype`, `shape`,
//! `bytes`, `bytes_mut`, `numel`, `from_bytes`), `Init`, `FixtureSeed`,
//! `make_fixture`, `Tolerance` (+ `default_for`), `assert_close`, `Mismatch`,
//! `npy::{write_npy, read_npy}`.

pub mod closeness;
/// The old name of [`closeness`], kept so goldens written against it still
/// build.
#[doc(hidden)]
pub use closeness as compare;
pub mod dtype;
pub mod fixture;
pub mod measure;
pub mod npy;
pub mod reference;
pub mod tensor;

pub use closeness::{
    Mismatch, MismatchReport, Tolerance, Worst, assert_close, assert_exact, is_close,
};
pub use dtype::{DType, ParseDTypeError};
pub use fixture::{FixtureSeed, Init, ListItem, make_fixture};
pub use tensor::{Tensor, TensorError};
