//! Device memory: one reserved host address range (the arena) plus a
//! first-fit allocator handing out 64-byte aligned blocks addressed by
//! opaque device addresses, each surrounded by guards.
//!
//! Guards are what make the simulator stricter than a card. The arena is
//! reserved `PROT_NONE`; an allocation makes only its own pages readable and
//! writable, and places its data at the *end* of those pages, so:
//!
//! ```text
//!  | guard (PROT_NONE) | canary ... | data (size bytes) | canary | guard (PROT_NONE) |
//!                      ^ page        ^ 64-aligned                ^ page
//! ```
//!
//! - a write past the end (`c[i + n]`) lands in the next guard at once (or,
//!   for sizes that are not a multiple of 64, first in < 64 canary bytes);
//! - a write before the start (`c[i - n]`) lands in the canary bytes of the
//!   first page, then in the guard before it;
//! - guards are as large as the data's pages (capped), so `c[i ± n]` for a
//!   whole buffer stays inside them and never reaches a neighbour;
//! - freed pages go back to `PROT_NONE`, so a use after free faults too.
//!
//! A guard hit is a `SIGSEGV` (the crash report names the buffer and the
//! offset: see `crash.rs`); canary damage is found after every kernel block
//! ([`Allocator::damage`]) and fails the run naming the kernel. Guards cost
//! address space only: `PROT_NONE` pages are never committed.
//!
//! `unsafe` (allowed per item): the arena is a raw `mmap`, its pages change
//! protection with `mprotect`, and it is read and written by pointer copies
//! after the allocator's bounds checks.

use std::collections::BTreeMap;

use crate::error::{RtError, RtResult};

/// Device address of arena offset 0. Device addresses are deliberately not
/// host pointers, so a host pointer passed by mistake is rejected.
pub const DEVICE_BASE: u64 = 0x1000_0000_0000;
/// Alignment (and granularity) of every allocation.
pub const ALIGN: u64 = 64;
/// Largest guard on each side of an allocation.
const MAX_GUARD: u64 = 64 << 20;
/// Address space reserved per byte of device memory: room for the guards
/// (at most one data-sized guard each side) plus slack for fragmentation.
const SPAN_FACTOR: u64 = 4;

/// The byte a canary holds at arena offset `off`: position-dependent, so a
/// kernel that copies a neighbour's bytes or fills with a constant is caught.
pub fn canary_byte(off: u64) -> u8 {
    (off.wrapping_mul(0x9E37_79B9) >> 7) as u8 ^ 0xA5
}

