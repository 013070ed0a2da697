//! Case params and the small expression language of `scene.toml`.
//!
//! A case binds typed params ([`Value`]: integers, floats, booleans,
//! strings, lists of numbers). Wherever a number goes (shapes, scalar
//! values, init parameters, tolerances) a scene may write an expression of
//! those params instead: `+ - * / %`, unary `-`, parentheses, `ceil_div(a,
//! b)`, `min(a, b, ...)`, `max(a, b, ...)`, param names and `LIST[i]`.
//!
//! Lists: `max(L)`, `min(L)`, `sum(L)` and `len(L)` take one list, a list
//! param or a literal `[a, b, ...]`; a list is never a number by itself.
//! Optional params: `get(NAME, DEFAULT)` is the param `NAME` where the case
//! binds it, else `DEFAULT` (a number or a list), so a param that only some
//! cases give can still be used by all of them.
//!
//! Evaluation is exact on integers (`i64`, checked: overflow is an error),
//! integer `/` and `%` floor (as in Python: `-7 / 2 = -4`, `-7 % 2 = 1`),
//! and any float operand makes the operation a float one. Division by
//! zero, an unknown param, a string or boolean param used as a number, an
//! index out of range and `max` / `min` of an empty list are errors, never
//! a silent value.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A case param's value, as `scene.toml` wrote it.
///
/// Serialised untagged, so an integer param is the same JSON number it
/// always was (dumps, reports and bundle slot keys are unchanged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<Value>),
}

impl Value {
    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// The params of one case, by name.
pub type Params = BTreeMap<String, Value>;

/// A number an expression evaluates to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x}"),
        }
    }
}

