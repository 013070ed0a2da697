//! The `chip_tensor` argument convention (`SCENE_KERNEL_ARGS_CHIP_TENSOR`,
//! issue 29): the original project's kernels are `extern "C" void
//! kernel_entry(int64_t *args)`, where, per task argument in order, a
//! tensor is the address of a 128-byte tensor record and a scalar is its
//! 64-bit value.
//!
//! [`ChipTensorRecord`] is our own definition of the record, following the
//! layout the original publishes (hw-native-sys/simpler,
//! `src/common/task_interface/tensor.h`, `struct alignas(64) ChipTensor`,
//! whose `static_assert`s fix the size and offsets checked below).
//!
//! The array has a fixed *context tail* (issue 39): word
//! [`CHIP_LOCAL_CONTEXT_INDEX`] (48) points at the block's
//! [`ChipLocalContext`] (block index, block count, an async-completion
//! context) and word [`CHIP_GLOBAL_CONTEXT_INDEX`] (49) at the core's
//! [`ChipGlobalContext`] (the AIV lane within a mixed cluster), where the
//! original's scheduler puts them (its `intrinsic.h`: 32 tensor + 16
//! scalar words, then the two pointers) and where its `get_block_idx(args)`,
//! `get_block_num(args)` and `get_sub_block_id(args)` read them. Two thirds
//! of the original's kernels read them; an empty tail is a null read.

use crate::error::{RtError, RtResult};
use scene_abi::*;

/// Dimensions a record describes (`MAX_TENSOR_DIMS` of the original).
pub const CHIP_MAX_DIMS: usize = 5;

/// `PTO2TaskId::invalid()` of the original (`UINT64_MAX`): a tensor no task
/// of the original's runtime created.
pub const CHIP_INVALID_TASK_ID: u64 = u64::MAX;

/// `AddressSpace::HOST` (the default) of the original.
pub const CHIP_ADDRESS_SPACE_HOST: u8 = 0;

/// The original's `DataType` values (a `uint8_t` enum, in declaration order).
pub mod chip_dtype {
    pub const FLOAT32: u8 = 0;
    pub const FLOAT16: u8 = 1;
    pub const INT32: u8 = 2;
    pub const INT16: u8 = 3;
    pub const INT8: u8 = 4;
    pub const UINT8: u8 = 5;
    pub const BFLOAT16: u8 = 6;
    pub const INT64: u8 = 7;
    pub const BOOL: u8 = 11;
}

/// Argument words before the context tail (the original's 32 tensor and
/// 16 scalar words): a `chip_tensor` task has at most this many arguments.
pub const CHIP_MAX_ARG_WORDS: usize = 48;
/// The word pointing at the block's [`ChipLocalContext`].
pub const CHIP_LOCAL_CONTEXT_INDEX: usize = 48;
/// The word pointing at the core's [`ChipGlobalContext`].
pub const CHIP_GLOBAL_CONTEXT_INDEX: usize = 49;
/// Words of the array a `chip_tensor` block receives.
pub const CHIP_ARRAY_WORDS: usize = 50;

/// The async-completion context inside [`ChipLocalContext`] (the
/// original's `AsyncCtx`: three completion pointers, a capacity, the task
/// token). The simulator has no deferred completions: the pointers are
/// null, the capacity 0 and the token invalid, which is how the original
/// says "no completion buffer" (`AsyncCtx::make` with a null buffer).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipAsyncCtx {
    pub completion_count: *mut u32,
    pub completion_error_code: *mut i32,
    pub completion_entries: *mut u8,
    pub completion_capacity: u32,
    /// `PTO2TaskId` (`raw`, 8 bytes).
    pub task_token: u64,
}

/// The per-block context word 48 points at (the original's
/// `LocalContext`; a5 names the fields `s_block_idx` / `s_block_num`,
/// same layout).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipLocalContext {
    pub block_idx: i32,
    pub block_num: i32,
    pub async_ctx: ChipAsyncCtx,
}

/// `DMA_WORKSPACE_KIND_COUNT` of the original.
pub const CHIP_DMA_WORKSPACE_KINDS: usize = 2;

/// The per-core context word 49 points at (the original's
/// `GlobalContext`: the AIV lane, then async-DMA workspace addresses,
/// which the simulator does not provide: zeros, "unavailable"). The
/// `host_build_graph` runtime's context is the first field alone; this
/// layout is a prefix-compatible superset.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipGlobalContext {
    pub sub_block_id: i32,
    pub dma_workspace: [u64; CHIP_DMA_WORKSPACE_KINDS],
}

