//! The typed walk of `cost:`, the price table (issue 40, DESIGN §18 "Cost and deadlines"). A
//! child of the schema walk, so it shares its `Walker`.
//!
//! A price is read as the decimal the user wrote, never through a float: `0.05` is exactly
//! five hundredths (the YAML parser's number is written back in its shortest form, which is
//! the text written for any price of up to fifteen digits; a string `"0.05"` is read as is).

use super::{Sp, Walker};
use crate::config::raw::{Node, Value};
use crate::cost::{CostTable, Money, MoneyError};

/// Keys allowed in `cost:`.
pub(crate) const COST_KEYS: &[&str] = &["cpu_hour", "gib_hour", "node_hour", "currency"];

const PRICE_HELP: &str = "write a price as a decimal number of the currency, e.g. `cpu_hour: 0.05` (at most 9 decimal places)";

impl Walker<'_, '_> {
    /// `cost: {cpu_hour, gib_hour, node_hour: {PARTITION: price}, currency}`.
    pub(super) fn cost(&mut self, node: &Node) -> Option<Sp<CostTable>> {
        if !matches!(node.value, Value::Map(_)) {
            self.wrong_type(node, "`cost`", "a mapping")
                .hint("write e.g. `cost: {cpu_hour: 0.05, gib_hour: 0.01, currency: EUR}`");
            return None;
        }
        let mut table = CostTable::default();
        let n_errors = self.diagnostics.len();
        let (entries, _) = self.entries(node, "in `cost`", COST_KEYS, &[]);
        for (key, value) in entries {
            match key {
                "cpu_hour" => table.cpu_hour = self.price(value, "`cost.cpu_hour`"),
                "gib_hour" => table.gib_hour = self.price(value, "`cost.gib_hour`"),
                "node_hour" => table.node_hour = self.node_hours(value),
                "currency" => {
                    table.currency = self
                        .non_empty_string(value, "`cost.currency`")
                        .map(|currency| currency.value);
                }
                _ => {}
            }
        }
        if self.diagnostics.len() > n_errors {
            return None;
        }
        if !table.prices_anything() {
            self.error(
                "bad-value",
                node.loc,
                "`cost` sets no price: nothing would be priced".to_owned(),
            )
            .hint(
                "set `cpu_hour`, `gib_hour` or `node_hour: {PARTITION: price}`, or remove `cost`",
            );
            return None;
        }
        Some(Sp {
            value: table,
            loc: node.loc,
        })
    }

    /// `node_hour: {PARTITION: price, ...}`: a Slurm partition's price of one node for one hour.
    fn node_hours(&mut self, node: &Node) -> std::collections::BTreeMap<String, Money> {
        let mut prices = std::collections::BTreeMap::new();
        let Value::Map(map) = &node.value else {
            self.wrong_type(
                node,
                "`cost.node_hour`",
                "a mapping of Slurm partition to price",
            )
            .hint("write e.g. `node_hour: {gpu: 2.50, batch: 0.80}`");
            return prices;
        };
        for (key, value) in map {
            let partition = match &key.value {
                Value::Str(text) if !text.trim().is_empty() => text.to_string(),
                Value::Int(number) => number.to_string(),
                _ => {
                    self.wrong_type(key, "a partition in `cost.node_hour`", "a name");
                    continue;
                }
            };
            if prices.contains_key(&partition) {
                self.error(
                    "duplicate-key",
                    key.loc,
                    format!("partition `{partition}` is priced twice in `cost.node_hour`"),
                )
                .hint("keep one price per partition");
                continue;
            }
            let what = format!("the node-hour price of partition `{partition}`");
            if let Some(price) = self.price(value, &what) {
                prices.insert(partition, price);
            }
        }
        prices
    }

    /// A price: a non-negative decimal number (or the same as a string).
    fn price(&mut self, node: &Node, what: &str) -> Option<Money> {
        let text = match &node.value {
            Value::Int(number) => number.to_string(),
            // Rust prints an f64 in its shortest round-trip form: the decimal written.
            Value::Float(number) if number.is_finite() => number.to_string(),
            Value::Str(text) => text.trim().to_owned(),
            _ => {
                self.wrong_type(node, what, "a decimal number")
                    .hint(PRICE_HELP);
                return None;
            }
        };
        match text.parse::<Money>() {
            Ok(price) if price.nanos() < 0 => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("{what} must not be negative, found {text}"),
                )
                .hint(PRICE_HELP);
                None
            }
            Ok(price) => Some(price),
            Err(error) => {
                let message = match error {
                    MoneyError::TooPrecise(_) => {
                        format!("{what} has more than 9 decimal places: {text}")
                    }
                    _ => format!("{what} is not a decimal number: `{text}`"),
                };
                self.error("bad-value", node.loc, message).hint(PRICE_HELP);
                None
            }
        }
    }
}

/// The JSON Schema of `cost:` (for `describe.rs`).
pub(crate) fn json_schema() -> serde_json::Value {
    let price = serde_json::json!({"anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": "^\\s*[0-9]*(\\.[0-9]{1,9})?\\s*$"}
    ]});
    serde_json::json!({
        "type": "object",
        "properties": {
            "cpu_hour": price,
            "gib_hour": price,
            "node_hour": {"type": "object", "additionalProperties": price},
            "currency": {"type": "string", "minLength": 1, "pattern": "\\S"}
        },
        "additionalProperties": false,
        "minProperties": 1
    })
}

#[cfg(test)]
mod tests;
