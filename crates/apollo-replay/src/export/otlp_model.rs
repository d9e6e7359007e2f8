//! The OTLP/JSON shapes `apollo export --format otlp-json` writes: the subset of
//! `opentelemetry.proto.trace.v1.TracesData` a trace of a run needs, field names in lowerCamelCase
//! as OTLP/JSON maps them, ids in hex.

use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TracesData {
    pub(super) resource_spans: Vec<ResourceSpans>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResourceSpans {
    pub(super) resource: Resource,
    pub(super) scope_spans: Vec<ScopeSpans>,
}

#[derive(Serialize)]
pub(super) struct Resource {
    pub(super) attributes: Vec<KeyValue>,
}

#[derive(Serialize)]
pub(super) struct ScopeSpans {
    pub(super) scope: Scope,
    pub(super) spans: Vec<Span>,
}

#[derive(Serialize)]
pub(super) struct Scope {
    pub(super) name: &'static str,
    pub(super) version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Span {
    pub(super) trace_id: String,
    pub(super) span_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) parent_span_id: String,
    pub(super) name: String,
    /// `SPAN_KIND_INTERNAL`.
    pub(super) kind: u8,
    pub(super) start_time_unix_nano: String,
    pub(super) end_time_unix_nano: String,
    pub(super) attributes: Vec<KeyValue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) events: Vec<SpanEvent>,
    pub(super) status: Status,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SpanEvent {
    pub(super) time_unix_nano: String,
    pub(super) name: String,
    pub(super) attributes: Vec<KeyValue>,
}

#[derive(Serialize)]
pub(super) struct Status {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) message: String,
    /// 0 unset, 1 ok, 2 error.
    pub(super) code: u8,
}

pub(super) const UNSET: u8 = 0;
pub(super) const OK: u8 = 1;
pub(super) const ERROR: u8 = 2;

impl Status {
    pub(super) fn new(code: u8, message: Option<String>) -> Self {
        let message = if code == ERROR { message } else { None };
        Self {
            message: message.unwrap_or_default(),
            code,
        }
    }
}

#[derive(Serialize)]
pub(super) struct KeyValue {
    pub(super) key: &'static str,
    pub(super) value: AnyValue,
}

#[derive(Serialize)]
pub(super) enum AnyValue {
    #[serde(rename = "stringValue")]
    String(String),
    /// OTLP/JSON writes 64-bit integers as strings.
    #[serde(rename = "intValue")]
    Int(String),
    #[serde(rename = "boolValue")]
    Bool(bool),
}

pub(super) fn string(key: &'static str, value: impl Into<String>) -> KeyValue {
    let value = AnyValue::String(value.into());
    KeyValue { key, value }
}

pub(super) fn int(key: &'static str, value: impl Into<i64>) -> KeyValue {
    let value = AnyValue::Int(value.into().to_string());
    KeyValue { key, value }
}

pub(super) fn boolean(key: &'static str, value: bool) -> KeyValue {
    let value = AnyValue::Bool(value);
    KeyValue { key, value }
}

pub(super) fn nanos(ts: DateTime<Utc>) -> String {
    ts.timestamp_nanos_opt()
        .unwrap_or_default()
        .max(0)
        .to_string()
}

pub(super) fn event(ts: DateTime<Utc>, name: &str, attributes: Vec<KeyValue>) -> SpanEvent {
    let (time_unix_nano, name) = (nanos(ts), name.to_owned());
    SpanEvent {
        time_unix_nano,
        name,
        attributes,
    }
}