// The original's layouts, as a 64-bit C++ compiler lays out its structs.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(ChipAsyncCtx, completion_capacity) == 24);
    assert!(offset_of!(ChipAsyncCtx, task_token) == 32);
    assert!(size_of::<ChipAsyncCtx>() == 40);
    assert!(offset_of!(ChipLocalContext, block_num) == 4);
    assert!(offset_of!(ChipLocalContext, async_ctx) == 8);
    assert!(size_of::<ChipLocalContext>() == 48);
    assert!(offset_of!(ChipGlobalContext, dma_workspace) == 8);
    assert!(size_of::<ChipGlobalContext>() == 24);
    assert!(CHIP_ARRAY_WORDS == CHIP_GLOBAL_CONTEXT_INDEX + 1);
    assert!(CHIP_MAX_ARG_WORDS == CHIP_LOCAL_CONTEXT_INDEX);
};

/// Where one block runs: what its context tail says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipBlock {
    pub block_idx: u32,
    pub block_num: u32,
    /// The AIV lane within a mixed cluster (0 or 1); 0 for every other
    /// kernel (the original leaves it meaningless there).
    pub sub_block_id: u32,
}

impl ChipBlock {
    /// The block's two contexts, as they are passed (by address) in the
    /// tail words.
    pub fn contexts(self) -> (ChipLocalContext, ChipGlobalContext) {
        let local = ChipLocalContext {
            block_idx: i32::try_from(self.block_idx).unwrap_or(i32::MAX),
            block_num: i32::try_from(self.block_num).unwrap_or(i32::MAX),
            async_ctx: ChipAsyncCtx {
                completion_count: std::ptr::null_mut(),
                completion_error_code: std::ptr::null_mut(),
                completion_entries: std::ptr::null_mut(),
                completion_capacity: 0,
                task_token: CHIP_INVALID_TASK_ID,
            },
        };
        let global = ChipGlobalContext {
            sub_block_id: i32::try_from(self.sub_block_id).unwrap_or(0),
            dma_workspace: [0; CHIP_DMA_WORKSPACE_KINDS],
        };
        (local, global)
    }
}

/// One tensor record of the `chip_tensor` convention (128 bytes, 64-aligned).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipTensorRecord {
    /// `buffer.addr`: host address of the buffer (here: the view's origin).
    pub buffer_addr: u64,
    /// `buffer.size`: bytes of the buffer.
    pub buffer_size: u64,
    /// `owner_task_id` (`PTO2TaskId`, 8 bytes).
    pub owner_task_id: u64,
    /// `start_offset`: element offset of the view origin from `buffer_addr`.
    pub start_offset: u64,
    pub version: i32,
    pub ndims: u32,
    /// `DataType` (one byte).
    pub dtype: u8,
    pub manual_dep: u8,
    pub is_contiguous: u8,
    /// `AddressSpace` (one byte).
    pub address_space: u8,
    pub shapes: [u32; CHIP_MAX_DIMS],
    pub extent_elem_cache: u64,
    pub strides: [u32; CHIP_MAX_DIMS],
    pub _pad: [u8; 36],
}

// The original's layout (its static_asserts: sizeof 128, owner_task_id 16,
// start_offset 24, version 32, ndims 36, dtype 40, manual_dep 41,
// is_contiguous 42, address_space 43, shapes 44, extent_elem_cache 64,
// strides 72; buffer = {u64 addr, u64 size} first; alignas(64)).
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<ChipTensorRecord>() == 128);
    assert!(align_of::<ChipTensorRecord>() == 64);
    assert!(offset_of!(ChipTensorRecord, buffer_addr) == 0);
    assert!(offset_of!(ChipTensorRecord, buffer_size) == 8);
    assert!(offset_of!(ChipTensorRecord, owner_task_id) == 16);
    assert!(offset_of!(ChipTensorRecord, start_offset) == 24);
    assert!(offset_of!(ChipTensorRecord, version) == 32);
    assert!(offset_of!(ChipTensorRecord, ndims) == 36);
    assert!(offset_of!(ChipTensorRecord, dtype) == 40);
    assert!(offset_of!(ChipTensorRecord, manual_dep) == 41);
    assert!(offset_of!(ChipTensorRecord, is_contiguous) == 42);
    assert!(offset_of!(ChipTensorRecord, address_space) == 43);
    assert!(offset_of!(ChipTensorRecord, shapes) == 44);
    assert!(offset_of!(ChipTensorRecord, extent_elem_cache) == 64);
    assert!(offset_of!(ChipTensorRecord, strides) == 72);
    assert!(offset_of!(ChipTensorRecord, _pad) == 92);
};

