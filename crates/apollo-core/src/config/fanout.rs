//! Fan-out (`foreach:`, DESIGN §14, §17): one unit definition → instances `name[key]`.
//!
//! `foreach` is a list (`[eu, us]`), a list param (`${params.regions}`), a glob
//! (`data/raw/*.csv`: one instance per matching path, `${item}` the path relative to the
//! config's folder, the key its file name), or a mapping of those (`{region: [eu, us], tier:
//! [a, b]}`), which expands to the product in the order written: `name[eu,a]`, with
//! `${item.region}`. A key is the item itself when it is a safe name (`[A-Za-z0-9_.-]+`),
//! else a slug of it and a short hash, so an instance name is always safe to print and, in
//! its folder form ([`crate::model::unit_folder_name`]), to use as a path component.

use std::path::Path;

use super::raw::{Node, Value};
use super::schema::{Sp, Walker};

/// A `foreach:` as written.
#[derive(Debug, Clone)]
pub(crate) enum Foreach {
    /// A list of items, or a string (a list param or a glob).
    Single(Axis),
    /// A mapping: axis name → its items; expands to the product.
    Product(Vec<(Sp<String>, Axis)>),
}

/// One axis of a fan-out.
#[derive(Debug, Clone)]
pub(crate) enum Axis {
    List(Vec<Sp<String>>),
    /// `${params.list}`, or a glob.
    Text(Sp<String>),
}

/// What an expanded unit is an instance of.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    /// The template's name (`load`).
    pub(crate) base: String,
}

impl Walker<'_, '_> {
    /// `allow_empty` is about a `foreach`: on a unit without one it is an error.
    pub(super) fn allow_empty_needs_foreach(
        &mut self,
        unit: &super::schema::UnitSpec,
        label: &str,
    ) {
        if let (Some(allow_empty), None) = (&unit.allow_empty, &unit.foreach) {
            self.error(
                "bad-value",
                allow_empty.loc,
                format!("`allow_empty` of {label} is about a `foreach`, and it has none"),
            )
            .hint("remove `allow_empty`, or add the `foreach` whose glob may match no file");
        }
    }

    pub(super) fn foreach(&mut self, node: &Node, label: &str) -> Option<Sp<Foreach>> {
        let what = format!("`foreach` of {label}");
        let foreach = match &node.value {
            Value::Map(map) if !map.is_empty() => {
                let mut axes: Vec<(Sp<String>, Axis)> = Vec::with_capacity(map.len());
                for (key, value) in map {
                    let name = self.non_empty_string(key, &format!("an axis name in {what}"))?;
                    if !super::params::is_valid_param_name(&name.value) {
                        self.error(
                            "invalid-name",
                            key.loc,
                            format!("`{}` is not a valid axis name in {what}", name.value),
                        )
                        .hint("an axis name is letters, digits and `_` (it is written `${item.NAME}`)");
                        return None;
                    }
                    if axes.iter().any(|(seen, _)| seen.value == name.value) {
                        self.error(
                            "duplicate-key",
                            key.loc,
                            format!("axis `{}` is listed twice in {what}", name.value),
                        );
                        return None;
                    }
                    let axis = self.axis(value, &format!("axis `{}` of {what}", name.value))?;
                    axes.push((name, axis));
                }
                Foreach::Product(axes)
            }
            _ => Foreach::Single(self.axis(node, &what)?),
        };
        Some(Sp {
            value: foreach,
            loc: node.loc,
        })
    }

    fn axis(&mut self, node: &Node, what: &str) -> Option<Axis> {
        match &node.value {
            Value::Seq(_) => Some(Axis::List(self.string_list(node, what))),
            Value::Str(_) => self.non_empty_string(node, what).map(Axis::Text),
            _ => {
                self.wrong_type(node, what, "a list, a list param or a glob")
                    .hint("for example `foreach: [eu, us]`, `foreach: ${params.regions}`, `foreach: data/*.csv` or `foreach: {region: [eu, us], tier: [a, b]}`");
                None
            }
        }
    }
}

/// Whether `key` can be used as it is in an instance name.
pub(crate) fn is_safe_key(key: &str) -> bool {
    !key.is_empty()
        && key != "."
        && key != ".."
        && !key.starts_with('-')
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-'))
}

/// The key of an item: itself when safe, else a slug of it and 8 hex digits of its hash.
pub(crate) fn key_of(item: &str) -> String {
    if is_safe_key(item) {
        return item.to_owned();
    }
    let slug: String = item
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    let slug = slug.trim_start_matches('-');
    let slug = if slug.is_empty() { "item" } else { slug };
    let hash = crate::hash::sha256_hex(item.as_bytes());
    format!("{slug}-{}", &hash[..8])
}

/// The items of a glob, relative to `base_dir` (or absolute when the pattern is), sorted.
pub(crate) fn glob_items(pattern: &str, base_dir: &Path) -> Result<Vec<String>, String> {
    let absolute = Path::new(pattern).is_absolute();
    let full = if absolute {
        pattern.to_owned()
    } else {
        format!(
            "{}/{pattern}",
            glob::Pattern::escape(&base_dir.to_string_lossy())
        )
    };
    let paths = glob::glob(&full).map_err(|error| error.msg.to_owned())?;
    let mut items = Vec::new();
    for path in paths {
        let path = path.map_err(|error| error.to_string())?;
        let shown = if absolute {
            path
        } else {
            path.strip_prefix(base_dir)
                .map(Path::to_path_buf)
                .unwrap_or(path)
        };
        items.push(shown.to_string_lossy().into_owned());
    }
    items.sort();
    Ok(items)
}

/// The key of a glob item: its file name, made safe.
pub(crate) fn glob_key(item: &str) -> String {
    let name = Path::new(item).file_name().map_or_else(
        || item.to_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    key_of(&name)
}

/// An axis name and its items as (key, value) pairs.
pub(crate) type AxisItems = (String, Vec<(String, String)>);

/// The product of the axes' items, in order: each instance's key (`eu,a`) and fields
/// (`region` → `eu`, `tier` → `a`).
pub(crate) fn product(axes: &[AxisItems]) -> Vec<(String, Vec<(String, String)>)> {
    // Each partial combination: its keys so far and its fields so far.
    let mut combinations: Vec<AxisItems> = vec![(String::new(), Vec::new())];
    for (axis, items) in axes {
        let mut next = Vec::with_capacity(combinations.len() * items.len());
        for (keys, fields) in &combinations {
            for (key, value) in items {
                let keys = if keys.is_empty() {
                    key.clone()
                } else {
                    format!("{keys},{key}")
                };
                let mut fields = fields.clone();
                fields.push((axis.clone(), value.clone()));
                next.push((keys, fields));
            }
        }
        combinations = next;
    }
    combinations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_items_get_a_slug_and_a_hash() {
        assert_eq!(key_of("eu"), "eu");
        let key = key_of("eu west/1");
        assert!(key.starts_with("eu_west_1-"), "{key}");
        assert!(is_safe_key(&key));
        assert_ne!(key_of("a b"), key_of("a_b"));
        assert!(is_safe_key(&key_of("")));
        assert!(is_safe_key(&key_of("--x")));
    }

    #[test]
    fn products_follow_the_axis_order() {
        let axes = vec![
            (
                "region".to_owned(),
                vec![
                    ("eu".to_owned(), "eu".to_owned()),
                    ("us".to_owned(), "us".to_owned()),
                ],
            ),
            ("tier".to_owned(), vec![("a".to_owned(), "a".to_owned())]),
        ];
        let keys: Vec<String> = product(&axes).into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["eu,a", "us,a"]);
    }
}
