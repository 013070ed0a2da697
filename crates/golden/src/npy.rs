//! NumPy `.npy` files (format 1.0 written; 1.0, 2.0 and 3.0 read).
//!
//! Descriptors: f32 `<f4`, f64 `<f8`, f16 `<f2`, i8 `|i1`, u8 `|u1`,
//! i16 `<i2`, i32 `<i4`, i64 `<i8`, bool `|b1`. NumPy has no bfloat16, so a
//! bf16 tensor is written as its raw bits, `<u2`; reading `<u2` back needs
//! the hint [`read_npy_as`]`(path, DType::BF16)`. Data is C order
//! (`fortran_order: False`); big-endian files (`>`) are byte-swapped on read.

use std::io;
use std::path::Path;

use crate::tensor::TensorError;
use crate::{DType, Tensor};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Errors reading a `.npy` file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("npy i/o: {0}")]
    Io(#[from] io::Error),
    #[error("not an npy file (bad magic)")]
    BadMagic,
    #[error("unsupported npy format version {0}.{1}")]
    Version(u8, u8),
    #[error("malformed npy header: {0}")]
    Header(String),
    #[error("unsupported npy dtype descriptor `{0}`")]
    Descr(String),
    #[error("npy descriptor `<u2` has no scene dtype; read it with read_npy_as(.., DType::BF16)")]
    NeedsHint,
    #[error("npy descriptor `{descr}` cannot be read as {requested}")]
    HintMismatch { descr: String, requested: DType },
    #[error("fortran-order npy arrays are not supported")]
    FortranOrder,
    #[error("npy data: {0}")]
    Data(#[from] TensorError),
}

/// The little-endian descriptor written for `dtype`.
pub fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::BF16 => "<u2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
    }
}

/// Serializes `t` as an `.npy` v1.0 byte string.
pub fn to_npy_bytes(t: &Tensor) -> Vec<u8> {
    let shape = match t.shape() {
        [] => "()".to_owned(),
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(t.dtype())
    );
    // Pad with spaces so the data starts at a multiple of 64, end with \n.
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.bytes().len());
    out.extend_from_slice(MAGIC);
    let hlen = header.len();
    if let Ok(h) = u16::try_from(hlen) {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&h.to_le_bytes());
    } else {
        // Only for absurdly many dimensions: fall back to version 2.0.
        let pad = (64 - (12 + hlen) % 64) % 64;
        header.insert_str(hlen - 1, &" ".repeat(pad));
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(t.bytes());
    out
}

/// Writes `t` to `path` as `.npy` v1.0.
pub fn write_npy(path: &Path, t: &Tensor) -> io::Result<()> {
    std::fs::write(path, to_npy_bytes(t))
}

/// Reads an `.npy` file (`<u2` needs [`read_npy_as`]).
pub fn read_npy(path: &Path) -> Result<Tensor, NpyError> {
    from_npy_bytes(&std::fs::read(path)?)
}

/// Reads an `.npy` file as `dtype`: the file's descriptor must be the one
/// [`descr`] gives for `dtype` (any byte order), so `<u2` reads as BF16.
pub fn read_npy_as(path: &Path, dtype: DType) -> Result<Tensor, NpyError> {
    from_npy_bytes_as(&std::fs::read(path)?, dtype)
}

/// Parses `.npy` bytes.
pub fn from_npy_bytes(b: &[u8]) -> Result<Tensor, NpyError> {
    parse(b, None)
}

/// Parses `.npy` bytes as `dtype` (see [`read_npy_as`]).
pub fn from_npy_bytes_as(b: &[u8], dtype: DType) -> Result<Tensor, NpyError> {
    parse(b, Some(dtype))
}

