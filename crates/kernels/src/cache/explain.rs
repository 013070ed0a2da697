//! Why a unit was compiled instead of taken from the cache.

use std::collections::BTreeMap;
use std::fmt;

/// One key input that differs from the unit's last entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputChange {
    /// e.g. `file:kernels/add.c`, `defines`, `compiler.digest`.
    pub field: String,
    /// `None`: the field is new (e.g. a header that was not included before).
    pub before: Option<String>,
    /// `None`: the field is gone.
    pub after: Option<String>,
}

impl fmt::Display for InputChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.before, &self.after) {
            (None, Some(after)) => write!(f, "{} added ({})", self.field, short(after)),
            (Some(before), None) => write!(f, "{} removed (was {})", self.field, short(before)),
            (Some(before), Some(after)) => match list_diff(before, after) {
                Some(diff) => write!(f, "{} changed: {diff}", self.field),
                None => write!(
                    f,
                    "{} changed: {} -> {}",
                    self.field,
                    short(before),
                    short(after)
                ),
            },
            (None, None) => write!(f, "{}", self.field),
        }
    }
}

/// Digests are shortened and multi-line values (`--version`) cut to their
/// first line: enough to see what moved without flooding the output.
fn short(value: &str) -> String {
    let first = value.lines().next().unwrap_or("");
    let is_digest = first.len() == 64 && first.bytes().all(|b| b.is_ascii_hexdigit());
    if is_digest {
        first[..12].to_owned()
    } else if first.len() > 80 {
        format!("{}...", &first[..first.floor_char_boundary(77)])
    } else if value.lines().nth(1).is_some() {
        format!("{first} ...")
    } else {
        first.to_owned()
    }
}

/// `+added -removed` for JSON-array values (flag lists, defines, edges).
fn list_diff(before: &str, after: &str) -> Option<String> {
    let b: Vec<String> = serde_json::from_str(before).ok()?;
    let a: Vec<String> = serde_json::from_str(after).ok()?;
    let mut parts: Vec<String> = a
        .iter()
        .filter(|x| !b.contains(x))
        .map(|x| format!("+{x}"))
        .collect();
    parts.extend(b.iter().filter(|x| !a.contains(x)).map(|x| format!("-{x}")));
    if parts.is_empty() {
        parts.push(format!("order {before} -> {after}"));
    }
    Some(parts.join(" "))
}

/// Why a unit was compiled. Set on [`crate::UnitReport::miss`] for every
/// unit that ran the compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissReason {
    /// No persistent cache is configured (or it is unusable).
    CacheDisabled,
    /// The cache has never held an entry for this unit (same kind,
    /// platform, core type and source path).
    NoPreviousEntry,
    /// The unit's last entry was built from different inputs.
    InputsChanged(Vec<InputChange>),
    /// The inputs match the unit's last entry, but that entry is gone
    /// (pruned or cleared).
    Evicted,
    /// An entry with this key existed but failed verification; it was
    /// removed.
    Damaged(String),
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissReason::CacheDisabled => f.write_str("no persistent cache"),
            MissReason::NoPreviousEntry => f.write_str("no entry for this unit before"),
            MissReason::Evicted => {
                f.write_str("inputs unchanged, but the entry was evicted or cleared")
            }
            MissReason::Damaged(why) => write!(f, "cached entry was damaged ({why})"),
            MissReason::InputsChanged(changes) => {
                f.write_str("changed since the last entry: ")?;
                for (i, c) in changes.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

/// The fields that differ between two input sets, in field order.
pub fn diff(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<InputChange> {
    let mut out = Vec::new();
    for (field, b) in before {
        match after.get(field) {
            Some(a) if a == b => {}
            a => out.push(InputChange {
                field: field.clone(),
                before: Some(b.clone()),
                after: a.cloned(),
            }),
        }
    }
    for (field, a) in after {
        if !before.contains_key(field) {
            out.push(InputChange {
                field: field.clone(),
                before: None,
                after: Some(a.clone()),
            });
        }
    }
    out.sort_by(|x, y| x.field.cmp(&y.field));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn names_changed_added_and_removed_fields() {
        let d = "a".repeat(64);
        let e = "b".repeat(64);
        let before = map(&[
            ("file:k.c", &d),
            ("defines", r#"["A=1"]"#),
            ("file:old.h", &d),
        ]);
        let after = map(&[
            ("file:k.c", &e),
            ("defines", r#"["A=2"]"#),
            ("file:new.h", &e),
        ]);
        let changes = diff(&before, &after);
        let text = MissReason::InputsChanged(changes.clone()).to_string();
        assert_eq!(changes.len(), 4, "{text}");
        assert!(text.contains("defines changed: +A=2 -A=1"), "{text}");
        assert!(
            text.contains("file:k.c changed: aaaaaaaaaaaa -> bbbbbbbbbbbb"),
            "{text}"
        );
        assert!(text.contains("file:new.h added"), "{text}");
        assert!(text.contains("file:old.h removed"), "{text}");
        assert!(diff(&before, &before).is_empty());
    }
}