/// Why an expression did not parse or evaluate.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error("`{text}` is not an expression: {what} at offset {at}")]
    Syntax {
        text: String,
        what: String,
        at: usize,
    },
    #[error("unknown param `{name}` (the case binds: {bound})")]
    UnknownParam { name: String, bound: String },
    #[error("unknown function `{0}` (known: ceil_div, min, max, sum, len, get)")]
    UnknownFunction(String),
    #[error("`{func}` takes {expected} arguments, got {got}")]
    Arity {
        func: String,
        expected: &'static str,
        got: usize,
    },
    #[error("param `{name}` is {kind} ({value}), not a number")]
    NotANumber {
        name: String,
        kind: &'static str,
        value: String,
    },
    #[error("param `{name}` is a list: index it (`{name}[i]`)")]
    UnindexedList { name: String },
    #[error("param `{name}` is {kind}, it cannot be indexed")]
    NotAList { name: String, kind: &'static str },
    #[error("index {index} is out of range for param `{name}` ({len} items)")]
    IndexOutOfRange {
        name: String,
        index: i64,
        len: usize,
    },
    /// A function of one list was given something else.
    #[error("`{func}` of one argument takes a list (a list param or `[a, b, ...]`), got {got}")]
    NeedsList { func: &'static str, got: String },
    /// `max` / `min` of an empty list has no value.
    #[error("`{func}` of an empty list ({list})")]
    EmptyList { func: &'static str, list: String },
    /// A list literal where a number is needed.
    #[error("`{0}` is a list, not a number: use it in max, min, sum or len")]
    ListNotANumber(String),
    #[error("an index must be an integer, got {0}")]
    NonIntegerIndex(String),
    #[error("division by zero in `{0}`")]
    DivisionByZero(String),
    #[error("integer overflow in `{0}`")]
    Overflow(String),
    #[error("`{func}` needs integer arguments, got {got}")]
    NeedsInteger { func: &'static str, got: String },
    #[error("`{0}` is not finite")]
    NotFinite(String),
    /// Past one of the size limits ([`MAX_NODES`], [`MAX_TREE_DEPTH`],
    /// [`MAX_DEPTH`]): refused before it can exhaust the stack.
    #[error("`{excerpt}` is too large: {what} (the limit is {limit})")]
    TooLarge {
        excerpt: String,
        what: &'static str,
        limit: usize,
    },
}

/// More nodes (numbers, names, operators, calls) than this in one
/// expression is refused: no scene needs it, and a bounded tree keeps
/// parsing, evaluating, printing and dropping it off the stack limit.
pub const MAX_NODES: usize = 2048;

/// A tree deeper than this is refused. Every node counts, binary operators
/// included: `N+0+0+...` folds left into a chain as deep as it has terms,
/// and evaluation, `Display` and `Drop` all recurse along that chain.
pub const MAX_TREE_DEPTH: usize = 512;

/// The start of `text` for a message about it (a refused expression may
/// be megabytes long).
fn excerpt(text: &str) -> String {
    const SHOWN: usize = 48;
    match text.char_indices().nth(SHOWN) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}... ({} bytes)", &text[..cut], text.len()),
    }
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Op {
    fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
            Op::Div => '/',
            Op::Rem => '%',
        }
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Int(i64),
    Float(f64),
    Param(String),
    Index(String, Box<Expr>),
    /// A list literal `[a, b, ...]`: only an argument of a list function
    /// (or `get`'s default there).
    List(Vec<Expr>),
    Neg(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

/// A built-in function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    CeilDiv,
    Min,
    Max,
    Sum,
    Len,
    /// `get(NAME, DEFAULT)`: the parser guarantees the first argument is
    /// an [`Expr::Param`].
    Get,
}

impl Func {
    fn name(self) -> &'static str {
        match self {
            Func::CeilDiv => "ceil_div",
            Func::Min => "min",
            Func::Max => "max",
            Func::Sum => "sum",
            Func::Len => "len",
            Func::Get => "get",
        }
    }
}

impl Expr {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut p = Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            nodes: 0,
        };
        p.skip_ws();
        if p.pos == p.bytes.len() {
            return Err(p.error("empty expression"));
        }
        let (e, _) = p.sum()?;
        p.skip_ws();
        if p.pos != p.bytes.len() {
            return Err(p.error("unexpected character"));
        }
        Ok(e)
    }

    /// The param names the expression reads, each once, in order.
    pub fn params(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_params(&mut out);
        out
    }

    fn collect_params<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Int(_) | Expr::Float(_) => {}
            Expr::Param(p) => {
                if !out.contains(&p.as_str()) {
                    out.push(p);
                }
            }
            Expr::Index(p, i) => {
                if !out.contains(&p.as_str()) {
                    out.push(p);
                }
                i.collect_params(out);
            }
            Expr::Neg(e) => e.collect_params(out),
            Expr::Bin(_, a, b) => {
                a.collect_params(out);
                b.collect_params(out);
            }
            // `get`'s name counts: a derived param may not `get` one
            // computed below it (the order would decide the value).
            Expr::Call(_, args) | Expr::List(args) => {
                args.iter().for_each(|a| a.collect_params(out))
            }
        }
    }

    /// Evaluates the expression with `params`.
    ///
    /// A tree deeper than [`MAX_TREE_DEPTH`] (only a hand-built one: the
    /// parser refuses them) is an error, not a stack overflow.
    pub fn eval(&self, params: &Params) -> Result<Num, ExprError> {
        self.eval_at(params, 0)
    }

    /// The recursion itself, kept to a small frame (the work of each node
    /// is in functions it calls), so that [`MAX_TREE_DEPTH`] levels fit a
    /// thread's stack in a debug build too.
    fn eval_at(&self, params: &Params, depth: usize) -> Result<Num, ExprError> {
        if depth >= MAX_TREE_DEPTH {
            return Err(too_deep_to_evaluate());
        }
        let depth = depth + 1;
        match self {
            Expr::Bin(op, a, b) => {
                let a = a.eval_at(params, depth)?;
                let b = b.eval_at(params, depth)?;
                self.binary(*op, a, b)
            }
            Expr::Neg(e) => {
                let v = e.eval_at(params, depth)?;
                self.negate(v)
            }
            _ => self.eval_node(params, depth),
        }
    }

    #[inline(never)]
    fn negate(&self, v: Num) -> Result<Num, ExprError> {
        match v {
            Num::Int(i) => i
                .checked_neg()
                .map(Num::Int)
                .ok_or_else(|| ExprError::Overflow(self.to_string())),
            Num::Float(f) => Ok(Num::Float(-f)),
        }
    }

    /// Leaves, indexing and calls.
    #[inline(never)]
    fn eval_node(&self, params: &Params, depth: usize) -> Result<Num, ExprError> {
        match self {
            Expr::Int(i) => Ok(Num::Int(*i)),
            Expr::Float(f) => Ok(Num::Float(*f)),
            Expr::Param(name) => match lookup(params, name)? {
                Value::Int(i) => Ok(Num::Int(*i)),
                Value::Float(f) => Ok(Num::Float(*f)),
                Value::List(_) => Err(ExprError::UnindexedList { name: name.clone() }),
                v => Err(ExprError::NotANumber {
                    name: name.clone(),
                    kind: v.kind(),
                    value: v.to_string(),
                }),
            },
            Expr::Index(name, index) => {
                let items = match lookup(params, name)? {
                    Value::List(items) => items,
                    v => {
                        return Err(ExprError::NotAList {
                            name: name.clone(),
                            kind: v.kind(),
                        });
                    }
                };
                let i = match index.eval_at(params, depth)? {
                    Num::Int(i) => i,
                    Num::Float(f) => return Err(ExprError::NonIntegerIndex(f.to_string())),
                };
                let item = usize::try_from(i)
                    .ok()
                    .and_then(|u| items.get(u))
                    .ok_or_else(|| ExprError::IndexOutOfRange {
                        name: name.clone(),
                        index: i,
                        len: items.len(),
                    })?;
                match item {
                    Value::Int(i) => Ok(Num::Int(*i)),
                    Value::Float(f) => Ok(Num::Float(*f)),
                    v => Err(ExprError::NotANumber {
                        name: format!("{name}[{i}]"),
                        kind: v.kind(),
                        value: v.to_string(),
                    }),
                }
            }
            Expr::Neg(_) | Expr::Bin(..) => self.eval_at(params, depth),
            Expr::List(_) => Err(ExprError::ListNotANumber(self.to_string())),
            Expr::Call(Func::Get, args) => match args.as_slice() {
                [Expr::Param(name), _] if params.contains_key(name) => {
                    args[0].eval_at(params, depth)
                }
                [Expr::Param(_), default] => default.eval_at(params, depth),
                _ => Err(get_arity(args.len())),
            },
            Expr::Call(func @ (Func::Min | Func::Max | Func::Sum | Func::Len), args)
                if args.len() == 1 || matches!(func, Func::Sum | Func::Len) =>
            {
                let [list] = args.as_slice() else {
                    return Err(ExprError::Arity {
                        func: func.name().to_string(),
                        expected: "1",
                        got: args.len(),
                    });
                };
                self.list_function(*func, list, params, depth)
            }
            Expr::Call(func, args) => {
                let vals = args
                    .iter()
                    .map(|a| a.eval_at(params, depth))
                    .collect::<Result<Vec<_>, _>>()?;
                let arity = |expected| ExprError::Arity {
                    func: func.name().to_string(),
                    expected,
                    got: vals.len(),
                };
                match func {
                    // Handled above; here only to keep the match total.
                    Func::Get | Func::Sum | Func::Len => Err(arity("1")),
                    Func::CeilDiv => {
                        let &[x, y] = vals.as_slice() else {
                            return Err(arity("2"));
                        };
                        let (Num::Int(a), Num::Int(b)) = (x, y) else {
                            return Err(ExprError::NeedsInteger {
                                func: "ceil_div",
                                got: format!("{x}, {y}"),
                            });
                        };
                        if b == 0 {
                            return Err(ExprError::DivisionByZero(self.to_string()));
                        }
                        // ceil(a / b) = -floor(-a / b)
                        let neg = a
                            .checked_neg()
                            .ok_or_else(|| ExprError::Overflow(self.to_string()))?;
                        floor_div(neg, b)
                            .and_then(i64::checked_neg)
                            .map(Num::Int)
                            .ok_or_else(|| ExprError::Overflow(self.to_string()))
                    }
                    Func::Min | Func::Max => {
                        let pick_min = *func == Func::Min;
                        let Some((&first, rest)) =
                            vals.split_first().filter(|(_, r)| !r.is_empty())
                        else {
                            return Err(arity("one list, or 2 or more"));
                        };
                        let mut best = first;
                        for &v in rest {
                            let better = match (best, v) {
                                (Num::Int(x), Num::Int(y)) => {
                                    if pick_min {
                                        y < x
                                    } else {
                                        y > x
                                    }
                                }
                                (x, y) => {
                                    if pick_min {
                                        y.as_f64() < x.as_f64()
                                    } else {
                                        y.as_f64() > x.as_f64()
                                    }
                                }
                            };
                            if better {
                                best = v;
                            }
                        }
                        // Mixed: the result is a float when any argument is.
                        if vals.iter().any(|v| matches!(v, Num::Float(_))) {
                            best = Num::Float(best.as_f64());
                        }
                        Ok(best)
                    }
                }
            }
        }
    }

    /// `max` / `min` / `sum` / `len` of one list (`self` is the call).
    #[inline(never)]
    fn list_function(
        &self,
        func: Func,
        list: &Expr,
        params: &Params,
        depth: usize,
    ) -> Result<Num, ExprError> {
        let (what, items) = list.eval_list(func, params, depth)?;
        if func == Func::Len {
            return i64::try_from(items.len())
                .map(Num::Int)
                .map_err(|_| ExprError::Overflow(self.to_string()));
        }
        let Some((&first, rest)) = items.split_first() else {
            return match func {
                // The sum of nothing is 0, as in Python; a max or min of
                // nothing has no value.
                Func::Sum => Ok(Num::Int(0)),
                _ => Err(ExprError::EmptyList {
                    func: func.name(),
                    list: what,
                }),
            };
        };
        let any_float = items.iter().any(|v| matches!(v, Num::Float(_)));
        let mut acc = first;
        for &v in rest {
            acc = match (func, acc, v) {
                (Func::Sum, Num::Int(a), Num::Int(b)) => a
                    .checked_add(b)
                    .map(Num::Int)
                    .ok_or_else(|| ExprError::Overflow(self.to_string()))?,
                (Func::Sum, a, b) => Num::Float(a.as_f64() + b.as_f64()),
                (Func::Min, Num::Int(a), Num::Int(b)) => Num::Int(a.min(b)),
                (Func::Max, Num::Int(a), Num::Int(b)) => Num::Int(a.max(b)),
                (Func::Min, a, b) if b.as_f64() < a.as_f64() => b,
                (Func::Max, a, b) if b.as_f64() > a.as_f64() => b,
                (_, a, _) => a,
            };
        }
        // As with `max(a, b, ...)`: a float anywhere makes the result one.
        if any_float {
            let f = acc.as_f64();
            if !f.is_finite() {
                return Err(ExprError::NotFinite(self.to_string()));
            }
            acc = Num::Float(f);
        }
        Ok(acc)
    }

    /// The numbers of a list argument, with what it is for messages (`param
    /// `L``, or the literal's text).
    fn eval_list(
        &self,
        func: Func,
        params: &Params,
        depth: usize,
    ) -> Result<(String, Vec<Num>), ExprError> {
        // `get` defaults may nest: each level counts, as in `eval_at`.
        if depth >= MAX_TREE_DEPTH {
            return Err(too_deep_to_evaluate());
        }
        let depth = depth + 1;
        match self {
            Expr::Param(name) => match lookup(params, name)? {
                Value::List(items) => {
                    let nums = items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| match v {
                            Value::Int(x) => Ok(Num::Int(*x)),
                            Value::Float(x) if x.is_finite() => Ok(Num::Float(*x)),
                            Value::Float(_) => Err(ExprError::NotFinite(format!("{name}[{i}]"))),
                            v => Err(ExprError::NotANumber {
                                name: format!("{name}[{i}]"),
                                kind: v.kind(),
                                value: v.to_string(),
                            }),
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok((format!("param `{name}`"), nums))
                }
                v => Err(ExprError::NeedsList {
                    func: func.name(),
                    got: format!("param `{name}`, {} ({v})", v.kind()),
                }),
            },
            Expr::List(items) => {
                let nums = items
                    .iter()
                    .map(|e| e.eval_at(params, depth))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((format!("`{self}`"), nums))
            }
            Expr::Call(Func::Get, args) => match args.as_slice() {
                [name @ Expr::Param(p), _] if params.contains_key(p) => {
                    name.eval_list(func, params, depth)
                }
                [Expr::Param(_), default] => default.eval_list(func, params, depth),
                _ => Err(get_arity(args.len())),
            },
            e => Err(ExprError::NeedsList {
                func: func.name(),
                got: format!("`{e}`"),
            }),
        }
    }

    #[inline(never)]
    fn binary(&self, op: Op, a: Num, b: Num) -> Result<Num, ExprError> {
        let overflow = || ExprError::Overflow(self.to_string());
        match (a, b) {
            (Num::Int(a), Num::Int(b)) => {
                let v = match op {
                    Op::Add => a.checked_add(b),
                    Op::Sub => a.checked_sub(b),
                    Op::Mul => a.checked_mul(b),
                    Op::Div | Op::Rem if b == 0 => {
                        return Err(ExprError::DivisionByZero(self.to_string()));
                    }
                    Op::Div => floor_div(a, b),
                    Op::Rem => floor_div(a, b)
                        .and_then(|q| q.checked_mul(b))
                        .and_then(|qb| a.checked_sub(qb)),
                };
                v.map(Num::Int).ok_or_else(overflow)
            }
            (a, b) => {
                let (a, b) = (a.as_f64(), b.as_f64());
                if matches!(op, Op::Div | Op::Rem) && b == 0.0 {
                    return Err(ExprError::DivisionByZero(self.to_string()));
                }
                let v = match op {
                    Op::Add => a + b,
                    Op::Sub => a - b,
                    Op::Mul => a * b,
                    Op::Div => a / b,
                    Op::Rem => a - b * (a / b).floor(),
                };
                if v.is_finite() {
                    Ok(Num::Float(v))
                } else {
                    Err(ExprError::NotFinite(self.to_string()))
                }
            }
        }
    }
}

