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
