//! The typed walk of `executor:`, `resources:` and the local capacity (`max_cpus:`,
//! `max_memory:`): DESIGN §13. A child of the schema walk, so it shares its `Walker`.

use super::{Sp, Walker};
use crate::config::raw::{Node, Value};
use crate::model::{ExecutorKind, SlurmResources};

/// Keys allowed in `resources:`.
pub(crate) const RESOURCES_KEYS: &[&str] = &["cpus", "memory", "gpus", "slurm"];
/// Keys allowed in `resources: {slurm: ...}`.
pub(crate) const SLURM_KEYS: &[&str] = &[
    "partition",
    "account",
    "qos",
    "extra_args",
    "on_stop",
    "queue_timeout",
];
/// The executors a unit may name.
const EXECUTORS: &[&str] = &["local", "slurm"];
const MEMORY_HELP: &str =
    "write memory with a unit: `512M`, `4G`, `1T` (K, M, G, T are powers of 1024)";

/// `resources:` as written: each field stays optional so a unit's value can be merged over
/// the `defaults:` one field by field.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ResourcesSpec {
    pub(crate) cpus: Option<Sp<u32>>,
    pub(crate) memory: Option<Sp<u64>>,
    pub(crate) gpus: Option<Sp<u32>>,
    pub(crate) partition: Option<String>,
    pub(crate) account: Option<String>,
    pub(crate) qos: Option<String>,
    pub(crate) extra_args: Option<Vec<String>>,
    /// `on_stop: detach` (`Some(true)`) or `cancel`.
    pub(crate) detach_on_stop: Option<bool>,
    /// `queue_timeout:`; `Some(None)` is an explicit `none` (overriding `defaults`).
    pub(crate) queue_timeout: Option<Option<std::time::Duration>>,
}

impl ResourcesSpec {
    /// `self` over `defaults`, field by field (a unit's `cpus` keeps the default `memory`).
    pub(crate) fn over(&self, defaults: &ResourcesSpec) -> ResourcesSpec {
        ResourcesSpec {
            cpus: self.cpus.clone().or_else(|| defaults.cpus.clone()),
            memory: self.memory.clone().or_else(|| defaults.memory.clone()),
            gpus: self.gpus.clone().or_else(|| defaults.gpus.clone()),
            partition: self
                .partition
                .clone()
                .or_else(|| defaults.partition.clone()),
            account: self.account.clone().or_else(|| defaults.account.clone()),
            qos: self.qos.clone().or_else(|| defaults.qos.clone()),
            extra_args: self
                .extra_args
                .clone()
                .or_else(|| defaults.extra_args.clone()),
            detach_on_stop: self.detach_on_stop.or(defaults.detach_on_stop),
            queue_timeout: self.queue_timeout.or(defaults.queue_timeout),
        }
    }

    /// The model's resources.
    pub(crate) fn resolve(&self) -> crate::model::Resources {
        crate::model::Resources {
            cpus: self.cpus.as_ref().map(|cpus| cpus.value),
            memory: self.memory.as_ref().map(|memory| memory.value),
            gpus: self.gpus.as_ref().map(|gpus| gpus.value),
            slurm: SlurmResources {
                partition: self.partition.clone(),
                account: self.account.clone(),
                qos: self.qos.clone(),
                extra_args: self.extra_args.clone().unwrap_or_default(),
                detach_on_stop: self.detach_on_stop.unwrap_or(false),
            }
            .shared(),
        }
    }
}

/// The JSON Schema of `resources:` (from `describe.rs`'s `shape_schema`).
pub(crate) fn json_schema() -> serde_json::Value {
    use crate::config::describe::{Shape, shape_schema};
    serde_json::json!({"anyOf": [
        {"type": "object",
         "properties": {
            "cpus": shape_schema(Shape::Count { minimum: 1 }),
            "memory": shape_schema(Shape::Memory),
            "gpus": shape_schema(Shape::Count { minimum: 0 }),
            "slurm": {"type": "object",
                "properties": {
                    "partition": shape_schema(Shape::Text),
                    "account": shape_schema(Shape::Text),
                    "qos": shape_schema(Shape::Text),
                    "extra_args": shape_schema(Shape::List),
                    "on_stop": {"enum": ["cancel", "detach"]},
                    "queue_timeout": shape_schema(Shape::Timeout)
                },
                "additionalProperties": false}
         },
         "additionalProperties": false},
        {"type": "null"}
    ]})
}

