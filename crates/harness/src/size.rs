//! Byte sizes as people write them in `scene.toml` and
//! `scene-platforms.toml` (`"1 GiB"`, `"512 MiB"`, `"786 MB"`).
//!
//! Both binary (`KiB`, `MiB`, `GiB`: powers of 1024) and decimal (`KB`,
//! `MB`, `GB`: powers of 1000) units are accepted, spelled exactly so: a
//! ported scene quoting "786 MB" from a log should mean what the log
//! meant, and `mb` vs `Mb` (megabit) is a guess we refuse to make. Below
//! every other module: the scene and the platform table both read sizes.

use std::fmt;

/// The units, longest first so `MiB` is not read as `M` + `iB`.
const UNITS: [(&str, u64); 7] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("B", 1),
];

/// Why a text is not a size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not `<number> <unit>` at all (the caller may try it as something
    /// else, e.g. an expression).
    #[error(
        "`{0}` is not a size (a number and a unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000), e.g. \"1 GiB\")"
    )]
    NotASize(String),
    #[error("`{0}` is zero bytes: device memory must be at least 1 byte")]
    Zero(String),
    #[error("`{0}` is more bytes than fit in 64 bits")]
    Overflow(String),
    /// A fraction of a byte (`"1.5 B"`, `"0.0001 KB"`).
    #[error("`{0}` is not a whole number of bytes")]
    Fraction(String),
}

/// Parses `"<number> <unit>"` (space optional; the number a decimal
/// integer or with a decimal fraction, `"1.5 GiB"`) into bytes, at least 1.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let not = || SizeError::NotASize(text.to_owned());
    let (number, unit) = UNITS
        .iter()
        .find_map(|&(name, scale)| t.strip_suffix(name).map(|n| (n.trim_end(), scale)))
        .ok_or_else(not)?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || number.ends_with('.') {
        return Err(not());
    }
    // Exact integer arithmetic: whole * unit + frac * unit / 10^len(frac).
    let overflow = || SizeError::Overflow(text.to_owned());
    let whole: u64 = whole.parse().map_err(|_| overflow())?;
    let mut bytes = whole.checked_mul(unit).ok_or_else(overflow)?;
    if !frac.is_empty() {
        let frac = frac.trim_end_matches('0');
        if frac.len() > 18 {
            return Err(SizeError::Fraction(text.to_owned()));
        }
        let den = 10u128.pow(frac.len() as u32);
        let num = u128::from(frac.parse::<u64>().unwrap_or(0)) * u128::from(unit);
        if num % den != 0 {
            return Err(SizeError::Fraction(text.to_owned()));
        }
        let extra = u64::try_from(num / den).map_err(|_| overflow())?;
        bytes = bytes.checked_add(extra).ok_or_else(overflow)?;
    }
    if bytes == 0 {
        return Err(SizeError::Zero(text.to_owned()));
    }
    Ok(bytes)
}

/// A size for messages: the largest binary unit it is a whole multiple of
/// (`1 GiB`, `786 MiB`), else bytes with the MiB it rounds up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (name, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            // KiB only below a MiB: `307208 KiB` reads worse than bytes
            // with the MiB they round up to.
            if n >= scale && n.is_multiple_of(scale) && (scale > 1 << 10 || n < 1 << 20) {
                return write!(f, "{} {name}", n / scale);
            }
        }
        if n >= 1 << 20 {
            write!(f, "{n} bytes (~{} MiB)", n.div_ceil(1 << 20))
        } else {
            write!(f, "{n} bytes")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        for (text, bytes) in [
            ("1 GiB", 1u64 << 30),
            ("512 MiB", 512 << 20),
            ("786 MB", 786_000_000),
            ("4KiB", 4096),
            ("3 KB", 3000),
            ("2 GB", 2_000_000_000),
            ("100 B", 100),
            ("  1.5 GiB ", 3 << 29),
            ("0.5 KB", 500),
            ("1.50 MiB", 3 << 19),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn refusals_say_why() {
        for text in [
            "", "GiB", "1", "1 gib", "1 Mb", "-1 MiB", "1e3 MB", "1. MiB", "x MiB",
        ] {
            assert!(
                matches!(parse_size(text), Err(SizeError::NotASize(_))),
                "{text}: {:?}",
                parse_size(text)
            );
        }
        assert!(matches!(parse_size("0 MiB"), Err(SizeError::Zero(_))));
        assert!(matches!(parse_size("0.0 B"), Err(SizeError::Zero(_))));
        assert!(matches!(parse_size("1.5 B"), Err(SizeError::Fraction(_))));
        assert!(matches!(
            parse_size("99999999999 GiB"),
            Err(SizeError::Overflow(_))
        ));
        let e = parse_size("1 gib").unwrap_err().to_string();
        assert!(e.contains("KiB, MiB, GiB (powers of 1024)"), "{e}");
    }

    #[test]
    fn display_picks_a_whole_unit() {
        assert_eq!(Bytes(1 << 30).to_string(), "1 GiB");
        assert_eq!(Bytes(300 << 20).to_string(), "300 MiB");
        assert_eq!(Bytes(100).to_string(), "100 bytes");
        assert_eq!(Bytes(8192).to_string(), "8 KiB");
        assert_eq!(
            Bytes((300 << 20) + 8192).to_string(),
            "314580992 bytes (~301 MiB)"
        );
        assert_eq!(
            Bytes((300 << 20) + 1).to_string(),
            "314572801 bytes (~301 MiB)"
        );
    }
}
