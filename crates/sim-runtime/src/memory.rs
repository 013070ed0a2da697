//! Device memory: one host mapping (the arena) plus a first-fit allocator
//! handing out 64-byte aligned blocks addressed by opaque device addresses.
//!
//! `unsafe` (allowed per item): the arena is a raw `mmap`, read and written
//! by pointer copies after the allocator's bounds checks.

use std::collections::BTreeMap;

use crate::error::{RtError, RtResult};

/// Device address of arena offset 0. Device addresses are deliberately not
/// host pointers, so a host pointer passed by mistake is rejected.
pub const DEVICE_BASE: u64 = 0x1000_0000_0000;
/// Alignment (and granularity) of every allocation.
pub const ALIGN: u64 = 64;

/// The host mapping backing device memory. Anonymous, private, zero-filled
/// and lazily committed (`MAP_NORESERVE`).
#[derive(Debug)]
pub struct Arena {
    base: *mut u8,
    len: usize,
}

#[allow(unsafe_code)]
// SAFETY: `Arena` owns its mapping exclusively and exposes it only through
// bounds-checked methods; sharing the base pointer between threads is sound.
unsafe impl Send for Arena {}
#[allow(unsafe_code)]
// SAFETY: see `Send` above; no method hands out references with interior aliasing.
unsafe impl Sync for Arena {}

impl Arena {
    #[allow(unsafe_code)]
    pub fn new(len: u64) -> RtResult<Arena> {
        let len =
            usize::try_from(len).map_err(|_| RtError::Oom(format!("arena of {len} bytes")))?;
        // SAFETY: anonymous private mapping with no fixed address; the kernel
        // picks the address and the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RtError::Oom(format!(
                "cannot map a {} MiB device arena: {}",
                len >> 20,
                std::io::Error::last_os_error()
            )));
        }
        Ok(Arena {
            base: p.cast(),
            len,
        })
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Host pointer of arena offset `off` (caller checked `off <= len`).
    pub fn host_ptr(&self, off: u64) -> *mut u8 {
        debug_assert!(off <= self.len as u64);
        self.base.wrapping_add(off as usize)
    }

    /// Copies `src` into the arena at `off`; the range must have been bounds-checked.
    #[allow(unsafe_code)]
    pub fn write(&self, off: u64, src: &[u8]) {
        assert!(
            off.checked_add(src.len() as u64)
                .is_some_and(|e| e <= self.len as u64)
        );
        // SAFETY: the destination range lies inside the mapping (asserted), and
        // `src` is a live slice that cannot overlap the arena (the arena is
        // never handed out as a Rust slice).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.host_ptr(off), src.len()) }
    }

    /// Copies from the arena at `off` into `dst`; the range must have been bounds-checked.
    #[allow(unsafe_code)]
    pub fn read(&self, off: u64, dst: &mut [u8]) {
        assert!(
            off.checked_add(dst.len() as u64)
                .is_some_and(|e| e <= self.len as u64)
        );
        // SAFETY: the source range lies inside the mapping (asserted); `dst` is
        // an exclusive slice outside the arena.
        unsafe { std::ptr::copy_nonoverlapping(self.host_ptr(off), dst.as_mut_ptr(), dst.len()) }
    }
}

impl Drop for Arena {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `new`; it is
        // dropped only when no thread holds the arena any more (it is shared by `Arc`).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// A live allocation: requested size (for bounds checks) and reserved size.
#[derive(Debug, Clone, Copy)]
struct Block {
    size: u64,
    reserved: u64,
}

/// First-fit allocator over arena offsets with coalescing free list.
#[derive(Debug)]
pub struct Allocator {
    len: u64,
    /// offset -> length of each free hole (coalesced).
    free: BTreeMap<u64, u64>,
    /// offset -> live block.
    live: BTreeMap<u64, Block>,
}

impl Allocator {
    pub fn new(len: u64) -> Allocator {
        let len = len / ALIGN * ALIGN;
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(0, len);
        }
        Allocator {
            len,
            free,
            live: BTreeMap::new(),
        }
    }

