//! Thread caps for goldens.

use rayon::{ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};

/// Default cap: the available parallelism, at most 8.
pub fn default_thread_cap() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
}

/// A rayon pool of `threads` threads (`0` = [`default_thread_cap`]), named
/// `golden-N`.
pub fn try_golden_pool(threads: usize) -> Result<ThreadPool, ThreadPoolBuildError> {
    let threads = if threads == 0 {
        default_thread_cap()
    } else {
        threads
    };
    ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("golden-{i}"))
        .build()
}

/// Like [`try_golden_pool`].
///
/// # Panics
/// If the OS refuses to spawn the threads.
pub fn golden_pool(threads: usize) -> ThreadPool {
    match try_golden_pool(threads) {
        Ok(p) => p,
        Err(e) => panic!("cannot build golden thread pool: {e}"),
    }
}

/// Runs `f` with every rayon operation inside it (reference ops and
/// [`assert_close`](crate::assert_close)) limited to `threads` threads
/// (`0` = default cap). Builds a fresh pool per call; keep a
/// [`golden_pool`] around for hot loops.
pub fn with_thread_cap<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    golden_pool(threads).install(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_threads() {
        assert_eq!(with_thread_cap(1, rayon::current_num_threads), 1);
        assert_eq!(with_thread_cap(3, rayon::current_num_threads), 3);
        let d = with_thread_cap(0, rayon::current_num_threads);
        assert_eq!(d, default_thread_cap());
        assert!((1..=8).contains(&d));
    }
}
