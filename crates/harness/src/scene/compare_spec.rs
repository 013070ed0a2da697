//! A tensor's `compare` as `scene.toml` wrote it (the model's side; the
//! parsing and its checks are `super::validate`'s, judging an output is
//! [`crate::compare`]'s).

use crate::scene::expr::{Expr, ExprError, Params};

/// A number or an expression of the case params, as a comparison argument
/// was written.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgSpec {
    Int(i64),
    Float(f64),
    Expr { text: String, expr: Expr },
}

impl ArgSpec {
    pub(crate) fn eval(&self, params: &Params) -> Result<f64, ExprError> {
        Ok(match self {
            ArgSpec::Int(i) => *i as f64,
            ArgSpec::Float(f) => *f,
            ArgSpec::Expr { expr, .. } => expr.eval(params)?.as_f64(),
        })
    }
}

/// A tensor's `compare`, as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CompareSpec {
    #[default]
    AllClose,
    Exact,
    /// A registered comparison and its arguments (numbers or expressions
    /// of the case params), in name order.
    Custom {
        name: String,
        args: Vec<(String, ArgSpec)>,
    },
    /// `{ python = "FUNCTION", ... }`: a function of the scene's Python
    /// file (its golden file, else its fixtures file) and its arguments,
    /// in name order.
    Python {
        function: String,
        args: Vec<(String, ArgSpec)>,
    },
}
