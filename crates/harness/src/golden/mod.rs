//! Goldens: the registry of CPU reference functions ([`registry`]), the
//! stage that gives a case its fixtures and golden ([`stage`]: native or
//! Python, through the cache when it is on), the golden tier of the kernel
//! cache ([`cache`]) and the Python worker behind Python goldens and
//! fixtures ([`python`]).

pub mod cache;
pub mod python;
pub mod registry;
pub mod stage;

pub use registry::{GoldenCtx, GoldenError, GoldenFn, GoldenOutputs, GoldenRegistry};