/// The host page size.
pub fn page_size() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// The reserved host range backing device memory. Anonymous, private,
/// `PROT_NONE` until allocated, zero-filled and lazily committed.
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
    /// Reserves `SPAN_FACTOR * budget` bytes of address space.
    #[allow(unsafe_code)]
    pub fn new(budget: u64) -> RtResult<Arena> {
        let len = budget
            .checked_mul(SPAN_FACTOR)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| RtError::Oom(format!("arena of {budget} bytes")))?;
        // SAFETY: anonymous private mapping with no fixed address; the kernel
        // picks the address and the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RtError::Oom(format!(
                "cannot reserve {} MiB of address space for the device arena: {}",
                len >> 20,
                std::io::Error::last_os_error()
            )));
        }
        Ok(Arena {
            base: p.cast(),
            len,
        })
    }

    /// Bytes of address space reserved.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Host address of arena offset 0.
    pub fn base_addr(&self) -> usize {
        self.base as usize
    }

    /// Host pointer of arena offset `off` (caller checked `off <= len`).
    pub fn host_ptr(&self, off: u64) -> *mut u8 {
        debug_assert!(off <= self.len as u64);
        self.base.wrapping_add(off as usize)
    }

    /// Makes the pages `[off, off + len)` readable and writable (page-aligned).
    #[allow(unsafe_code)]
    pub fn expose(&self, off: u64, len: u64) -> RtResult<()> {
        self.assert_range(off, len);
        // SAFETY: the range is page-aligned and inside the reserved mapping
        // (asserted); changing its protection affects no other mapping.
        let rc = unsafe {
            libc::mprotect(
                self.host_ptr(off).cast(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(RtError::Oom(format!(
                "cannot commit {len} bytes of device memory (mprotect): {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    /// Returns the pages `[off, off + len)` to `PROT_NONE` and drops their
    /// contents (they read as zero when exposed again).
    #[allow(unsafe_code)]
    pub fn hide(&self, off: u64, len: u64) {
        self.assert_range(off, len);
        let p = self.host_ptr(off).cast();
        // SAFETY: as in `expose`; no kernel can be using freed pages legally,
        // and an illegal use now faults, which is the point.
        unsafe {
            libc::madvise(p, len as usize, libc::MADV_DONTNEED);
            libc::mprotect(p, len as usize, libc::PROT_NONE);
        }
    }

    fn assert_range(&self, off: u64, len: u64) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len as u64));
    }

    /// Copies `src` into the arena at `off`; the range must have been
    /// bounds-checked against an exposed allocation.
    #[allow(unsafe_code)]
    pub fn write(&self, off: u64, src: &[u8]) {
        self.assert_range(off, src.len() as u64);
        // SAFETY: the destination range lies inside the mapping (asserted) and
        // inside exposed pages (the caller's check); `src` is a live slice
        // that cannot overlap the arena (it is never handed out as a slice).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.host_ptr(off), src.len()) }
    }

    /// Copies from the arena at `off` into `dst`; the range must have been
    /// bounds-checked against an exposed allocation.
    #[allow(unsafe_code)]
    pub fn read(&self, off: u64, dst: &mut [u8]) {
        self.assert_range(off, dst.len() as u64);
        // SAFETY: the source range lies inside the mapping (asserted) and in
        // exposed pages (the caller's check); `dst` is an exclusive slice
        // outside the arena.
        unsafe { std::ptr::copy_nonoverlapping(self.host_ptr(off), dst.as_mut_ptr(), dst.len()) }
    }

    /// Fills the canary bytes `[start, end)` of an exposed allocation.
    pub fn fill_canary(&self, start: u64, end: u64) {
        let bytes: Vec<u8> = (start..end).map(canary_byte).collect();
        self.write(start, &bytes);
    }

    /// The first offset in `[start, end)` whose canary byte changed.
    pub fn first_damaged(&self, start: u64, end: u64) -> Option<u64> {
        let mut bytes = vec![0; (end - start) as usize];
        self.read(start, &mut bytes);
        (start..end)
            .zip(bytes)
            .find(|&(off, b)| b != canary_byte(off))
            .map(|(off, _)| off)
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

/// A live allocation, in arena offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Requested size in bytes.
    pub size: u64,
    /// Where the data starts (what the device address points at).
    pub data: u64,
    /// The readable, writable pages holding the data and its canaries.
    pub pages: u64,
    pub pages_len: u64,
    /// The whole reservation: guard, pages, guard.
    pub region: u64,
    pub region_len: u64,
}

impl Block {
    #[cfg(test)]
    pub fn guard(&self) -> u64 {
        self.pages - self.region
    }

    /// Canary ranges: before the data and after it, inside the pages.
    pub fn canaries(&self) -> [(u64, u64); 2] {
        [
            (self.pages, self.data),
            (self.data + self.size, self.pages + self.pages_len),
        ]
    }
}

/// The runtime option that sizes the arena (`scene_rt_open`'s options
/// string; the harness passes `SCENE_RUNTIME_OPTIONS` through, after the
/// `arena_mb` it derives from a scene's or platform's `device_memory`).
pub const ARENA_OPTION: &str = "arena_mb";

/// `12 MiB`, `1.5 KiB`, `100 bytes`: a size for a message.
pub fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let scaled = |unit: u64, name: &str| {
        let v = n as f64 / unit as f64;
        if n.is_multiple_of(unit) {
            format!("{} {name}", n / unit)
        } else {
            format!("{v:.1} {name}")
        }
    };
    match n {
        n if n >= GIB => scaled(GIB, "GiB"),
        n if n >= MIB => scaled(MIB, "MiB"),
        n if n >= KIB => scaled(KIB, "KiB"),
        1 => "1 byte".to_string(),
        n => format!("{n} bytes"),
    }
}

/// How to give the device more memory: a size (a power of two of MiB)
/// that holds `needed` bytes and more than the current `budget`, as the
/// scene setting the harness turns into this runtime's `arena_mb` option,
/// and as the option itself.
pub fn raise_hint(budget: u64, needed: u64) -> String {
    let mib = |b: u64| b.div_ceil(1 << 20);
    let suggest = mib(needed)
        .max(mib(budget) + 1)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX);
    format!(
        "raise it with `device_memory = \"{suggest} MiB\"` in scene.toml (or a platform entry), \
         or the runtime option {ARENA_OPTION}={suggest} (SCENE_RUNTIME_OPTIONS={ARENA_OPTION}={suggest}); \
         the default is {} MiB",
        crate::options::DEFAULT_ARENA_MB
    )
}

/// Where an arena offset lies relative to the allocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Inside the data of the allocation starting at arena offset `data`,
    /// `offset` bytes from its start.
    Data { block: Block, offset: u64 },
    /// `distance` bytes before the start of an allocation's data.
    Before { block: Block, distance: u64 },
    /// `distance` bytes past the end of an allocation's data (0 = the
    /// first byte after it).
    After { block: Block, distance: u64 },
    /// In no allocation's reservation (freed or never allocated).
    Nowhere,
}

/// First-fit allocator over arena offsets with a coalescing free list.
/// Pure bookkeeping: the caller exposes, fills and hides the pages.
#[derive(Debug)]
pub struct Allocator {
    /// Address space managed (arena offsets `[0, span)`).
    span: u64,
    /// Device memory the data pages may use at once.
    budget: u64,
    in_use: u64,
    page: u64,
    /// offset -> length of each free hole (coalesced).
    free: BTreeMap<u64, u64>,
    /// region offset -> live block.
    live: BTreeMap<u64, Block>,
}

impl Allocator {
    pub fn new(span: u64, budget: u64, page: u64) -> Allocator {
        let span = span / page * page;
        let mut free = BTreeMap::new();
        if span > 0 {
            free.insert(0, span);
        }
        Allocator {
            span,
            budget,
            in_use: 0,
            page,
            free,
            live: BTreeMap::new(),
        }
    }

    /// Device memory in use (data pages of live allocations).
    #[cfg(test)]
    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// Reserves `size` bytes (0 is allowed and reserves one granule) with
    /// guards around them; returns the new block. The device address is
    /// `DEVICE_BASE + block.data`.
    pub fn alloc(&mut self, size: u64) -> RtResult<Block> {
        let too_big = || {
            RtError::Oom(format!(
                "device memory exhausted: asked {}, more than the whole {} arena; {}",
                human_bytes(size),
                human_bytes(self.budget),
                raise_hint(self.budget, size)
            ))
        };
        let data_len = size
            .max(1)
            .checked_next_multiple_of(ALIGN)
            .ok_or_else(too_big)?;
        let pages_len = data_len
            .checked_next_multiple_of(self.page)
            .ok_or_else(too_big)?;
        if pages_len > self.budget {
            return Err(too_big());
        }
        if self.in_use + pages_len > self.budget {
            return Err(RtError::Oom(format!(
                "device memory exhausted: asked {}, {} free of {} arena ({} of {} bytes in use by {} allocations); {}",
                human_bytes(size),
                human_bytes(self.budget - self.in_use),
                human_bytes(self.budget),
                self.in_use,
                self.budget,
                self.live.len(),
                raise_hint(self.budget, self.in_use + pages_len)
            )));
        }
        let guard = pages_len.clamp(self.page, MAX_GUARD.max(self.page));
        let region_len = guard + pages_len + guard;
        let hole = self
            .free
            .iter()
            .find(|&(_, &len)| len >= region_len)
            .map(|(&o, &l)| (o, l));
        let Some((region, len)) = hole else {
            return Err(RtError::Oom(format!(
                "device memory exhausted: asked {}, {} free of {} arena but the address space is fragmented into {} holes; {}",
                human_bytes(size),
                human_bytes(self.budget - self.in_use),
                human_bytes(self.budget),
                self.free.len(),
                raise_hint(self.budget, self.in_use + pages_len)
            )));
        };
        self.free.remove(&region);
        if len > region_len {
            self.free.insert(region + region_len, len - region_len);
        }
        let pages = region + guard;
        let block = Block {
            size,
            data: pages + pages_len - data_len,
            pages,
            pages_len,
            region,
            region_len,
        };
        self.live.insert(region, block);
        self.in_use += pages_len;
        Ok(block)
    }

    /// Frees the allocation whose data starts exactly at `addr`; returns it
    /// so the caller can hide its pages.
    pub fn free(&mut self, addr: u64) -> RtResult<Block> {
        let not_live = || {
            RtError::Invalid(format!(
                "free of {addr:#x}: not the start of a live allocation"
            ))
        };
        let off = addr.checked_sub(DEVICE_BASE).ok_or_else(not_live)?;
        let block = match self.containing(off) {
            Some(b) if b.data == off => b,
            _ => return Err(not_live()),
        };
        self.live.remove(&block.region);
        self.in_use -= block.pages_len;
        let (mut start, mut len) = (block.region, block.region_len);
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
        Ok(block)
    }

    /// The device address of every live allocation, lowest first (what
    /// `scene_rt_reset` frees).
    pub fn live_addrs(&self) -> Vec<u64> {
        self.live.values().map(|b| DEVICE_BASE + b.data).collect()
    }

    /// The live block whose reservation contains arena offset `off`.
    fn containing(&self, off: u64) -> Option<Block> {
        self.live
            .range(..=off)
            .next_back()
            .map(|(_, b)| *b)
            .filter(|b| off < b.region + b.region_len)
    }

    /// Where arena offset `off` lies.
    pub fn place(&self, off: u64) -> Place {
        let Some(block) = self.containing(off) else {
            return Place::Nowhere;
        };
        let end = block.data + block.size;
        if off < block.data {
            Place::Before {
                block,
                distance: block.data - off,
            }
        } else if off < end {
            Place::Data {
                block,
                offset: off - block.data,
            }
        } else {
            Place::After {
                block,
                distance: off - end,
            }
        }
    }

    /// Checks that `[addr, addr+size)` lies inside one live allocation and
    /// returns the arena offset of `addr`.
    pub fn check(&self, addr: u64, size: u64, what: &str) -> RtResult<u64> {
        let oob = |why: &str| {
            RtError::OutOfBounds(format!("{what}: device range [{addr:#x}, +{size}) {why}"))
        };
        if addr < DEVICE_BASE || addr - DEVICE_BASE >= self.span {
            return Err(oob(&format!(
                "is outside the device arena [{DEVICE_BASE:#x}, {:#x})",
                DEVICE_BASE + self.span
            )));
        }
        let off = addr - DEVICE_BASE;
        let end = off.checked_add(size).ok_or_else(|| oob("overflows"))?;
        match self.place(off) {
            Place::Data { block, .. } if end <= block.data + block.size => Ok(off),
            Place::Data { block, .. } => Err(oob(&format!(
                "runs past the end of the allocation at {:#x} of {} bytes",
                DEVICE_BASE + block.data,
                block.size
            ))),
            // A zero-sized allocation has no data byte, but its start is
            // still a valid (empty) range.
            Place::After { block, distance: 0 } if size == 0 && block.data == off => Ok(off),
            _ => Err(oob("is not inside any live allocation of the device arena")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    #[test]
    fn alloc_places_data_at_the_end_of_its_pages_between_guards() {
        let mut a = Allocator::new(1 << 20, 1 << 18, PAGE);
        let x = a.alloc(100).unwrap();
        assert_eq!(x.pages_len, PAGE);
        assert_eq!(x.guard(), PAGE);
        assert_eq!(x.data % ALIGN, 0);
        assert_eq!(
            x.data + 128,
            x.pages + PAGE,
            "data ends at its 64-byte granule"
        );
        assert_eq!(x.region_len, 3 * PAGE);
        let big = a.alloc(3 * PAGE + 1).unwrap();
        assert_eq!(big.pages_len, 4 * PAGE);
        assert_eq!(big.guard(), 4 * PAGE, "guards as large as the data");
        assert!(big.region >= x.region + x.region_len, "no overlap");
        assert_eq!(a.in_use(), 5 * PAGE);
    }

    #[test]
    fn free_coalesces_and_space_is_reused() {
        let mut a = Allocator::new(9 * PAGE, 4 * PAGE, PAGE);
        let x = a.alloc(1).unwrap();
        let y = a.alloc(64).unwrap();
        let z = a.alloc(PAGE).unwrap();
        assert!(a.alloc(1).is_err(), "address space is full");
        a.free(DEVICE_BASE + y.data).unwrap();
        a.free(DEVICE_BASE + x.data).unwrap();
        assert!(a.free(DEVICE_BASE + x.data).is_err(), "double free");
        assert!(a.free(DEVICE_BASE + z.data + 1).is_err(), "not a start");
        let w = a.alloc(2 * PAGE).unwrap();
        assert_eq!(w.region, 0, "the two coalesced holes hold a bigger block");
        a.free(DEVICE_BASE + w.data).unwrap();
        a.free(DEVICE_BASE + z.data).unwrap();
        assert_eq!(a.in_use(), 0);
        assert_eq!(a.alloc(3 * PAGE).unwrap().region, 0, "all one hole again");
    }

    #[test]
    fn budget_counts_data_pages_only() {
        let mut a = Allocator::new(1 << 24, 2 * PAGE, PAGE);
        let x = a.alloc(PAGE).unwrap();
        a.alloc(PAGE).unwrap();
        let err = a.alloc(1).unwrap_err().to_string();
        assert!(
            err.contains("exhausted") && err.contains("8192 of 8192"),
            "{err}"
        );
        assert!(
            err.contains("asked 1 byte, 0 bytes free of 8 KiB arena"),
            "{err}"
        );
        assert!(
            err.contains(
                "raise it with `device_memory = \"2 MiB\"` in scene.toml (or a platform entry), \
                 or the runtime option arena_mb=2 (SCENE_RUNTIME_OPTIONS=arena_mb=2)"
            ),
            "{err}"
        );
        a.free(DEVICE_BASE + x.data).unwrap();
        a.alloc(1).unwrap();
        assert!(
            a.alloc(3 * PAGE)
                .unwrap_err()
                .to_string()
                .contains("more than the whole")
        );
    }

    #[test]
    fn live_addrs_lists_every_live_allocation_once() {
        let mut a = Allocator::new(1 << 22, 1 << 20, PAGE);
        assert!(a.live_addrs().is_empty());
        let x = DEVICE_BASE + a.alloc(100).unwrap().data;
        let y = DEVICE_BASE + a.alloc(0).unwrap().data;
        let z = DEVICE_BASE + a.alloc(3 * PAGE).unwrap().data;
        a.free(y).unwrap();
        assert_eq!(a.live_addrs(), vec![x, z]);
        for addr in a.live_addrs() {
            a.free(addr).unwrap();
        }
        assert!(a.live_addrs().is_empty());
        assert_eq!(a.in_use(), 0);
        assert_eq!(a.alloc(1 << 20).unwrap().region, 0, "all one hole again");
    }

    #[test]
    fn sizes_and_hints_read_well() {
        assert_eq!(human_bytes(100), "100 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(3 << 30), "3 GiB");
        let hint = raise_hint(256 << 20, (256 << 20) + 1);
        assert!(hint.contains("arena_mb=512 "), "{hint}");
        let hint = raise_hint(256 << 20, 1 << 30);
        assert!(hint.contains("arena_mb=1024 "), "{hint}");
        assert!(
            hint.contains("SCENE_RUNTIME_OPTIONS=arena_mb=1024"),
            "{hint}"
        );
    }

    #[test]
    fn places_name_the_side_and_distance() {
        let mut a = Allocator::new(1 << 20, 1 << 18, PAGE);
        let x = a.alloc(256).unwrap();
        assert_eq!(
            a.place(x.data + 10),
            Place::Data {
                block: x,
                offset: 10
            }
        );
        assert_eq!(
            a.place(x.data + 256),
            Place::After {
                block: x,
                distance: 0
            }
        );
        assert_eq!(
            a.place(x.pages + PAGE + 8),
            Place::After {
                block: x,
                distance: 8
            }
        );
        assert_eq!(
            a.place(x.data - 4),
            Place::Before {
                block: x,
                distance: 4
            }
        );
        assert_eq!(
            a.place(x.region),
            Place::Before {
                block: x,
                distance: x.data - x.region
            }
        );
        assert_eq!(a.place(x.region + x.region_len), Place::Nowhere);
    }

    #[test]
    fn bounds() {
        let mut a = Allocator::new(1 << 20, 1 << 18, PAGE);
        let x = DEVICE_BASE + a.alloc(100).unwrap().data;
        assert!(a.check(x, 100, "t").is_ok());
        assert_eq!(
            a.check(x + 50, 50, "t").unwrap(),
            a.check(x, 0, "t").unwrap() + 50
        );
        assert!(matches!(a.check(x, 101, "t"), Err(RtError::OutOfBounds(_))));
        assert!(matches!(
            a.check(x + 120, 1, "t"),
            Err(RtError::OutOfBounds(_))
        ));
        assert!(matches!(
            a.check(x - 1, 1, "t"),
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
        let empty = DEVICE_BASE + a.alloc(0).unwrap().data;
        assert!(a.check(empty, 0, "t").is_ok());
        assert!(a.check(empty, 1, "t").is_err());
    }

    #[test]
    fn arena_guards_and_canaries() {
        let page = page_size();
        let arena = Arena::new(1 << 20).unwrap();
        let mut a = Allocator::new(arena.len(), 1 << 20, page);
        let b = a.alloc(100).unwrap();
        arena.expose(b.pages, b.pages_len).unwrap();
        for (s, e) in b.canaries() {
            arena.fill_canary(s, e);
        }
        arena.write(b.data, &[7; 100]);
        for (s, e) in b.canaries() {
            assert_eq!(arena.first_damaged(s, e), None);
        }
        arena.write(b.data + 100, &[0]);
        assert_eq!(
            arena.first_damaged(b.data + 100, b.pages + b.pages_len),
            Some(b.data + 100)
        );
        arena.hide(b.pages, b.pages_len);
        arena.expose(b.pages, b.pages_len).unwrap();
        let mut back = [1u8; 100];
        arena.read(b.data, &mut back);
        assert_eq!(back, [0; 100], "hidden pages come back zeroed");
    }
}
