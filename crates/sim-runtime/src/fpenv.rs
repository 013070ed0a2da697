//! The floating-point environment user code runs in: always the default.
//!
//! Rounding mode, flush-to-zero / denormals-are-zero and the exception
//! masks are per-thread CPU state (x86-64: MXCSR and the x87 control
//! word; arm64: FPCR). A kernel that changes them (`fesetround`,
//! `_mm_setcsr`, `__builtin_ia32_ldmxcsr`) would otherwise leave them set
//! on the long-lived emulated core thread it ran on, and every later
//! kernel on that thread, of any later case and scene, would compute
//! under them: an `exact` comparison failing only after some other scene
//! ran. So the runtime puts the default environment back before every
//! kernel block and when an orchestration thread starts, and around
//! loading user libraries (whose constructors run on the caller's thread)
//! it restores the caller's own.
//!
//! The state is set with the instructions themselves, not `fesetenv`:
//! glibc's `FE_DFL_ENV` leaves FTZ/DAZ alone on some versions, and
//! `fenv_t`'s layout is the C library's business.
//!
//! Other architectures (none is a supported host today) get no-ops.

/// A thread's floating-point control state, as saved by [`FpEnv::save`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpEnv {
    #[cfg(target_arch = "x86_64")]
    mxcsr: u32,
    #[cfg(target_arch = "x86_64")]
    x87_cw: u16,
    #[cfg(target_arch = "aarch64")]
    fpcr: u64,
}

impl FpEnv {
    /// The environment a new process starts with: round to nearest, no
    /// flush-to-zero or denormals-are-zero, every exception masked (x86-64
    /// MXCSR `0x1f80`, x87 control word `0x037f`; arm64 FPCR 0).
    pub const DEFAULT: FpEnv = FpEnv {
        #[cfg(target_arch = "x86_64")]
        mxcsr: 0x1f80,
        #[cfg(target_arch = "x86_64")]
        x87_cw: 0x037f,
        #[cfg(target_arch = "aarch64")]
        fpcr: 0,
    };

    /// The calling thread's current environment (control bits only; the
    /// sticky exception flags are not part of it).
    #[allow(unsafe_code)]
    pub fn save() -> FpEnv {
        #[cfg(target_arch = "x86_64")]
        {
            let mut mxcsr: u32 = 0;
            let mut x87_cw: u16 = 0;
            // SAFETY: `stmxcsr` / `fnstcw` store 4 and 2 bytes into the
            // locals they are given and touch nothing else.
            unsafe {
                std::arch::asm!("stmxcsr [{}]", in(reg) &raw mut mxcsr, options(nostack, preserves_flags));
                std::arch::asm!("fnstcw [{}]", in(reg) &raw mut x87_cw, options(nostack, preserves_flags));
            }
            // The exception flags (bits 0..6) are status, not control.
            FpEnv {
                mxcsr: mxcsr & !0x3f,
                x87_cw,
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            let fpcr: u64;
            // SAFETY: reading FPCR has no side effects.
            unsafe {
                std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
            }
            FpEnv { fpcr }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            FpEnv {}
        }
    }

    /// Makes this the calling thread's environment, with the exception
    /// flags cleared.
    #[allow(unsafe_code)]
    pub fn restore(self) {
        #[cfg(target_arch = "x86_64")]
        {
            let mxcsr = self.mxcsr & !0x3f;
            let x87_cw = self.x87_cw;
            // SAFETY: `ldmxcsr` / `fldcw` load control state from the
            // locals; reserved MXCSR bits are never set (the value came from
            // `stmxcsr` or is the documented default), so no #GP. `fnclex`
            // clears the x87 exception flags so a pending one cannot fire
            // at the next x87 instruction.
            unsafe {
                std::arch::asm!("ldmxcsr [{}]", in(reg) &raw const mxcsr, options(nostack, readonly, preserves_flags));
                std::arch::asm!("fnclex", options(nomem, nostack, preserves_flags));
                std::arch::asm!("fldcw [{}]", in(reg) &raw const x87_cw, options(nostack, readonly, preserves_flags));
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            // SAFETY: writing FPCR / FPSR changes only this thread's
            // floating-point control and status.
            unsafe {
                std::arch::asm!("msr fpcr, {}", in(reg) self.fpcr, options(nomem, nostack, preserves_flags));
                std::arch::asm!("msr fpsr, xzr", options(nomem, nostack, preserves_flags));
            }
        }
    }

    /// The default environment, on the calling thread: before every kernel
    /// block and at the start of an orchestration.
    pub fn reset() {
        FpEnv::DEFAULT.restore();
    }

    /// Runs `f` (which runs user code on this thread: a library's
    /// constructors) and puts this thread's environment back afterwards.
    pub fn preserved<T>(f: impl FnOnce() -> T) -> T {
        let saved = FpEnv::save();
        let out = f();
        saved.restore();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changed state is seen by `save` and undone by `reset`.
    #[test]
    fn reset_undoes_a_rounding_mode_and_flush_to_zero() {
        std::thread::spawn(|| {
            assert_eq!(
                FpEnv::save(),
                FpEnv::DEFAULT,
                "a new thread starts at the default"
            );
            #[cfg(target_arch = "x86_64")]
            let odd = FpEnv {
                // Round up (bits 13-14 = 10), FTZ (15) and DAZ (6).
                mxcsr: 0x1f80 | (2 << 13) | (1 << 15) | (1 << 6),
                x87_cw: 0x037f | (2 << 10),
            };
            #[cfg(target_arch = "aarch64")]
            let odd = FpEnv {
                // Round towards plus infinity (RMode 01) and FZ.
                fpcr: (1 << 22) | (1 << 24),
            };
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            {
                odd.restore();
                assert_eq!(FpEnv::save(), odd);
                // Rounding up: 1 + 2^-60 is not 1 any more.
                let tiny = std::hint::black_box(2f64.powi(-60));
                assert!(std::hint::black_box(1.0f64) + tiny > 1.0);
                FpEnv::reset();
                assert_eq!(FpEnv::save(), FpEnv::DEFAULT);
                assert_eq!(std::hint::black_box(1.0f64) + tiny, 1.0);
                // `preserved` puts back what the closure changed.
                let inside = FpEnv::preserved(|| {
                    odd.restore();
                    FpEnv::save()
                });
                assert_eq!(inside, odd);
                assert_eq!(FpEnv::save(), FpEnv::DEFAULT);
            }
        })
        .join()
        .expect("the test thread");
    }
}
