//! Dtype names and value ranges: what `scene.toml` may call a dtype, and
//! which integers a dtype holds (the validator's checks, and the fixture
//! stage's scalar packing).

use scene_golden::DType;

/// A dtype by name: ours (`f32`, `bf16`, ...) or the torch / numpy
/// spelling of one (`float32`, `float`, `bfloat16`, `float16`, `half`,
/// `float64`, `double`, `int8` .. `int64`, `uint8`, `bool`), so a port can
/// keep the original's `dtype = "bfloat16"` params unchanged.
pub fn dtype_from_name(name: &str) -> Option<DType> {
    let ours = match name {
        "bfloat16" => "bf16",
        "float16" | "half" => "f16",
        "float32" | "float" => "f32",
        "float64" | "double" => "f64",
        "int8" => "i8",
        "int16" => "i16",
        "int32" => "i32",
        "int64" => "i64",
        "uint8" => "u8",
        other => other,
    };
    ours.parse::<DType>().ok()
}

/// The values of an integer dtype, `None` for floats (and bool, which is
/// no scalar dtype).
pub fn int_range(dtype: DType) -> Option<(i64, i64)> {
    match dtype {
        DType::I8 => Some((i8::MIN.into(), i8::MAX.into())),
        DType::U8 => Some((0, u8::MAX.into())),
        DType::I16 => Some((i16::MIN.into(), i16::MAX.into())),
        DType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
        DType::I64 => Some((i64::MIN, i64::MAX)),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Bool => None,
    }
}

/// Whether the integer `i` is exactly a value of the float dtype.
pub(crate) fn float_exact(dtype: DType, i: i64) -> bool {
    // Through i128: `i64::MAX as f64` is 2^63, which saturates back to
    // i64::MAX in i64 and would look exact.
    let back = match dtype {
        DType::F32 => (i as f32) as i128,
        _ => (i as f64) as i128,
    };
    back == i128::from(i)
}