/// The original's `DataType` of a `SCENE_DTYPE_*`, if it has one (bytes
/// become `UINT8`; f64 has no `DataType`).
pub fn chip_dtype_of(dtype: u32) -> Option<u8> {
    Some(match dtype {
        SCENE_DTYPE_F32 => chip_dtype::FLOAT32,
        SCENE_DTYPE_F16 => chip_dtype::FLOAT16,
        SCENE_DTYPE_BF16 => chip_dtype::BFLOAT16,
        SCENE_DTYPE_I8 => chip_dtype::INT8,
        SCENE_DTYPE_U8 | SCENE_DTYPE_BYTES => chip_dtype::UINT8,
        SCENE_DTYPE_I16 => chip_dtype::INT16,
        SCENE_DTYPE_I32 => chip_dtype::INT32,
        SCENE_DTYPE_I64 => chip_dtype::INT64,
        SCENE_DTYPE_BOOL => chip_dtype::BOOL,
        _ => return None,
    })
}

impl ChipTensorRecord {
    /// The record of a tensor argument whose view `d` starts at host
    /// address `addr` (what the simulator hands a kernel: the view's
    /// origin, offset already applied) and spans `bytes` bytes. `what`
    /// names the argument in errors: a dtype without a `DataType`, more
    /// than 5 dimensions, a shape or stride beyond `u32`, or a stride 0 in
    /// a dimension of more than one element cannot be described.
    pub fn of_view(d: &SceneTensorDesc, addr: u64, bytes: u64, what: &str) -> RtResult<Self> {
        let refuse = |why: String| {
            RtError::Invalid(format!(
                "{what}: a chip_tensor kernel's tensor record cannot describe {why}"
            ))
        };
        let dtype = chip_dtype_of(d.dtype).ok_or_else(|| {
            refuse(format!(
                "dtype {} (the original's DataType has no such type)",
                d.dtype
            ))
        })?;
        let rank = d.rank as usize;
        if rank > CHIP_MAX_DIMS {
            return Err(refuse(format!(
                "{rank} dimensions (at most {CHIP_MAX_DIMS})"
            )));
        }
        let mut rec = ChipTensorRecord {
            buffer_addr: addr,
            buffer_size: bytes,
            owner_task_id: CHIP_INVALID_TASK_ID,
            start_offset: 0,
            version: 0,
            ndims: 1,
            dtype,
            manual_dep: 0,
            is_contiguous: 1,
            address_space: CHIP_ADDRESS_SPACE_HOST,
            shapes: [0; CHIP_MAX_DIMS],
            extent_elem_cache: 1,
            strides: [0; CHIP_MAX_DIMS],
            _pad: [0; 36],
        };
        if rank == 0 {
            // A scalar view: the original's views have at least one dimension.
            rec.shapes[0] = 1;
            rec.strides[0] = 1;
            return Ok(rec);
        }
        rec.ndims = rank as u32;
        let empty = d.shape[..rank].contains(&0);
        for i in 0..rank {
            let shape = u32::try_from(d.shape[i])
                .map_err(|_| refuse(format!("shape {} in dimension {i}", d.shape[i])))?;
            let stride = match d.strides[i] {
                // The original's strides are > 0; a one-element dimension
                // never uses its stride.
                0 if d.shape[i] <= 1 => 1,
                0 => return Err(refuse(format!("stride 0 in dimension {i}"))),
                s => {
                    u32::try_from(s).map_err(|_| refuse(format!("stride {s} in dimension {i}")))?
                }
            };
            rec.shapes[i] = shape;
            rec.strides[i] = stride;
        }
        // PyTorch-style contiguity (the original's `is_contiguous`): each
        // stride is the product of the shapes after it (ignoring
        // one-element dimensions, whose stride is never used).
        let mut row_major = 1u64;
        let mut contiguous = true;
        for i in (0..rank).rev() {
            let shape = u64::from(rec.shapes[i]);
            if shape != 1 && u64::from(rec.strides[i]) != row_major {
                contiguous = false;
            }
            row_major = row_major.saturating_mul(shape);
        }
        // extent_elem = 1 + sum((shape - 1) * stride); an empty view: 0.
        rec.extent_elem_cache = if empty {
            0
        } else {
            (0..rank).fold(1u64, |e, i| {
                e.saturating_add(
                    u64::from(rec.shapes[i] - 1).saturating_mul(u64::from(rec.strides[i])),
                )
            })
        };
        rec.is_contiguous = u8::from(empty || contiguous);
        Ok(rec)
    }
}

/// A task's `chip_tensor` arguments: its records (stable addresses for the
/// task's lifetime) and the `int64_t` array whose tensor words point at
/// them. Built once per task; every block gets a copy of `words`.
#[derive(Debug)]
pub struct ChipArgs {
    /// Kept alive for the words that point into it.
    _records: Box<[ChipTensorRecord]>,
    words: Box<[i64]>,
}