/// Parses `512M`, `4G`, `1.5G`, `64GiB`, `100K`, `1T` into bytes (powers of 1024).
pub(crate) fn parse_memory(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let number: f64 = number.parse().ok()?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let scale: u64 = match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    let bytes = number * scale as f64;
    (bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

impl Walker<'_, '_> {
    /// `executor: local | slurm`.
    pub(super) fn executor(&mut self, node: &Node, context: &str) -> Option<Sp<ExecutorKind>> {
        let kind = match &node.value {
            Value::Str(text) if text == "local" => ExecutorKind::Local,
            Value::Str(text) if text == "slurm" => ExecutorKind::Slurm,
            Value::Str(text) => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("unknown executor `{text}` {context}"),
                )
                .hint(format!("the executors are: {}", quoted_list(EXECUTORS)));
                return None;
            }
            _ => {
                self.wrong_type(node, &format!("`executor` {context}"), "a string")
                    .hint("write `executor: local` or `executor: slurm`");
                return None;
            }
        };
        Some(Sp {
            value: kind,
            loc: node.loc,
        })
    }

    /// `resources: {cpus, memory, gpus, slurm: {partition, account, qos, extra_args}}`.
    pub(super) fn resources(&mut self, node: &Node, context: &str) -> Option<Sp<ResourcesSpec>> {
        match node.value {
            Value::Map(_) => {}
            Value::Null => return None,
            _ => {
                self.wrong_type(node, &format!("`resources` {context}"), "a mapping")
                    .hint("for example `resources: {cpus: 2, memory: 4G}`");
                return None;
            }
        }
        let mut spec = ResourcesSpec::default();
        let inner = format!("in `resources` {context}");
        for (key, value) in self.entries(node, &inner, RESOURCES_KEYS, SLURM_KEYS).0 {
            match key {
                "cpus" => spec.cpus = self.count(value, &format!("`cpus` {inner}")),
                "gpus" => spec.gpus = self.count(value, &format!("`gpus` {inner}")),
                "memory" => spec.memory = self.memory(value, &format!("`memory` {inner}")),
                "slurm" => self.slurm(value, &mut spec, context),
                _ => {}
            }
        }
        Some(Sp {
            value: spec,
            loc: node.loc,
        })
    }

    fn slurm(&mut self, node: &Node, spec: &mut ResourcesSpec, context: &str) {
        match node.value {
            Value::Map(_) => {}
            Value::Null => return,
            _ => {
                self.wrong_type(node, &format!("`slurm` {context}"), "a mapping")
                    .hint("for example `slurm: {partition: long, account: lab}`");
                return;
            }
        }
        let inner = format!("in `slurm` {context}");
        for (key, value) in self.entries(node, &inner, SLURM_KEYS, RESOURCES_KEYS).0 {
            let what = format!("`{key}` {inner}");
            match key {
                "partition" => {
                    spec.partition = self.non_empty_string(value, &what).map(|s| s.value)
                }
                "account" => spec.account = self.non_empty_string(value, &what).map(|s| s.value),
                "qos" => spec.qos = self.non_empty_string(value, &what).map(|s| s.value),
                "on_stop" => match &value.value {
                    Value::Str(text) if text == "cancel" => spec.detach_on_stop = Some(false),
                    Value::Str(text) if text == "detach" => spec.detach_on_stop = Some(true),
                    _ => {
                        self.error(
                            "bad-value",
                            value.loc,
                            format!("{what} must be `cancel` or `detach`"),
                        )
                        .hint("`cancel` (the default) cancels the job when apollo is stopped; `detach` leaves it running for the next resume");
                    }
                },
                "queue_timeout" => spec.queue_timeout = self.queue_timeout(value, &inner),
                "extra_args" => {
                    spec.extra_args = Some(
                        self.string_list(value, &what)
                            .into_iter()
                            .map(|arg| arg.value)
                            .collect(),
                    );
                }
                _ => {}
            }
        }
    }

    /// A whole number of at least 1 (`cpus`, `gpus`, `max_cpus`).
    pub(super) fn count(&mut self, node: &Node, what: &str) -> Option<Sp<u32>> {
        match node.value {
            Value::Int(count) if count >= 1 => match u32::try_from(count) {
                Ok(count) => Some(Sp {
                    value: count,
                    loc: node.loc,
                }),
                Err(_) => {
                    self.error(
                        "bad-value",
                        node.loc,
                        format!("{what} is too large: {count}"),
                    );
                    None
                }
            },
            Value::Int(count) => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("{what} must be at least 1, found {count}"),
                )
                .hint("remove the key to use the default");
                None
            }
            _ => {
                self.wrong_type(node, what, "a whole number")
                    .hint("for example `cpus: 2`");
                None
            }
        }
    }

    /// An amount of memory with a unit (`4G`), in bytes.
    pub(super) fn memory(&mut self, node: &Node, what: &str) -> Option<Sp<u64>> {
        match &node.value {
            Value::Str(text) => match parse_memory(text) {
                Some(bytes) => Some(Sp {
                    value: bytes,
                    loc: node.loc,
                }),
                None => {
                    self.error(
                        "bad-value",
                        node.loc,
                        format!("invalid amount of memory `{text}` for {what}"),
                    )
                    .hint(MEMORY_HELP);
                    None
                }
            },
            Value::Int(number) => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("{what} has no unit: `{number}`"),
                )
                .hint(MEMORY_HELP);
                None
            }
            _ => {
                self.wrong_type(node, what, "an amount of memory")
                    .hint(MEMORY_HELP);
                None
            }
        }
    }
}

pub(super) fn quoted_list(keys: &[&str]) -> String {
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn memory_amounts_are_powers_of_1024() {
        assert_eq!(parse_memory("512M"), Some(512 << 20));
        assert_eq!(parse_memory("4G"), Some(4 << 30));
        assert_eq!(parse_memory("4GiB"), Some(4 << 30));
        assert_eq!(parse_memory("4gb"), Some(4 << 30));
        assert_eq!(parse_memory("1.5G"), Some(3 << 29));
        assert_eq!(parse_memory("100K"), Some(100 << 10));
        assert_eq!(parse_memory("1T"), Some(1 << 40));
    }

    #[test]
    fn memory_without_a_unit_or_with_garbage_is_refused() {
        for text in ["4", "", "G", "4X", "-1G", "0G", "1e400G", "4 G B"] {
            assert_eq!(parse_memory(text), None, "{text}");
        }
    }
}
