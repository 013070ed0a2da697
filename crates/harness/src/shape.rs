//! Symbolic tensor dimensions: `16`, `"N"`, `"H*D"`, `"N+1"` bound by case params.
//!
//! Deliberately tiny: products and sums of integers and parameter names, no
//! parentheses. Enough for shapes like `["B", "H*D"]` without an expression
//! language to learn.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("dimension {0} must be positive")]
    NotPositive(i64),
    #[error("`{0}` is not a dimension expression (use integers, parameter names, `*` and `+`)")]
    Syntax(String),
    #[error("`{0}` is not bound by the case params")]
    Unbound(String),
    #[error("`{expr}` evaluates to {value}, not a positive size")]
    NotPositiveValue { expr: String, value: i64 },
    #[error("`{0}` overflows")]
    Overflow(String),
}

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    /// Sum of products of terms.
    Expr {
        text: String,
        sum: Vec<Vec<Term>>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    Int(i64),
    Param(String),
}

impl Dim {
    pub fn parse(text: &str) -> Result<Dim, ShapeError> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.is_empty() {
            return Err(ShapeError::Syntax(text.to_string()));
        }
        let mut sum = Vec::new();
        for product in compact.split('+') {
            let mut terms = Vec::new();
            for term in product.split('*') {
                if term.is_empty() {
                    return Err(ShapeError::Syntax(text.to_string()));
                }
                if let Ok(n) = term.parse::<i64>() {
                    terms.push(Term::Int(n));
                } else if term
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && term.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    terms.push(Term::Param(term.to_string()));
                } else {
                    return Err(ShapeError::Syntax(text.to_string()));
                }
            }
            sum.push(terms);
        }
        Ok(Dim::Expr {
            text: text.to_string(),
            sum,
        })
    }

    pub fn eval(&self, params: &BTreeMap<String, i64>) -> Result<usize, ShapeError> {
        match self {
            Dim::Fixed(n) => Ok(*n),
            Dim::Expr { text, sum } => {
                let overflow = || ShapeError::Overflow(text.clone());
                let mut total: i64 = 0;
                for product in sum {
                    let mut p: i64 = 1;
                    for t in product {
                        let v = match t {
                            Term::Int(n) => *n,
                            Term::Param(name) => *params
                                .get(name)
                                .ok_or_else(|| ShapeError::Unbound(name.clone()))?,
                        };
                        p = p.checked_mul(v).ok_or_else(overflow)?;
                    }
                    total = total.checked_add(p).ok_or_else(overflow)?;
                }
                if total <= 0 {
                    return Err(ShapeError::NotPositiveValue {
                        expr: text.clone(),
                        value: total,
                    });
                }
                usize::try_from(total).map_err(|_| overflow())
            }
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
pub fn eval_shape(dims: &[Dim], params: &BTreeMap<String, i64>) -> Result<Vec<usize>, ShapeError> {
    dims.iter().map(|d| d.eval(params)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn evaluates_products_and_sums() {
        let p = params(&[("H", 4), ("D", 8), ("N", 3)]);
        assert_eq!(Dim::parse("H*D").unwrap().eval(&p).unwrap(), 32);
        assert_eq!(Dim::parse("N + 1").unwrap().eval(&p).unwrap(), 4);
        assert_eq!(Dim::parse("2*N+H*D").unwrap().eval(&p).unwrap(), 38);
    }

    #[test]
    fn errors() {
        let p = params(&[("N", 0)]);
        assert_eq!(
            Dim::parse("M").unwrap().eval(&p),
            Err(ShapeError::Unbound("M".into()))
        );
        assert!(matches!(
            Dim::parse("N").unwrap().eval(&p),
            Err(ShapeError::NotPositiveValue { .. })
        ));
        assert!(Dim::parse("N**2").is_err());
        assert!(Dim::parse("(N)").is_err());
        assert!(Dim::parse("").is_err());
    }
}