impl ChipArgs {
    /// The arguments of one task: per argument `Ok(record)` for a tensor,
    /// `Err(bits)` for a scalar.
    pub fn new(args: Vec<Result<ChipTensorRecord, u64>>) -> ChipArgs {
        let records: Box<[ChipTensorRecord]> = args
            .iter()
            .filter_map(|a| a.as_ref().ok().copied())
            .collect();
        let mut next = records.iter();
        let words = args
            .iter()
            .map(|a| match a {
                Ok(_) => next
                    .next()
                    .map_or(0, |r| std::ptr::from_ref(r) as usize as i64),
                Err(bits) => *bits as i64,
            })
            .collect();
        ChipArgs {
            _records: records,
            words,
        }
    }

    /// The argument words (tensor words are the records' addresses).
    pub fn words(&self) -> &[i64] {
        &self.words
    }

    /// The tensor records, in argument order.
    #[cfg(test)]
    pub fn records(&self) -> &[ChipTensorRecord] {
        &self._records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(dtype: u32, offset: u64, shape: &[u64], strides: &[u64]) -> SceneTensorDesc {
        let mut d = SceneTensorDesc {
            dtype,
            rank: shape.len() as u32,
            offset,
            ..Default::default()
        };
        d.shape[..shape.len()].copy_from_slice(shape);
        d.strides[..strides.len()].copy_from_slice(strides);
        d
    }

    #[test]
    fn a_plain_byte_buffer_is_one_contiguous_uint8_dimension() {
        let d = SceneTensorDesc::contiguous(SCENE_DTYPE_BYTES, &[400]);
        let r = ChipTensorRecord::of_view(&d, 0x1000, 400, "arg").unwrap();
        assert_eq!(
            (r.buffer_addr, r.buffer_size, r.start_offset),
            (0x1000, 400, 0)
        );
        assert_eq!(
            (r.ndims, r.dtype, r.is_contiguous),
            (1, chip_dtype::UINT8, 1)
        );
        assert_eq!(
            (r.shapes[0], r.strides[0], r.extent_elem_cache),
            (400, 1, 400)
        );
        assert_eq!(r.owner_task_id, u64::MAX);
        assert_eq!((r.version, r.manual_dep, r.address_space), (0, 0, 0));
    }

    #[test]
    fn a_strided_view_keeps_shape_and_strides() {
        // Columns 2..5 of rows 1..4 of a 6x8 f32 matrix.
        let d = desc(SCENE_DTYPE_F32, 8 + 2, &[3, 3], &[8, 1]);
        let r = ChipTensorRecord::of_view(&d, 0x2000, 4 * (2 * 8 + 3), "arg").unwrap();
        assert_eq!(
            (r.ndims, r.dtype, r.is_contiguous),
            (2, chip_dtype::FLOAT32, 0)
        );
        assert_eq!(
            (&r.shapes[..2], &r.strides[..2]),
            (&[3, 3][..], &[8, 1][..])
        );
        assert_eq!(r.extent_elem_cache, 1 + 2 * 8 + 2);
        let c = desc(SCENE_DTYPE_I32, 0, &[2, 1, 4], &[4, 0, 1]);
        let r = ChipTensorRecord::of_view(&c, 0x2000, 32, "arg").unwrap();
        assert_eq!(
            (r.is_contiguous, r.strides[1], r.extent_elem_cache),
            (1, 1, 8)
        );
    }

    #[test]
    fn what_a_record_cannot_say_is_refused() {
        for (d, want) in [
            (desc(SCENE_DTYPE_F64, 0, &[4], &[1]), "dtype 1"),
            (desc(SCENE_DTYPE_F32, 0, &[1; 6], &[1; 6]), "6 dimensions"),
            (
                desc(SCENE_DTYPE_F32, 0, &[1 << 33], &[1]),
                "shape 8589934592",
            ),
            (desc(SCENE_DTYPE_F32, 0, &[4, 2], &[0, 1]), "stride 0"),
        ] {
            let e = ChipTensorRecord::of_view(&d, 0, 0, "task func_id 1 argument 0").unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("argument 0") && msg.contains(want), "{msg}");
        }
    }

    #[test]
    fn tensor_words_point_at_records_and_scalars_are_values() {
        let d = SceneTensorDesc::contiguous(SCENE_DTYPE_F32, &[4]);
        let r = ChipTensorRecord::of_view(&d, 0x40, 16, "a").unwrap();
        let c = ChipArgs::new(vec![Ok(r), Err(7), Ok(r), Err(u64::MAX)]);
        let w = c.words();
        assert_eq!(w[0], std::ptr::from_ref(&c.records()[0]) as usize as i64);
        assert_eq!(w[2], std::ptr::from_ref(&c.records()[1]) as usize as i64);
        assert_eq!((w[1], w[3]), (7, -1));
        assert_eq!(w[0] % 64, 0);
    }
}
