//! The typed walk of the keys about an attempt's end: `retries`, and (issue 35 item 5)
//! `retry_on_exit`, `retry_max_delay`, `cleanup_timeout` (per unit or in `defaults`) and the
//! top-level `journal_segment_size`. A child of the schema walk, so it shares its `Walker`.

use std::time::Duration;

use super::{Settings, Sp, Walker};
use crate::config::raw::{Node, Value};
use crate::journal::{MAX_SEGMENT_SIZE, MIN_SEGMENT_SIZE};

const EXIT_CODES_HINT: &str = "write the exit codes that are worth another attempt, e.g. `retry_on_exit: [75, 137]` (137: killed by signal 9)";

impl Walker<'_, '_> {
    /// The keys of this module that a unit or `defaults` may set; `false` for any other key.
    pub(super) fn retry_setting(
        &mut self,
        settings: &mut Settings,
        key: &str,
        value: &Node,
        context: &str,
    ) -> bool {
        match key {
            "retry_on_exit" => settings.retry_on_exit = self.exit_codes(value, context),
            "retry_max_delay" => {
                settings.retry_max_delay = self.duration(value, key, context);
            }
            "cleanup_timeout" => settings.cleanup_timeout = self.cleanup_timeout(value, context),
            _ => return false,
        }
        true
    }

    /// `retries:`: extra attempts after a failure, zero or more.
    pub(super) fn retries(&mut self, node: &Node, context: &str) -> Option<Sp<u32>> {
        match node.value {
            Value::Int(count) if count < 0 => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("`retries` {context} must be zero or more, found {count}"),
                )
                .hint("`retries` counts the extra attempts after a failure; use 0 for none");
                None
            }
            Value::Int(count) => match u32::try_from(count) {
                Ok(count) => Some(Sp {
                    value: count,
                    loc: node.loc,
                }),
                Err(_) => {
                    self.error(
                        "bad-value",
                        node.loc,
                        format!("`retries` {context} is too large: {count}"),
                    )
                    .hint(format!("the largest allowed value is {}", u32::MAX));
                    None
                }
            },
            _ => {
                self.wrong_type(node, &format!("`retries` {context}"), "a whole number")
                    .hint("for example `retries: 2`");
                None
            }
        }
    }

    /// `retry_on_exit: [N, ...]`: a non-empty list of exit codes 1–255.
    fn exit_codes(&mut self, node: &Node, context: &str) -> Option<Sp<Vec<i32>>> {
        let Value::Seq(items) = &node.value else {
            self.wrong_type(
                node,
                &format!("`retry_on_exit` {context}"),
                "a list of exit codes",
            )
            .hint(EXIT_CODES_HINT);
            return None;
        };
        if items.is_empty() {
            self.error(
                "bad-value",
                node.loc,
                format!("`retry_on_exit` {context} is empty: no failure would be retried"),
            )
            .hint("remove `retry_on_exit` to retry any failure, or set `retries: 0`");
            return None;
        }
        let mut codes = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match item.value {
                Value::Int(code) if (1..=255).contains(&code) => {
                    let code = i32::try_from(code).unwrap_or_default();
                    if !codes.contains(&code) {
                        codes.push(code);
                    }
                }
                Value::Int(code) => {
                    ok = false;
                    self.error(
                        "bad-value",
                        item.loc,
                        format!("exit code {code} in `retry_on_exit` {context} is not 1 to 255"),
                    )
                    .hint(if code == 0 {
                        "exit 0 is success, never retried"
                    } else {
                        "a process exits with 1 to 255; killed by signal N is 128 + N"
                    });
                }
                _ => {
                    ok = false;
                    self.wrong_type(
                        item,
                        &format!("an item of `retry_on_exit` {context}"),
                        "an exit code",
                    )
                    .hint(EXIT_CODES_HINT);
                }
            }
        }
        ok.then_some(Sp {
            value: codes,
            loc: node.loc,
        })
    }

    /// `cleanup_timeout:`: a duration above zero.
    fn cleanup_timeout(&mut self, node: &Node, context: &str) -> Option<Sp<Duration>> {
        let limit = self.duration(node, "cleanup_timeout", context)?;
        if limit.value.is_zero() {
            self.error(
                "bad-value",
                limit.loc,
                format!("`cleanup_timeout` {context} is zero"),
            )
            .hint("a zero limit would stop every cleanup at once; write a duration like `5m` (the default is 60s)");
            return None;
        }
        Some(limit)
    }

    /// `journal_segment_size:`: a size between [`MIN_SEGMENT_SIZE`] and [`MAX_SEGMENT_SIZE`].
    pub(super) fn segment_size(&mut self, node: &Node) -> Option<Sp<u64>> {
        let size = self.size(node, "journal_segment_size", "at the top level")?;
        if (MIN_SEGMENT_SIZE..=MAX_SEGMENT_SIZE).contains(&size.value) {
            return Some(size);
        }
        let (relation, bound) = if size.value < MIN_SEGMENT_SIZE {
            ("smaller than", MIN_SEGMENT_SIZE)
        } else {
            ("larger than", MAX_SEGMENT_SIZE)
        };
        self.error(
            "bad-value",
            size.loc,
            format!(
                "`journal_segment_size` {} is {relation} {}",
                mib(size.value),
                mib(bound)
            ),
        )
        .hint(format!(
            "write a size from {} (twice the largest record) to {}, e.g. `journal_segment_size: 16MiB`; the default is 64MiB",
            mib(MIN_SEGMENT_SIZE),
            mib(MAX_SEGMENT_SIZE)
        ));
        None
    }
}

/// A size for messages: whole GiB or MiB when it is one, else bytes.
fn mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= 1024 * MIB && bytes.is_multiple_of(1024 * MIB) {
        format!("{}GiB", bytes / (1024 * MIB))
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}
