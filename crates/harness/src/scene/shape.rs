//! Symbolic tensor dimensions: `16`, `"N"`, `"H*D"`, `"ceil_div(N, 8) * 8"`,
//! expressions of the case params (see [`crate::scene::expr`]) that evaluate to a
//! positive integer.

use std::fmt;

use crate::scene::expr::{Expr, ExprError, Num, Params};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error("dimension {0} must be positive")]
    NotPositive(i64),
    #[error("{0}")]
    Expr(#[from] ExprError),
    #[error("`{expr}` evaluates to {value}, not a positive size")]
    NotPositiveValue { expr: String, value: i64 },
    #[error("`{expr}` evaluates to {value}, not a size (0 or more)")]
    NegativeValue { expr: String, value: i64 },
    #[error("`{expr}` evaluates to {value}, not an integer size")]
    NotInteger { expr: String, value: f64 },
}

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    Fixed(usize),
    /// An expression, with the text it was written as.
    Expr {
        text: String,
        expr: Expr,
    },
}

impl Dim {
    pub fn parse(text: &str) -> Result<Dim, ShapeError> {
        Ok(Dim::Expr {
            text: text.to_string(),
            expr: Expr::parse(text)?,
        })
    }

    pub fn eval(&self, params: &Params) -> Result<usize, ShapeError> {
        self.eval_at_least(params, 1)
    }

    /// [`Dim::eval`] of a count that may be 0 (the communication window of
    /// a rank group that does not communicate).
    pub fn eval_count(&self, params: &Params) -> Result<usize, ShapeError> {
        self.eval_at_least(params, 0)
    }

    fn eval_at_least(&self, params: &Params, least: i64) -> Result<usize, ShapeError> {
        match self {
            Dim::Fixed(n) => Ok(*n),
            Dim::Expr { text, expr } => match expr.eval(params)? {
                Num::Int(v) if v >= least => usize::try_from(v)
                    .map_err(|_| ShapeError::Expr(ExprError::Overflow(text.clone()))),
                Num::Int(value) if least == 0 => Err(ShapeError::NegativeValue {
                    expr: text.clone(),
                    value,
                }),
                Num::Int(value) => Err(ShapeError::NotPositiveValue {
                    expr: text.clone(),
                    value,
                }),
                Num::Float(value) => Err(ShapeError::NotInteger {
                    expr: text.clone(),
                    value,
                }),
            },
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Expr { text, .. } => f.write_str(text),
        }
    }
}

/// Evaluates a whole shape.
pub fn eval_shape(dims: &[Dim], params: &Params) -> Result<Vec<usize>, ShapeError> {
    dims.iter().map(|d| d.eval(params)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::expr::Value;

    fn params(pairs: &[(&str, i64)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect()
    }

    #[test]
    fn evaluates_products_and_sums() {
        let p = params(&[("H", 4), ("D", 8), ("N", 3)]);
        assert_eq!(Dim::parse("H*D").unwrap().eval(&p).unwrap(), 32);
        assert_eq!(Dim::parse("N + 1").unwrap().eval(&p).unwrap(), 4);
        assert_eq!(Dim::parse("2*N+H*D").unwrap().eval(&p).unwrap(), 38);
        assert_eq!(
            Dim::parse("ceil_div(D, N) * N").unwrap().eval(&p).unwrap(),
            9
        );
        assert_eq!(Dim::parse("(N)").unwrap().eval(&p).unwrap(), 3);
    }

    #[test]
    fn errors() {
        let p = params(&[("N", 0)]);
        assert!(matches!(
            Dim::parse("M").unwrap().eval(&p),
            Err(ShapeError::Expr(ExprError::UnknownParam { .. }))
        ));
        assert!(matches!(
            Dim::parse("N").unwrap().eval(&p),
            Err(ShapeError::NotPositiveValue { .. })
        ));
        assert!(matches!(
            Dim::parse("N - 3").unwrap().eval(&p),
            Err(ShapeError::NotPositiveValue { value: -3, .. })
        ));
        assert!(matches!(
            Dim::parse("1.5 * 2").unwrap().eval(&p),
            Err(ShapeError::NotInteger { .. })
        ));
        assert!(Dim::parse("N**2").is_err());
        assert!(Dim::parse("").is_err());
    }
}
