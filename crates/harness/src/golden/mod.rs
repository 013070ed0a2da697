//! Goldens: the registry of CPU reference functions ([`registry`]), the
//! stage that gives a case its fixtures and golden ([`stage`]: native or
//! Python, through the cache when it is on) and the golden tier of the
//! kernel cache ([`cache`]).

pub mod cache;
pub mod registry;
pub mod stage;

pub use registry::{GoldenCtx, GoldenError, GoldenFn, GoldenOutputs, GoldenRegistry};
