//! The typed walk of `durability:` (DESIGN §18 "Durability modes"). A child of the schema
//! walk, so it shares its `Walker`.

use super::{Sp, Walker};
use crate::config::raw::{Node, Value};

impl Walker<'_, '_> {
    /// `durability: fsync | batched`. `none` is for tests and benchmarks, never a pipeline's.
    pub(super) fn durability(&mut self, node: &Node) -> Option<Sp<crate::journal::Durability>> {
        use crate::journal::Durability;
        let value = match &node.value {
            Value::Str(text) if text == "fsync" => Durability::Fsync,
            Value::Str(text) if text == "batched" => Durability::Batched,
            Value::Str(text) if text == "none" => {
                self.error(
                    "bad-value",
                    node.loc,
                    "`durability: none` is not a pipeline's setting: a power loss or crash may lose acknowledged records".to_owned(),
                )
                .hint("for tests and benchmarks, pass `--durability none` to `apollo run`; else write `durability: batched`");
                return None;
            }
            Value::Str(text) => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("unknown durability `{text}`"),
                )
                .hint("write `durability: fsync` (the default) or `durability: batched`");
                return None;
            }
            _ => {
                self.wrong_type(node, "`durability`", "a string")
                    .hint("write `durability: fsync` (the default) or `durability: batched`");
                return None;
            }
        };
        Some(Sp {
            value,
            loc: node.loc,
        })
    }
}