/// A hand-built `get` that is not `get(NAME, DEFAULT)`.
fn get_arity(got: usize) -> ExprError {
    ExprError::Arity {
        func: "get".to_string(),
        expected: "2 (a param name, then the default)",
        got,
    }
}

#[inline(never)]
fn too_deep_to_evaluate() -> ExprError {
    ExprError::TooLarge {
        excerpt: "(a hand-built expression)".to_string(),
        what: "nested too deeply to evaluate",
        limit: MAX_TREE_DEPTH,
    }
}

/// Integer division rounding toward negative infinity; `None` on overflow.
fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

fn lookup<'p>(params: &'p Params, name: &str) -> Result<&'p Value, ExprError> {
    params.get(name).ok_or_else(|| ExprError::UnknownParam {
        name: name.to_string(),
        bound: if params.is_empty() {
            "nothing".to_string()
        } else {
            params.keys().cloned().collect::<Vec<_>>().join(", ")
        },
    })
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Int(i) => write!(f, "{i}"),
            Expr::Float(x) => write!(f, "{x:?}"),
            Expr::Param(p) => f.write_str(p),
            Expr::Index(p, i) => write!(f, "{p}[{i}]"),
            Expr::List(items) => {
                f.write_str("[")?;
                for (i, a) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str("]")
            }
            Expr::Neg(e) => write!(f, "-({e})"),
            Expr::Bin(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
            Expr::Call(func, args) => {
                write!(f, "{}(", func.name())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Recursive descent: sum := product (('+'|'-') product)*;
/// product := unary (('*'|'/'|'%') unary)*; unary := '-' unary | atom;
/// atom := number | name | name '[' sum ']' | name '(' args ')' | '(' sum ')'
///       | '[' (sum (',' sum)*)? ']'.
///
/// Every rule returns the tree it built with that tree's depth, so the
/// limits hold for the tree itself, not only for the parser's recursion.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Nodes built so far, against [`MAX_NODES`].
    nodes: usize,
}

/// Deeper nesting of parentheses, brackets, calls and unary signs than this
/// is refused (no stack overflow in the parser on hostile input).
pub const MAX_DEPTH: usize = 64;

/// A parsed subtree and its depth (a leaf is 1).
type Built = (Expr, usize);

impl Parser<'_> {
    fn error(&self, what: &str) -> ExprError {
        ExprError::Syntax {
            text: self.text.to_string(),
            what: what.to_string(),
            at: self.pos,
        }
    }

    fn too_large(&self, what: &'static str, limit: usize) -> ExprError {
        ExprError::TooLarge {
            excerpt: excerpt(self.text),
            what,
            limit,
        }
    }

    /// Counts one more node of depth `depth`; refuses past the limits.
    fn node(&mut self, expr: Expr, depth: usize) -> Result<Built, ExprError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.too_large(
                "more terms than allowed (numbers, names, operators and calls count)",
                MAX_NODES,
            ));
        }
        if depth > MAX_TREE_DEPTH {
            return Err(self.too_large(
                "nested too deeply (each operator of a chain is a level)",
                MAX_TREE_DEPTH,
            ));
        }
        Ok((expr, depth))
    }

    fn bin(&mut self, op: Op, (a, da): Built, (b, db): Built) -> Result<Built, ExprError> {
        self.node(Expr::Bin(op, Box::new(a), Box::new(b)), 1 + da.max(db))
    }

    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn depth_check(&self, depth: usize) -> Result<(), ExprError> {
        if depth > MAX_DEPTH {
            Err(self.error("nested too deeply"))
        } else {
            Ok(())
        }
    }

    fn sum(&mut self) -> Result<Built, ExprError> {
        self.sum_at(0)
    }

    fn sum_at(&mut self, depth: usize) -> Result<Built, ExprError> {
        self.depth_check(depth)?;
        let mut e = self.product(depth)?;
        loop {
            let op = match self.peek() {
                Some(b'+') => Op::Add,
                Some(b'-') => Op::Sub,
                _ => return Ok(e),
            };
            self.pos += 1;
            let rhs = self.product(depth)?;
            e = self.bin(op, e, rhs)?;
        }
    }

    fn product(&mut self, depth: usize) -> Result<Built, ExprError> {
        let mut e = self.unary(depth)?;
        loop {
            let op = match self.peek() {
                Some(b'*') => Op::Mul,
                Some(b'/') => Op::Div,
                Some(b'%') => Op::Rem,
                _ => return Ok(e),
            };
            self.pos += 1;
            let rhs = self.unary(depth)?;
            e = self.bin(op, e, rhs)?;
        }
    }

    fn unary(&mut self, depth: usize) -> Result<Built, ExprError> {
        self.depth_check(depth)?;
        if self.eat(b'-') {
            let (inner, d) = self.unary(depth + 1)?;
            return match inner {
                Expr::Int(i) => Ok((Expr::Int(-i), d)),
                Expr::Float(f) => Ok((Expr::Float(-f), d)),
                e => self.node(Expr::Neg(Box::new(e)), d + 1),
            };
        }
        if self.eat(b'+') {
            return self.unary(depth + 1);
        }
        self.atom(depth)
    }

    fn atom(&mut self, depth: usize) -> Result<Built, ExprError> {
        match self.peek() {
            None => Err(self.error("expression ends early")),
            Some(b'(') => {
                self.pos += 1;
                let e = self.sum_at(depth + 1)?;
                if !self.eat(b')') {
                    return Err(self.error("missing `)`"));
                }
                Ok(e)
            }
            Some(b'[') => {
                self.pos += 1;
                let (items, deepest) = self.list_items(b']', depth)?;
                self.node(Expr::List(items), deepest + 1)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => {
                let n = self.number()?;
                self.node(n, 1)
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.pos;
                while self.pos < self.bytes.len()
                    && (self.bytes[self.pos].is_ascii_alphanumeric()
                        || self.bytes[self.pos] == b'_')
                {
                    self.pos += 1;
                }
                let name = &self.text[start..self.pos];
                if self.eat(b'(') {
                    let func = match name {
                        "ceil_div" => Func::CeilDiv,
                        "min" => Func::Min,
                        "max" => Func::Max,
                        "sum" => Func::Sum,
                        "len" => Func::Len,
                        "get" => Func::Get,
                        _ => return Err(ExprError::UnknownFunction(name.to_string())),
                    };
                    let at = self.pos;
                    let (args, deepest) = self.list_items(b')', depth)?;
                    if func == Func::Get && args.len() == 2 && !matches!(args[0], Expr::Param(_)) {
                        return Err(ExprError::Syntax {
                            text: self.text.to_string(),
                            what: "`get` takes a param name first: `get(NAME, DEFAULT)`"
                                .to_string(),
                            at,
                        });
                    }
                    let (ok, expected) = match func {
                        Func::CeilDiv => (args.len() == 2, "2"),
                        Func::Min | Func::Max => (!args.is_empty(), "one list, or 2 or more"),
                        Func::Sum | Func::Len => (args.len() == 1, "1 (a list)"),
                        Func::Get => (args.len() == 2, "2 (a param name, then the default)"),
                    };
                    if !ok {
                        return Err(ExprError::Arity {
                            func: name.to_string(),
                            expected,
                            got: args.len(),
                        });
                    }
                    return self.node(Expr::Call(func, args), deepest + 1);
                }
                if self.eat(b'[') {
                    let name = name.to_string();
                    let (index, d) = self.sum_at(depth + 1)?;
                    if !self.eat(b']') {
                        return Err(self.error("missing `]`"));
                    }
                    return self.node(Expr::Index(name, Box::new(index)), d + 1);
                }
                let name = name.to_string();
                self.node(Expr::Param(name), 1)
            }
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    /// Comma-separated expressions up to `close` (already past the
    /// opening bracket), with the deepest one's depth.
    fn list_items(&mut self, close: u8, depth: usize) -> Result<(Vec<Expr>, usize), ExprError> {
        let mut items = Vec::new();
        let mut deepest = 0;
        if self.eat(close) {
            return Ok((items, deepest));
        }
        loop {
            let (item, d) = self.sum_at(depth + 1)?;
            items.push(item);
            deepest = deepest.max(d);
            if self.eat(close) {
                return Ok((items, deepest));
            }
            if !self.eat(b',') {
                let what = if close == b')' {
                    "expected `,` or `)`"
                } else {
                    "expected `,` or `]`"
                };
                return Err(self.error(what));
            }
        }
    }

    fn number(&mut self) -> Result<Expr, ExprError> {
        let start = self.pos;
        let mut float = false;
        while self.pos < self.bytes.len() {
            let c = self.bytes[self.pos];
            if c.is_ascii_digit() || c == b'_' {
                self.pos += 1;
            } else if c == b'.' {
                float = true;
                self.pos += 1;
            } else if c == b'e' || c == b'E' {
                float = true;
                self.pos += 1;
                if self.pos < self.bytes.len() && matches!(self.bytes[self.pos], b'+' | b'-') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
        let raw: String = self.text[start..self.pos]
            .chars()
            .filter(|&c| c != '_')
            .collect();
        if float {
            match raw.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Expr::Float(f)),
                _ => Err(ExprError::Syntax {
                    text: self.text.to_string(),
                    what: format!("`{raw}` is not a number"),
                    at: start,
                }),
            }
        } else {
            raw.parse::<i64>()
                .map(Expr::Int)
                .map_err(|_| ExprError::Syntax {
                    text: self.text.to_string(),
                    what: format!("`{raw}` is not an integer that fits i64"),
                    at: start,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        [
            ("N", Value::Int(10)),
            ("H", Value::Int(4)),
            ("X", Value::Float(0.5)),
            ("DT", Value::Str("bf16".into())),
            ("ON", Value::Bool(true)),
            (
                "L",
                Value::List(vec![Value::Int(3), Value::Int(7), Value::Float(1.5)]),
            ),
            ("BIG", Value::Int(i64::MAX)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn ev(text: &str) -> Result<Num, ExprError> {
        Expr::parse(text)?.eval(&params())
    }

    #[test]
    fn integer_arithmetic_and_precedence() {
        assert_eq!(ev("N + H * 2").unwrap(), Num::Int(18));
        assert_eq!(ev("(N + H) * 2").unwrap(), Num::Int(28));
        assert_eq!(ev("N - H - 1").unwrap(), Num::Int(5), "left associative");
        assert_eq!(ev("N / H").unwrap(), Num::Int(2));
        assert_eq!(ev("-7 / 2").unwrap(), Num::Int(-4), "integer / floors");
        assert_eq!(ev("-7 % 2").unwrap(), Num::Int(1), "% follows the floor");
        assert_eq!(ev("7 % -2").unwrap(), Num::Int(-1));
        assert_eq!(ev("N % H").unwrap(), Num::Int(2));
        assert_eq!(ev("-N").unwrap(), Num::Int(-10));
        assert_eq!(ev("- (N - 12)").unwrap(), Num::Int(2));
        assert_eq!(ev("1_000 * 2").unwrap(), Num::Int(2000));
    }

    #[test]
    fn functions() {
        assert_eq!(ev("ceil_div(N, H)").unwrap(), Num::Int(3));
        assert_eq!(ev("ceil_div(8, 4)").unwrap(), Num::Int(2));
        assert_eq!(ev("ceil_div(-7, 2)").unwrap(), Num::Int(-3));
        assert_eq!(ev("min(N, H, 7)").unwrap(), Num::Int(4));
        assert_eq!(ev("max(N, H * 3)").unwrap(), Num::Int(12));
        assert_eq!(ev("max(1, X)").unwrap(), Num::Float(1.0));
        assert_eq!(ev("min(N, max(H, 6))").unwrap(), Num::Int(6));
    }

    #[test]
    fn floats_and_lists() {
        assert_eq!(ev("X * 4").unwrap(), Num::Float(2.0));
        assert_eq!(ev("1e-3 * 2").unwrap(), Num::Float(2e-3));
        assert_eq!(ev("N / 4.0").unwrap(), Num::Float(2.5));
        assert_eq!(ev("L[1] + L[0]").unwrap(), Num::Int(10));
        assert_eq!(ev("L[N - 8]").unwrap(), Num::Float(1.5));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = ev("M * 2").unwrap_err();
        assert!(
            matches!(&e, ExprError::UnknownParam { name, .. } if name == "M"),
            "{e}"
        );
        assert!(e.to_string().contains("N"), "lists what is bound: {e}");
        assert!(matches!(ev("N / 0"), Err(ExprError::DivisionByZero(_))));
        assert!(matches!(
            ev("N % (H - 4)"),
            Err(ExprError::DivisionByZero(_))
        ));
        assert!(matches!(ev("X / 0"), Err(ExprError::DivisionByZero(_))));
        assert!(matches!(
            ev("ceil_div(N, 0)"),
            Err(ExprError::DivisionByZero(_))
        ));
        assert!(matches!(
            ev("ceil_div(X, 2)"),
            Err(ExprError::NeedsInteger { .. })
        ));
        let e = ev("DT + 1").unwrap_err();
        assert!(e.to_string().contains("is a string"), "{e}");
        assert!(matches!(ev("ON * 2"), Err(ExprError::NotANumber { .. })));
        assert!(matches!(ev("L + 1"), Err(ExprError::UnindexedList { .. })));
        assert!(matches!(ev("N[0]"), Err(ExprError::NotAList { .. })));
        assert!(matches!(ev("L[3]"), Err(ExprError::IndexOutOfRange { .. })));
        assert!(matches!(
            ev("L[-1]"),
            Err(ExprError::IndexOutOfRange { .. })
        ));
        assert!(matches!(ev("L[X]"), Err(ExprError::NonIntegerIndex(_))));
        assert!(matches!(ev("BIG + 1"), Err(ExprError::Overflow(_))));
        assert!(matches!(ev("BIG * 2"), Err(ExprError::Overflow(_))));
        assert!(matches!(ev("sqrt(N)"), Err(ExprError::UnknownFunction(_))));
        // One argument is a list; a number alone is not one.
        assert!(matches!(ev("min(N)"), Err(ExprError::NeedsList { .. })));
        assert!(matches!(ev("max()"), Err(ExprError::Arity { .. })));
        assert!(matches!(
            ev("ceil_div(N, H, 1)"),
            Err(ExprError::Arity { .. })
        ));
        // A hand-built call of the wrong arity is an error, not a panic.
        for func in [Func::CeilDiv, Func::Get] {
            let e = Expr::Call(func, vec![Expr::Int(1)]).eval(&params());
            assert!(matches!(e, Err(ExprError::Arity { got: 1, .. })), "{e:?}");
        }
        for func in [Func::Min, Func::Max, Func::Sum, Func::Len] {
            let e = Expr::Call(func, vec![]).eval(&params());
            assert!(matches!(e, Err(ExprError::Arity { got: 0, .. })), "{e:?}");
            let e = Expr::Call(func, vec![Expr::Int(1)]).eval(&params());
            assert!(matches!(e, Err(ExprError::NeedsList { .. })), "{e:?}");
        }
        for func in [Func::Sum, Func::Len] {
            let two = vec![Expr::Int(1), Expr::Int(2)];
            let e = Expr::Call(func, two).eval(&params());
            assert!(matches!(e, Err(ExprError::Arity { got: 2, .. })), "{e:?}");
        }
    }

    fn with(extra: &[(&str, Value)]) -> Params {
        let mut p = params();
        for (k, v) in extra {
            p.insert(k.to_string(), v.clone());
        }
        p
    }

    fn ints(xs: &[i64]) -> Value {
        Value::List(xs.iter().map(|&x| Value::Int(x)).collect())
    }

    #[test]
    fn max_and_min_of_one_list() {
        assert_eq!(
            ev("max(L)").unwrap(),
            Num::Float(7.0),
            "a float makes it one"
        );
        assert_eq!(ev("min(L)").unwrap(), Num::Float(1.5));
        let p = with(&[("lens", ints(&[33, 7, 128, 20]))]);
        let e = |t: &str| Expr::parse(t).unwrap().eval(&p);
        assert_eq!(e("max(lens)").unwrap(), Num::Int(128));
        assert_eq!(e("min(lens)").unwrap(), Num::Int(7));
        assert_eq!(e("max(lens) / 16 + 1").unwrap(), Num::Int(9));
        assert_eq!(e("max([N, H * 5, 3])").unwrap(), Num::Int(20));
        assert_eq!(e("min([N])").unwrap(), Num::Int(10));
        // The variadic form is unchanged, list arguments are not mixed in.
        assert_eq!(e("max(N, H)").unwrap(), Num::Int(10));
        assert!(matches!(
            e("max(lens, 1)"),
            Err(ExprError::UnindexedList { .. })
        ));
    }

    #[test]
    fn sum_and_len() {
        let p = with(&[("lens", ints(&[33, 7, 128, 20])), ("none", ints(&[]))]);
        let e = |t: &str| Expr::parse(t).unwrap().eval(&p);
        assert_eq!(e("sum(lens)").unwrap(), Num::Int(188));
        assert_eq!(e("len(lens)").unwrap(), Num::Int(4));
        assert_eq!(e("sum(none)").unwrap(), Num::Int(0), "as in Python");
        assert_eq!(e("len(none)").unwrap(), Num::Int(0));
        assert_eq!(e("len([])").unwrap(), Num::Int(0));
        assert_eq!(e("sum([N, 1, H])").unwrap(), Num::Int(15));
        assert_eq!(e("sum(L)").unwrap(), Num::Float(11.5));
        assert_eq!(e("ceil_div(sum(lens), len(lens))").unwrap(), Num::Int(47));
    }

    #[test]
    fn indexing_takes_an_expression() {
        let p = with(&[("lens", ints(&[33, 7, 128, 20]))]);
        let e = |t: &str| Expr::parse(t).unwrap().eval(&p);
        assert_eq!(e("lens[len(lens) - 1]").unwrap(), Num::Int(20));
        assert_eq!(e("lens[N % 4]").unwrap(), Num::Int(128));
        let err = e("lens[len(lens)]").unwrap_err();
        assert!(
            matches!(
                &err,
                ExprError::IndexOutOfRange {
                    index: 4,
                    len: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("`lens`"), "{err}");
    }

    #[test]
    fn list_function_errors() {
        let p = with(&[
            ("none", ints(&[])),
            ("huge", ints(&[i64::MAX, 1])),
            (
                "nan",
                Value::List(vec![Value::Int(1), Value::Float(f64::NAN)]),
            ),
            (
                "words",
                Value::List(vec![Value::Int(1), Value::Str("x".into())]),
            ),
        ]);
        let e = |t: &str| Expr::parse(t).unwrap().eval(&p);
        // Empty: max and min name the param.
        for text in ["max(none)", "min(none)"] {
            let err = e(text).unwrap_err();
            assert!(matches!(err, ExprError::EmptyList { .. }), "{err:?}");
            assert!(err.to_string().contains("param `none`"), "{err}");
        }
        assert!(matches!(e("max([])"), Err(ExprError::EmptyList { .. })));
        // Overflow in a sum is an error, not a wrap.
        assert!(matches!(e("sum(huge)"), Err(ExprError::Overflow(_))));
        assert_eq!(e("max(huge)").unwrap(), Num::Int(i64::MAX));
        // A non-number in a list (only a hand-made case: load refuses it).
        let err = e("sum(words)").unwrap_err();
        assert!(
            matches!(&err, ExprError::NotANumber { name, .. } if name == "words[1]"),
            "{err:?}"
        );
        assert!(matches!(e("max(nan)"), Err(ExprError::NotFinite(_))));
        // Not a list.
        for text in ["max(N)", "sum(N)", "len(H)", "len(DT)", "sum(N + 1)"] {
            let err = e(text).unwrap_err();
            assert!(
                matches!(err, ExprError::NeedsList { .. }),
                "{text}: {err:?}"
            );
        }
        assert!(e("len(DT)").unwrap_err().to_string().contains("a string"));
        // A list is not a number.
        assert!(matches!(e("[1, 2] + 1"), Err(ExprError::ListNotANumber(_))));
        assert!(matches!(
            e("none * 2"),
            Err(ExprError::UnindexedList { .. })
        ));
        // Unknown list param.
        assert!(matches!(
            e("max(lens)"),
            Err(ExprError::UnknownParam { .. })
        ));
        assert!(matches!(
            Expr::parse("sum(L, L)"),
            Err(ExprError::Arity { .. })
        ));
        assert!(matches!(Expr::parse("len()"), Err(ExprError::Arity { .. })));
        assert!(matches!(
            Expr::parse("[1, 2"),
            Err(ExprError::Syntax { .. })
        ));
    }

    #[test]
    fn get_with_and_without_the_param() {
        assert_eq!(ev("get(N, 3)").unwrap(), Num::Int(10), "bound: its value");
        assert_eq!(
            ev("get(M, 3)").unwrap(),
            Num::Int(3),
            "unbound: the default"
        );
        assert_eq!(ev("get(M, N * 2) + 1").unwrap(), Num::Int(21));
        assert_eq!(ev("get(X, 1)").unwrap(), Num::Float(0.5));
        // A list param, or a list default, in a list function.
        assert_eq!(ev("max(get(L, [N]))").unwrap(), Num::Float(7.0));
        assert_eq!(ev("max(get(lens, [N]))").unwrap(), Num::Int(10));
        assert_eq!(ev("len(get(lens, [N, H]))").unwrap(), Num::Int(2));
        assert_eq!(
            ev("sum(get(lens, get(more, [1, 2])))").unwrap(),
            Num::Int(3)
        );
        // The default is evaluated only when used.
        assert_eq!(ev("get(N, 1 / 0)").unwrap(), Num::Int(10));
        assert!(matches!(
            ev("get(M, 1 / 0)"),
            Err(ExprError::DivisionByZero(_))
        ));
        // A bound param keeps its type's errors.
        assert!(matches!(
            ev("get(DT, 1)"),
            Err(ExprError::NotANumber { .. })
        ));
        assert!(matches!(
            ev("get(L, 1)"),
            Err(ExprError::UnindexedList { .. })
        ));
        assert!(matches!(
            ev("get(M, [1])"),
            Err(ExprError::ListNotANumber(_))
        ));
        // Only a name comes first, and exactly two arguments.
        for bad in ["get(N + 1, 2)", "get(L[0], 2)", "get(2, 3)"] {
            assert!(
                matches!(Expr::parse(bad), Err(ExprError::Syntax { .. })),
                "{bad}: {:?}",
                Expr::parse(bad)
            );
        }
        assert!(matches!(
            Expr::parse("get(N)"),
            Err(ExprError::Arity { .. })
        ));
        assert!(matches!(
            Expr::parse("get(N, 1, 2)"),
            Err(ExprError::Arity { .. })
        ));
        // `get`'s name counts as read (the derived order check uses it).
        let e = Expr::parse("get(A, max(get(B, [C])))").unwrap();
        assert_eq!(e.params(), ["A", "B", "C"]);
        assert_eq!(e.to_string(), "get(A, max(get(B, [C])))");
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            "",
            "  ",
            "N +",
            "N ** 2",
            "(N",
            "N)",
            "N H",
            "2N",
            "N $ 2",
            "L[1",
            "min(N,",
            "1e",
            "99999999999999999999",
        ] {
            assert!(
                matches!(Expr::parse(bad), Err(ExprError::Syntax { .. })),
                "{bad:?}: {:?}",
                Expr::parse(bad)
            );
        }
        let deep = format!("{}N{}", "(".repeat(200), ")".repeat(200));
        assert!(Expr::parse(&deep).is_err());
        let neg = format!("{}N", "-".repeat(200));
        assert!(Expr::parse(&neg).is_err());
    }

    /// Issue 27, cause 7: `N+0+0...` of ~20k terms overflowed the stack
    /// (the depth limit counted only parentheses and unary minus, while the
    /// left-folded sum is a chain as deep as it has terms).
    #[test]
    fn twenty_thousand_terms_are_refused_not_a_stack_overflow() {
        let long = format!("N{}", "+0".repeat(20_000));
        let e = Expr::parse(&long).unwrap_err();
        assert!(
            matches!(&e, ExprError::TooLarge { limit, .. } if *limit == MAX_TREE_DEPTH),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("too large"), "{msg}");
        assert!(msg.len() < 200, "the message quotes an excerpt: {msg}");
        // A product chain and a chain of unary minus over names are trees
        // just as deep.
        let product = format!("N{}", "*1".repeat(20_000));
        assert!(matches!(
            Expr::parse(&product),
            Err(ExprError::TooLarge { .. })
        ));
        // Wide and shallow: past the node limit.
        let wide = format!("max(N{})", ", 1".repeat(MAX_NODES));
        let e = Expr::parse(&wide).unwrap_err();
        assert!(
            matches!(&e, ExprError::TooLarge { limit, .. } if *limit == MAX_NODES),
            "{e:?}"
        );
    }

    #[test]
    fn long_but_reasonable_expressions_still_work() {
        let sum = format!("N{}", " + 1".repeat(400));
        assert_eq!(ev(&sum).unwrap(), Num::Int(410));
        let wide = format!("max(N{})", ", H".repeat(1000));
        assert_eq!(ev(&wide).unwrap(), Num::Int(10));
        let nested = format!("{}N{}", "(N + ".repeat(60), ")".repeat(60));
        assert_eq!(ev(&nested).unwrap(), Num::Int(610));
        // Right at the limit: it parses, evaluates, prints and collects its
        // params within a test thread's stack (a debug build's frames).
        let at_limit = format!("N{}", "+H".repeat(MAX_TREE_DEPTH / 2));
        let e = Expr::parse(&at_limit).unwrap();
        assert_eq!(e.eval(&params()).unwrap(), Num::Int(10 + 4 * 256));
        assert!(e.to_string().len() > at_limit.len());
        assert_eq!(e.params(), ["N", "H"]);
        let past = format!("N{}", "+H".repeat(MAX_TREE_DEPTH));
        assert!(matches!(
            Expr::parse(&past),
            Err(ExprError::TooLarge { .. })
        ));
        let mut chain = Expr::Param("N".to_string());
        for _ in 1..MAX_TREE_DEPTH {
            chain = Expr::Bin(Op::Add, Box::new(chain), Box::new(Expr::Int(1)));
        }
        assert_eq!(chain.eval(&params()).unwrap(), Num::Int(10 + 511));
        assert!(!chain.to_string().is_empty());
    }

    #[test]
    fn a_hand_built_deep_tree_is_an_evaluation_error_not_a_stack_overflow() {
        let mut e = Expr::Param("N".to_string());
        for _ in 0..(MAX_TREE_DEPTH + 10) {
            e = Expr::Neg(Box::new(e));
        }
        assert!(matches!(e.eval(&params()), Err(ExprError::TooLarge { .. })));
    }

    #[test]
    fn params_are_collected_once() {
        let e = Expr::parse("N * H + ceil_div(N, L[H])").unwrap();
        assert_eq!(e.params(), ["N", "H", "L"]);
    }

    #[test]
    fn values_serialise_as_before() {
        // Integer params are plain JSON numbers, as when params were `i64`.
        let p: Params = [("N".to_string(), Value::Int(16384))].into_iter().collect();
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"N":16384}"#);
        let v: Value = toml::from_str::<BTreeMap<String, Value>>("a = [1, 2.5]\nb = \"f16\"")
            .unwrap()
            .remove("a")
            .unwrap();
        assert_eq!(v, Value::List(vec![Value::Int(1), Value::Float(2.5)]));
    }
}
