//! Card lists: `0`, `0-7`, `0,2,5`, `0,2-4,7`.

use std::fmt;
use std::str::FromStr;

use crate::error::DeviceError;

/// Largest card id accepted; guards against `0-4000000000` typos.
const MAX_CARD_ID: u32 = 65_535;

/// An ordered, duplicate-free, non-empty list of card ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceList(Vec<u32>);

impl DeviceList {
    /// Resolves the list to use: `flag` (`--device`) if given, else
    /// `scene_devices` (the `SCENE_DEVICES` variable), else `task_device`
    /// (`TASK_DEVICE`), else card `0`. A bad value from a variable says
    /// which variable held it. The caller passes a variable as `None` when
    /// it is unset; a set but empty variable is an empty (invalid) list.
    pub fn resolve(
        flag: Option<&str>,
        scene_devices: Option<&str>,
        task_device: Option<&str>,
    ) -> Result<DeviceList, DeviceError> {
        if let Some(s) = flag {
            return s.parse();
        }
        for (var, value) in [
            ("SCENE_DEVICES", scene_devices),
            ("TASK_DEVICE", task_device),
        ] {
            if let Some(v) = value {
                return v.parse().map_err(|e| match e {
                    DeviceError::InvalidList { input, reason } => DeviceError::InvalidList {
                        input,
                        reason: format!("{reason} (from ${var})"),
                    },
                    e => e,
                });
            }
        }
        Ok(DeviceList(vec![0]))
    }

    pub fn ids(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a list has at least one card.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
}

fn parse_id(s: &str, input: &str) -> Result<u32, DeviceError> {
    let bad = |reason: String| DeviceError::InvalidList {
        input: input.to_owned(),
        reason,
    };
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!(
            "`{s}` is not a card id (expected a non-negative integer)"
        )));
    }
    match s.parse::<u32>() {
        Ok(id) if id <= MAX_CARD_ID => Ok(id),
        _ => Err(bad(format!("card id `{s}` is larger than {MAX_CARD_ID}"))),
    }
}

impl FromStr for DeviceList {
    type Err = DeviceError;

    fn from_str(input: &str) -> Result<DeviceList, DeviceError> {
        let bad = |reason: String| DeviceError::InvalidList {
            input: input.to_owned(),
            reason,
        };
        if input.trim().is_empty() {
            return Err(bad(
                "empty list (expected e.g. `0`, `0-7` or `0,2-4,7`)".into()
            ));
        }
        let mut ids = Vec::new();
        for (n, item) in input.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                return Err(bad(format!("item {} is empty", n + 1)));
            }
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (parse_id(a.trim(), input)?, parse_id(b.trim(), input)?);
                    if a > b {
                        return Err(bad(format!("range `{item}` is reversed (write `{b}-{a}`)")));
                    }
                    ids.extend(a..=b);
                }
                None => ids.push(parse_id(item, input)?),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for &id in &ids {
            if !seen.insert(id) {
                return Err(bad(format!("card {id} is listed twice")));
            }
        }
        Ok(DeviceList(ids))
    }
}

impl fmt::Display for DeviceList {
    /// Compact form: runs of consecutive ascending ids become `a-b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let ids = &self.0;
        while i < ids.len() {
            let mut j = i;
            while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
                j += 1;
            }
            if i > 0 {
                f.write_str(",")?;
            }
            match j - i {
                0 => write!(f, "{}", ids[i])?,
                1 => write!(f, "{},{}", ids[i], ids[j])?,
                _ => write!(f, "{}-{}", ids[i], ids[j])?,
            }
            i = j + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good() {
        for (s, ids, shown) in [
            ("0", vec![0], "0"),
            ("0-7", (0..8).collect(), "0-7"),
            ("0,2,5", vec![0, 2, 5], "0,2,5"),
            ("0,2-4,7", vec![0, 2, 3, 4, 7], "0,2-4,7"),
            (" 3 , 1-2 ", vec![3, 1, 2], "3,1,2"),
            ("5-5", vec![5], "5"),
            ("4,5", vec![4, 5], "4,5"),
        ] {
            let l: DeviceList = s.parse().unwrap();
            assert_eq!(l.ids(), &ids[..], "{s}");
            assert_eq!(l.to_string(), shown, "{s}");
            assert_eq!(l.to_string().parse::<DeviceList>().unwrap(), l);
        }
    }

    #[test]
    fn bad() {
        for (s, needle) in [
            ("", "empty"),
            ("  ", "empty"),
            ("4-2", "reversed"),
            ("0,0", "twice"),
            ("0-3,2", "twice"),
            ("0,,1", "item 2 is empty"),
            ("1,", "item 2 is empty"),
            ("a", "`a` is not a card id"),
            ("-1", "is not a card id"),
            ("1-", "is not a card id"),
            ("1-2-3", "is not a card id"),
            ("0x1", "not a card id"),
            ("99999999999", "larger"),
        ] {
            let e = s.parse::<DeviceList>().unwrap_err().to_string();
            assert!(e.contains(needle), "{s:?}: {e}");
            assert!(e.contains(&format!("`{s}`")), "{s:?}: {e}");
        }
    }

    #[test]
    fn resolve_precedence() {
        let r = |f, s, t| DeviceList::resolve(f, s, t).map(|l| l.to_string());
        assert_eq!(r(None, None, None).unwrap(), "0");
        assert_eq!(r(None, None, Some("5")).unwrap(), "5");
        assert_eq!(r(None, Some("1-3"), Some("5")).unwrap(), "1-3");
        assert_eq!(r(Some("0,2-4,7"), Some("1"), Some("5")).unwrap(), "0,2-4,7");
        // A bad flag is reported as the flag's value, with no variable named.
        let e = r(Some("x"), Some("1"), None).unwrap_err().to_string();
        assert!(e.contains("`x`") && !e.contains('$'), "{e}");
    }

    #[test]
    fn resolve_names_the_variable_with_a_bad_value() {
        let e = DeviceList::resolve(None, Some("3-1"), Some("5"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reversed") && e.contains("(from $SCENE_DEVICES)"),
            "{e}"
        );
        let e = DeviceList::resolve(None, None, Some("a"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`a`") && e.contains("(from $TASK_DEVICE)"),
            "{e}"
        );
        // Set but empty is a value, as it always was: an empty list.
        let e = DeviceList::resolve(None, Some(""), Some("5"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("empty list") && e.contains("$SCENE_DEVICES"),
            "{e}"
        );
    }
}
