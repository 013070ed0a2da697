//! `device_memory`: how much device memory every case needs (issue 30).
//! A size (`"1 GiB"`), a number of bytes, or an expression of the case
//! params; resolved in every case at load, like every other number.

use super::{Checked, Validator};
use crate::scene::expr::Num;
use crate::scene::raw::RawNum;
use crate::scene::{Case, DeviceMemorySpec, NumSpec};
use crate::size::{SizeError, parse_size};

const FIELD: &str = "device_memory";

impl Validator<'_> {
    /// The scene's `device_memory`: `Some(None)` when unset, `None` when
    /// malformed (reported).
    pub(super) fn device_memory(&self, raw: Option<RawNum>) -> Option<Option<DeviceMemorySpec>> {
        let Some(raw) = raw else {
            return Some(None);
        };
        self.report(self.device_memory_spec(raw)).map(Some)
    }

    fn device_memory_spec(&self, raw: RawNum) -> Checked<DeviceMemorySpec> {
        match raw {
            RawNum::Int(n) => match u64::try_from(n) {
                Ok(bytes) if bytes > 0 => Ok(DeviceMemorySpec::Size {
                    text: n.to_string(),
                    bytes,
                }),
                _ => Err(self.err(FIELD, format!("{n} bytes: must be at least 1"))),
            },
            RawNum::Float(f) => Err(self.err(
                FIELD,
                format!(
                    "{f} is not a whole number of bytes (write a size such as \"1 GiB\", \
                     an integer, or an expression of the case params)"
                ),
            )),
            RawNum::Expr(text) => match parse_size(&text) {
                Ok(bytes) => Ok(DeviceMemorySpec::Size { text, bytes }),
                // Not `<number> <unit>`: an expression of the case params
                // (`"BIG + 64 * 1048576"`), or neither.
                Err(SizeError::NotASize(_)) => match self.num(FIELD, RawNum::Expr(text.clone())) {
                    Ok(spec @ NumSpec::Expr { .. }) => Ok(DeviceMemorySpec::Expr(spec)),
                    Ok(_) | Err(_) => Err(self.err(
                        FIELD,
                        format!(
                            "`{text}` is neither a size (a number and a unit: B, KiB, MiB, \
                             GiB (powers of 1024) or KB, MB, GB (powers of 1000), e.g. \
                             \"1 GiB\") nor an expression of the case params{}",
                            match crate::scene::expr::Expr::parse(&text) {
                                Err(e) => format!(" ({e})"),
                                Ok(_) => String::new(),
                            }
                        ),
                    )),
                },
                Err(e) => Err(self.err(FIELD, e.to_string())),
            },
        }
    }

    /// The scene's `device_memory` in case `case`: bytes, at least 1.
    pub(super) fn case_device_memory(&self, spec: &DeviceMemorySpec, case: &Case) -> Checked<u64> {
        let expr = match spec {
            DeviceMemorySpec::Size { bytes, .. } => return Ok(*bytes),
            DeviceMemorySpec::Expr(e) => e,
        };
        let prefix = format!("case `{}`: `{expr}`", case.name);
        match expr.eval(&case.values) {
            Ok(Num::Int(n)) if n > 0 => Ok(n as u64),
            Ok(Num::Int(n)) => Err(self.err(
                FIELD,
                format!("{prefix} is {n} bytes: device memory must be at least 1 byte"),
            )),
            Ok(Num::Float(f)) => Err(self.err(
                FIELD,
                format!("{prefix} is {f}, not an integer number of bytes"),
            )),
            Err(e) => Err(self.err(FIELD, format!("{prefix}: {e}"))),
        }
    }
}