    /// Allocates `size` bytes (0 is allowed and reserves one granule); returns the device address.
    pub fn alloc(&mut self, size: u64) -> RtResult<u64> {
        let reserved = size.max(1).checked_next_multiple_of(ALIGN).ok_or_else(|| {
            RtError::Oom(format!(
                "allocation of {size} bytes is larger than the address space"
            ))
        })?;
        let hole = self
            .free
            .iter()
            .find(|&(_, &len)| len >= reserved)
            .map(|(&o, &l)| (o, l));
        let Some((off, len)) = hole else {
            let free_total: u64 = self.free.values().sum();
            return Err(RtError::Oom(format!(
                "device memory exhausted: cannot allocate {size} bytes ({free_total} of {} bytes free, fragmented into {} holes)",
                self.len,
                self.free.len()
            )));
        };
        self.free.remove(&off);
        if len > reserved {
            self.free.insert(off + reserved, len - reserved);
        }
        self.live.insert(off, Block { size, reserved });
        Ok(DEVICE_BASE + off)
    }

    /// Frees the allocation starting exactly at `addr`.
    pub fn free(&mut self, addr: u64) -> RtResult<()> {
        let off = addr.wrapping_sub(DEVICE_BASE);
        let Some(block) = (addr >= DEVICE_BASE)
            .then(|| self.live.remove(&off))
            .flatten()
        else {
            return Err(RtError::Invalid(format!(
                "free of {addr:#x}: not the start of a live allocation"
            )));
        };
        let (mut start, mut len) = (off, block.reserved);
        if let Some((&p, &plen)) = self.free.range(..start).next_back()
            && p + plen == start
        {
            self.free.remove(&p);
            start = p;
            len += plen;
        }
        if let Some(&nlen) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += nlen;
        }
        self.free.insert(start, len);
        Ok(())
    }

    /// Checks that `[addr, addr+size)` lies inside one live allocation and
    /// returns the arena offset of `addr`.
    pub fn check(&self, addr: u64, size: u64, what: &str) -> RtResult<u64> {
        let oob = |why: &str| {
            RtError::OutOfBounds(format!("{what}: device range [{addr:#x}, +{size}) {why}"))
        };
        if addr < DEVICE_BASE || addr - DEVICE_BASE >= self.len {
            return Err(oob(&format!(
                "is outside the device arena [{DEVICE_BASE:#x}, {:#x})",
                DEVICE_BASE + self.len
            )));
        }
        let off = addr - DEVICE_BASE;
        let end = off.checked_add(size).ok_or_else(|| oob("overflows"))?;
        match self.live.range(..=off).next_back() {
            Some((&start, b)) if off < start + b.size.max(1) => {
                if end <= start + b.size {
                    Ok(off)
                } else {
                    Err(oob(&format!(
                        "runs past the end of the allocation at {:#x} of {} bytes",
                        DEVICE_BASE + start,
                        b.size
                    )))
                }
            }
            _ => Err(oob("is not inside any live allocation")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_coalesce() {
        let mut a = Allocator::new(1024);
        let x = a.alloc(100).unwrap();
        let y = a.alloc(1).unwrap();
        let z = a.alloc(64).unwrap();
        assert_eq!(x, DEVICE_BASE);
        assert_eq!(y, DEVICE_BASE + 128);
        assert_eq!(z, DEVICE_BASE + 192);
        assert!(a.alloc(1024).is_err());
        a.free(y).unwrap();
        a.free(x).unwrap();
        assert!(a.free(x).is_err());
        assert_eq!(a.alloc(192).unwrap(), DEVICE_BASE);
        a.free(DEVICE_BASE).unwrap();
        a.free(z).unwrap();
        assert_eq!(a.alloc(1024).unwrap(), DEVICE_BASE);
    }

    #[test]
    fn bounds() {
        let mut a = Allocator::new(4096);
        let x = a.alloc(100).unwrap();
        assert_eq!(a.check(x, 100, "t").unwrap(), 0);
        assert_eq!(a.check(x + 50, 50, "t").unwrap(), 50);
        assert!(matches!(a.check(x, 101, "t"), Err(RtError::OutOfBounds(_))));
        assert!(matches!(
            a.check(x + 120, 1, "t"),
            Err(RtError::OutOfBounds(_))
        ));
        assert!(matches!(
            a.check(0x1234, 1, "t"),
            Err(RtError::OutOfBounds(_))
        ));
        assert!(matches!(
            a.check(x, u64::MAX, "t"),
            Err(RtError::OutOfBounds(_))
        ));
    }
}
