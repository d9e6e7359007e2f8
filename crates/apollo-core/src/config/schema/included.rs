//! What an included config file may not set: the keys that only the main file sets.

use super::Walker;
use crate::config::raw::Node;

impl Walker<'_, '_> {
    /// Whether `key` may be set only by the main config file (an included one setting it is
    /// reported).
    pub(super) fn main_file_only(&mut self, key: &str, value: &Node) -> bool {
        let main_only = matches!(
            key,
            "name"
                | "id"
                | "max_parallel"
                | "durability"
                | "sync_interval"
                | "journal_segment_size"
                | "deadline"
        );
        if main_only {
            self.error(
                "unknown-key",
                value.loc,
                format!("`{key}` is set by the main config file, not an included one"),
            )
            .hint("move it to the file that includes this one");
        }
        main_only
    }
}
