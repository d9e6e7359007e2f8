//! The typed walk of the limits written as a size or a duration, or `none`: `blob_store_max:`,
//! `log_limit:` (issue 36) and `resources: {slurm: {queue_timeout: ...}}` (issue 36). A child
//! of the schema walk, so it shares its `Walker`.

use std::time::Duration;

use super::{Sp, Walker};
use crate::config::raw::{Node, Value};

/// The smallest `log_limit:`: below it the head and the tail kept would be a few lines.
pub(crate) const MIN_LOG_LIMIT: u64 = 4096;

impl Walker<'_, '_> {
    /// A size, or `none` (`Some(None)`: no limit).
    pub(super) fn size_limit(&mut self, node: &Node, key: &str) -> Option<Sp<Option<u64>>> {
        self.size_or_none(node, key, "at the top level")
    }

    fn size_or_none(&mut self, node: &Node, key: &str, context: &str) -> Option<Sp<Option<u64>>> {
        if matches!(&node.value, Value::Str(text) if text.trim() == "none") {
            return Some(Sp {
                value: None,
                loc: node.loc,
            });
        }
        let size = self.size(node, key, context)?;
        Some(Sp {
            value: Some(size.value),
            loc: size.loc,
        })
    }

    /// `log_limit: 256MiB` or `none`: at least [`MIN_LOG_LIMIT`].
    pub(super) fn log_limit(&mut self, node: &Node, context: &str) -> Option<Sp<Option<u64>>> {
        let limit = self.size_or_none(node, "log_limit", context)?;
        if let Some(bytes) = limit.value
            && bytes < MIN_LOG_LIMIT
        {
            self.error(
                "bad-value",
                limit.loc,
                format!("`log_limit` {context} is {bytes} bytes, less than the smallest, 4KiB"),
            )
            .hint("write a size like `256MiB`, or `log_limit: none` for no limit");
            return None;
        }
        Some(limit)
    }

    /// `queue_timeout: 2h` or `none` (`Some(None)`): how long a Slurm job may stay pending.
    pub(super) fn queue_timeout(&mut self, node: &Node, context: &str) -> Option<Option<Duration>> {
        const HINT: &str = "write a duration like `2h`, or `queue_timeout: none` for no limit";
        match &node.value {
            Value::Str(text) if text.trim() == "none" => return Some(None),
            Value::Null => {
                self.wrong_type(node, &format!("`queue_timeout` {context}"), "a duration")
                    .hint(HINT);
                return None;
            }
            _ => {}
        }
        let limit = self.duration(node, "queue_timeout", context)?;
        if limit.value.is_zero() {
            self.error(
                "bad-value",
                limit.loc,
                format!("`queue_timeout` {context} is zero"),
            )
            .hint(format!(
                "a zero limit would cancel every job before Slurm could start it; {HINT}"
            ));
            return None;
        }
        Some(Some(limit.value))
    }
}
