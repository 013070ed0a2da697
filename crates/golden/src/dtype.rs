//! Element types of scene tensors.

use std::fmt;
use std::str::FromStr;

/// Element type of a [`Tensor`](crate::Tensor).
///
/// All multi-byte types are stored little-endian. `Bool` is one byte per
/// element (0 = false, anything else reads as true). Serializes as its
/// [`name`](DType::name) (`"bf16"`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I8,
    U8,
    I16,
    I32,
    I64,
    Bool,
}

/// Error of [`DType::from_str`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (expected one of f32, f64, f16, bf16, i8, u8, i16, i32, i64, bool)")]
pub struct ParseDTypeError(pub String);

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::Bool,
    ];

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// True for `f32`, `f64`, `f16` and `bf16`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// The lower-case name used in scene files and reports (`"bf16"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = ParseDTypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| ParseDTypeError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>(), Ok(d));
            assert_eq!(d.to_string(), d.name());
        }
        assert_eq!(
            "F32".parse::<DType>(),
            Err(ParseDTypeError("F32".to_owned()))
        );
        assert!("float".parse::<DType>().is_err());
    }

    #[test]
    fn serde_uses_names() {
        for d in DType::ALL {
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{d}\""));
        }
        assert_eq!(
            serde_json::from_str::<DType>("\"bf16\"").unwrap(),
            DType::BF16
        );
        assert!(serde_json::from_str::<DType>("\"BF16\"").is_err());
    }

    #[test]
    fn sizes_and_kinds() {
        let sizes: Vec<usize> = DType::ALL.iter().map(|d| d.size_of()).collect();
        assert_eq!(sizes, [4, 8, 2, 2, 1, 1, 2, 4, 8, 1]);
        assert!(DType::BF16.is_float());
        assert!(!DType::U8.is_float());
        assert!(!DType::Bool.is_float());
    }
}