fn parse(b: &[u8], hint: Option<DType>) -> Result<Tensor, NpyError> {
    if b.len() < 10 || &b[..6] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = (b[6], b[7]);
    let (hlen, start): (usize, usize) = match major {
        1 => (usize::from(u16::from_le_bytes([b[8], b[9]])), 10),
        2 | 3 => {
            let raw = b.get(8..12).ok_or(NpyError::BadMagic)?;
            (
                u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize,
                12,
            )
        }
        _ => return Err(NpyError::Version(major, minor)),
    };
    let end = start
        .checked_add(hlen)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| NpyError::Header("header runs past end of file".into()))?;
    let header = std::str::from_utf8(&b[start..end])
        .map_err(|_| NpyError::Header("header is not UTF-8".into()))?;
    let descr = quoted_value(header, "descr")?;
    if bare_value(header, "fortran_order")?.starts_with("True") {
        return Err(NpyError::FortranOrder);
    }
    let shape = parse_shape(bare_value(header, "shape")?)?;

    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'|') => ('<', &descr[1..]),
        Some(b'>') => ('>', &descr[1..]),
        Some(b'=') if cfg!(target_endian = "little") => ('<', &descr[1..]),
        _ => return Err(NpyError::Descr(descr.to_owned())),
    };
    let file_dtype = match code {
        "f4" => Some(DType::F32),
        "f8" => Some(DType::F64),
        "f2" => Some(DType::F16),
        "i1" => Some(DType::I8),
        "u1" => Some(DType::U8),
        "i2" => Some(DType::I16),
        "i4" => Some(DType::I32),
        "i8" => Some(DType::I64),
        "b1" => Some(DType::Bool),
        "u2" => None,
        _ => return Err(NpyError::Descr(descr.to_owned())),
    };
    let dtype = match (file_dtype, hint) {
        (Some(d), None) => d,
        (None, None) => return Err(NpyError::NeedsHint),
        (Some(d), Some(h)) if d == h => d,
        (None, Some(DType::BF16)) => DType::BF16,
        (_, Some(h)) => {
            return Err(NpyError::HintMismatch {
                descr: descr.to_owned(),
                requested: h,
            });
        }
    };
    let mut data = b[end..].to_vec();
    if order == '>' {
        for c in data.chunks_exact_mut(dtype.size_of()) {
            c.reverse();
        }
    }
    Ok(Tensor::from_bytes(dtype, &shape, data)?)
}

/// The text after `'key':` in a header dict.
fn bare_value<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    let (at, len) = [format!("'{key}'"), format!("\"{key}\"")]
        .iter()
        .find_map(|pat| header.find(pat.as_str()).map(|at| (at, pat.len())))
        .ok_or_else(|| NpyError::Header(format!("missing key '{key}'")))?;
    let rest = header[at + len..].trim_start();
    let rest = rest
        .strip_prefix(':')
        .ok_or_else(|| NpyError::Header(format!("no ':' after '{key}'")))?;
    Ok(rest.trim_start())
}

fn quoted_value<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    let v = bare_value(header, key)?;
    let q = v.chars().next().filter(|c| *c == '\'' || *c == '"');
    let q = q.ok_or_else(|| NpyError::Header(format!("'{key}' is not a string")))?;
    let body = &v[1..];
    let close = body
        .find(q)
        .ok_or_else(|| NpyError::Header(format!("unterminated '{key}'")))?;
    Ok(&body[..close])
}

fn parse_shape(v: &str) -> Result<Vec<usize>, NpyError> {
    let inner = v
        .strip_prefix('(')
        .and_then(|r| r.split_once(')'))
        .map(|(inner, _)| inner)
        .ok_or_else(|| NpyError::Header(format!("bad shape `{v}`")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| NpyError::Header(format!("bad dimension `{s}`")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_matches_numpy() {
        let t = Tensor::from_f32(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = to_npy_bytes(&t);
        // What numpy 1.x/2.x writes for np.arange(1, 7, dtype='<f4').reshape(2, 3).
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hlen = usize::from(u16::from_le_bytes([b[8], b[9]]));
        assert_eq!((10 + hlen) % 64, 0);
        let text = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(text.starts_with(header), "{text:?}");
        assert!(text.ends_with(" \n"));
        assert_eq!(&b[10 + hlen..], t.bytes());
    }

    #[test]
    fn round_trip_every_dtype_and_shape() {
        for d in DType::ALL {
            for shape in [&[][..], &[0][..], &[5][..], &[2, 1, 3][..]] {
                let n: usize = shape.iter().product();
                let vals: Vec<f64> = (0..n).map(|i| i as f64 - 2.0).collect();
                let t = Tensor::from_f64(d, shape, &vals).unwrap();
                let back = from_npy_bytes_as(&to_npy_bytes(&t), d).unwrap();
                assert_eq!(back, t, "{d} {shape:?}");
                if d != DType::BF16 {
                    assert_eq!(from_npy_bytes(&to_npy_bytes(&t)).unwrap(), t);
                }
            }
        }
        let s = Tensor::zeros(DType::F64, &[]);
        assert!(String::from_utf8_lossy(&to_npy_bytes(&s)).contains("'shape': ()"));
        let v = Tensor::zeros(DType::F64, &[7]);
        assert!(String::from_utf8_lossy(&to_npy_bytes(&v)).contains("'shape': (7,)"));
    }

    #[test]
    fn bf16_needs_hint() {
        let t = Tensor::from_f32(DType::BF16, &[2], &[1.0, -2.0]).unwrap();
        let b = to_npy_bytes(&t);
        assert!(matches!(from_npy_bytes(&b), Err(NpyError::NeedsHint)));
        assert!(matches!(
            from_npy_bytes_as(&b, DType::I16),
            Err(NpyError::HintMismatch { .. })
        ));
        assert_eq!(from_npy_bytes_as(&b, DType::BF16).unwrap(), t);
    }

    #[test]
    fn reads_foreign_headers() {
        // Big-endian, version 2.0, double-quoted descr, no trailing comma.
        let header = "{\"descr\": \">i2\", \"fortran_order\": False, \"shape\": (2,)}\n";
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(&[0x01, 0x02, 0xff, 0xfe]);
        let t = from_npy_bytes(&b).unwrap();
        assert_eq!(t.to_f64_vec(), [258.0, -2.0]);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            from_npy_bytes(b"hello world"),
            Err(NpyError::BadMagic)
        ));
        let t = Tensor::zeros(DType::I32, &[4]);
        let mut b = to_npy_bytes(&t);
        b.pop();
        assert!(matches!(from_npy_bytes(&b), Err(NpyError::Data(_))));
        let edit = |from: &str, to: &str| {
            let mut b = to_npy_bytes(&t);
            let at = b
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .unwrap();
            b[at..at + to.len()].copy_from_slice(to.as_bytes());
            b
        };
        assert!(matches!(
            from_npy_bytes(&edit("False", "True ")),
            Err(NpyError::FortranOrder)
        ));
        assert!(matches!(
            from_npy_bytes(&edit("<i4", "<c8")),
            Err(NpyError::Descr(_))
        ));
        assert!(matches!(
            from_npy_bytes(&edit("(4,)", "(x,)")),
            Err(NpyError::Header(_))
        ));
        let mut v = to_npy_bytes(&t);
        v[6] = 9;
        assert!(matches!(from_npy_bytes(&v), Err(NpyError::Version(9, 0))));
    }

    #[test]
    fn file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        let t = Tensor::from_f32(DType::F16, &[3], &[0.5, 1.5, -4.0]).unwrap();
        write_npy(&p, &t).unwrap();
        assert_eq!(read_npy(&p).unwrap(), t);
        assert_eq!(read_npy_as(&p, DType::F16).unwrap(), t);
        assert!(matches!(
            read_npy(&dir.path().join("missing.npy")),
            Err(NpyError::Io(_))
        ));
    }
}
