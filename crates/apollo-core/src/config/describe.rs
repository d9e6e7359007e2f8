//! The pipeline format as data: every key of every section, its shape and its one-line doc.
//!
//! This is the one description both the loader and the JSON Schema come from: the walk
//! (`schema.rs`) accepts exactly the keys listed here (its "unknown key" lists are derived from
//! these tables at compile time) and parses each by its [`Shape`]; [`json_schema`] turns the
//! same tables into the schema that `apollo schema` prints and `schema/pipeline.schema.json`
//! holds (a test fails when the file drifts from it, another validates the config fixtures with
//! it). A new key is one [`Key`] entry here plus its arm in the walk.

use serde_json::{Value, json};

mod build;
pub(crate) use build::names;
use build::{key, required};

/// What a key's value looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A non-empty string (digits are fine too).
    Text,
    /// A whole number, at least `minimum`.
    Count { minimum: u32 },
    /// Whole seconds or a duration string (`500ms`, `1h30m`).
    Duration,
    /// A duration, or `none` for no limit.
    Timeout,
    /// `true` or `false`.
    Bool,
    /// A list of non-empty strings.
    List,
    /// A shell string, or a list `[program, arg, ...]`.
    Command,
    /// Variable name → value.
    Env,
    /// The `defaults:` section ([`DEFAULTS`]).
    Defaults,
    /// The `units:` list (each unit: [`UNIT`]).
    Units,
    /// The `params:` section (each param: [`PARAM`], or a bare default).
    Params,
    /// One file or a list of files.
    Include,
    /// A list, a list param / glob string, or a mapping of those (a product).
    Foreach,
    /// One of the param types.
    ParamType,
    /// Any value (a param's default, checked against its type).
    Any,
    /// A condition: an expression, or `{command: ...}`.
    When,
    /// Which declared files' bytes are kept: `all`, `inputs`, `outputs`, `none`.
    CaptureMode,
    /// A size: whole bytes, or a string like `64MiB`.
    Size,
    /// A size, or `none` for no limit.
    SizeLimit,
    /// A pipeline hook: a command, or `{execute, timeout}`.
    Hook,
    /// `local` or `slurm`.
    Executor,
    /// A journal durability mode a config may ask for: `fsync` or `batched`.
    Durability,
    /// An amount of memory with a unit: `512M`, `4G` (powers of 1024).
    Memory,
    /// What an attempt asks for: `{cpus, memory, gpus, slurm: {...}}`.
    Resources,
    /// The `secrets:` block: name → `{env: VAR}`, `{file: PATH}` or `{command: ...}`.
    Secrets,
    /// The price table: `{cpu_hour, gib_hour, node_hour: {PARTITION: price}, currency}`.
    Cost,
    /// A non-empty list of exit codes, 1 to 255.
    ExitCodes,
    /// A deadline: a local clock time `HH:MM` or a duration after the run starts.
    Deadline,
}

/// One key of a section.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) shape: Shape,
    pub(crate) required: bool,
    pub(crate) doc: &'static str,
}

/// `defaults:`.
pub(crate) const DEFAULTS: [Key; 15] = [
    key(
        "timeout",
        Shape::Timeout,
        "Time limit of one attempt's prepare + execute; `none` for no limit.",
    ),
    key(
        "retries",
        Shape::Count { minimum: 0 },
        "Extra attempts after a failure.",
    ),
    key(
        "retry_delay",
        Shape::Duration,
        "Base of the exponential backoff between attempts.",
    ),
    key(
        "kill_grace",
        Shape::Duration,
        "After a timeout or a stop: SIGTERM, wait this long, SIGKILL.",
    ),
    key(
        "idempotent",
        Shape::Bool,
        "Whether running the unit again after a half-done attempt is safe (default true).",
    ),
    key(
        "workdir",
        Shape::Text,
        "Working directory, relative to the config file's folder.",
    ),
    key(
        "capture",
        Shape::CaptureMode,
        "Which declared files' bytes the blob store keeps (for apollo reproduce and reuse): all (default), inputs, outputs, none.",
    ),
    key(
        "capture_max_file",
        Shape::Size,
        "Files larger than this keep only their hash (default 64MiB).",
    ),
    key(
        "reuse",
        Shape::Bool,
        "Whether a new run may take this unit's result from an earlier run with identical inputs (default false).",
    ),
    key(
        "executor",
        Shape::Executor,
        "Where attempts run: local (default) or slurm.",
    ),
    key(
        "resources",
        Shape::Resources,
        "What one attempt asks for: cpus, memory, gpus, and slurm: {partition, account, qos, extra_args, on_stop, queue_timeout}; merged key by key with defaults.",
    ),
    key(
        "log_limit",
        Shape::SizeLimit,
        "The most each of an attempt's stdout and stderr files keeps (at least 4KiB; default none): past it the head and the last part, with a line saying how much was cut. The unit is never stopped.",
    ),
    key(
        "retry_on_exit",
        Shape::ExitCodes,
        "Retry only failures with these exit codes (killed by signal N counts as 128 + N); a timeout follows `retries` alone. Default: any failure.",
    ),
    key(
        "retry_max_delay",
        Shape::Duration,
        "Cap of the exponential backoff between attempts (default 5m); each delay is spread by ±20% jitter.",
    ),
    key(
        "cleanup_timeout",
        Shape::Duration,
        "Time limit of cleanup, apart from `timeout` (default 60s); then its process group gets SIGTERM, `kill_grace`, SIGKILL.",
    ),
];

/// A unit.
pub(crate) const UNIT: [Key; 29] = [
    required(
        "name",
        Shape::Text,
        "Unique name: letters, digits, `_`, `.`, `-`.",
    ),
    key(
        "deps",
        Shape::List,
        "Units this one runs after; a fan-out's name means all its instances.",
    ),
    DEFAULTS[0],
    DEFAULTS[1],
    DEFAULTS[2],
    DEFAULTS[3],
    key(
        "prepare",
        Shape::Command,
        "Runs before execute (clean up leftovers here).",
    ),
    required(
        "execute",
        Shape::Command,
        "The unit's command: a string runs via /bin/sh -c, a list without a shell. Exit 77 means skipped.",
    ),
    key(
        "cleanup",
        Shape::Command,
        "Runs after execute, always, once prepare started.",
    ),
    key(
        "inputs",
        Shape::List,
        "Files and globs hashed into the unit's input hash.",
    ),
    key(
        "outputs",
        Shape::List,
        "Files the unit writes, hashed into its output hash; they must exist after success.",
    ),
    key(
        "env",
        Shape::Env,
        "Environment variables of the unit's commands.",
    ),
    DEFAULTS[5],
    DEFAULTS[4],
    key(
        "foreach",
        Shape::Foreach,
        "Fan-out: one instance name[item] per item of a list, a list param or a glob, or per combination of a mapping of lists; ${item} / ${item.KEY}.",
    ),
    key(
        "allow_empty",
        Shape::Bool,
        "With a `foreach` glob: `false` makes a glob that matches no file an error; by default it is a warning naming the unit and its dependents, which run without it.",
    ),
    key(
        "when",
        Shape::When,
        "Run only if: an expression decided at load (${params.region} == \"eu\"), or {command: ...} run at the start of execute. A false expression: apollo skips the unit (nothing of it runs); a false command: the unit skips itself (exit 77).",
    ),
    DEFAULTS[6],
    DEFAULTS[7],
    DEFAULTS[8],
    DEFAULTS[9],
    DEFAULTS[10],
    DEFAULTS[11],
    DEFAULTS[12],
    DEFAULTS[13],
    DEFAULTS[14],
    key(
        "acknowledge",
        Shape::List,
        "Codes of `apollo check` warnings about this unit you have seen and accept, e.g. [retry-not-idempotent]: not reported again.",
    ),
    key(
        "secrets",
        Shape::List,
        "Names of the pipeline's `secrets` this unit receives as environment variables; its output is masked before it reaches the logs.",
    ),
    key(
        "deadline",
        Shape::Deadline,
        "When this unit should be done: `06:00` or a duration after the run starts; its lateness is recorded, nothing is stopped.",
    ),
];

/// One param's declaration (`params: {NAME: {...}}`).
pub(crate) const PARAM: [Key; 3] = [
    key(
        "type",
        Shape::ParamType,
        "string, int, bool, date (YYYY-MM-DD) or list; default: read from `default`.",
    ),
    key(
        "default",
        Shape::Any,
        "The value when a run gives none; without it the param is required. A date may default to `today`.",
    ),
    key("description", Shape::Text, "What the param means."),
];

const DURATION_PATTERN: &str = r"^\s*([0-9]+|([0-9]+\s*(ms|s|m|h|d)\s*)+)$";

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn shape_schema(shape: Shape) -> Value {
    match shape {
        Shape::Text => json!({"anyOf": [
            {"type": "string", "minLength": 1, "pattern": "\\S"},
            {"type": "integer"}
        ]}),
        Shape::Count { minimum } => json!({"type": "integer", "minimum": minimum}),
        Shape::Duration => json!({"anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": DURATION_PATTERN}
        ]}),
        Shape::Timeout => json!({"anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": DURATION_PATTERN},
            {"const": "none"}
        ]}),
        Shape::Bool => json!({"type": "boolean"}),
        Shape::List => json!({"anyOf": [
            {"type": "array", "items": {"anyOf": [
                {"type": "string", "minLength": 1, "pattern": "\\S"},
                {"type": "integer"}
            ]}},
            {"type": "null"}
        ]}),
        Shape::Command => json!({"anyOf": [
            {"type": "string", "minLength": 1, "pattern": "\\S"},
            {"type": ["boolean", "integer"]},
            {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}}
        ]}),
        Shape::Env => json!({"anyOf": [
            {"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean"]}},
            {"type": "null"}
        ]}),
        Shape::Defaults => json!({"anyOf": [{"$ref": "#/$defs/defaults"}, {"type": "null"}]}),
        Shape::Units => json!({"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/unit"}}),
        Shape::Params => json!({"anyOf": [
            {"type": "object",
             "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
             "additionalProperties": {"anyOf": [
                {"$ref": "#/$defs/param"},
                {"type": ["string", "integer", "boolean", "array"]}
             ]}},
            {"type": "null"}
        ]}),
        Shape::Include => json!({"anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}}
        ]}),
        Shape::Foreach => {
            let axis = json!({"anyOf": [
                {"type": "array", "items": {"type": ["string", "integer"]}},
                {"type": "string", "minLength": 1}
            ]});
            json!({"anyOf": [
                axis.clone(),
                {"type": "object", "minProperties": 1, "additionalProperties": axis}
            ]})
        }
        Shape::ParamType => json!({"enum": super::params::PARAM_TYPES}),
        Shape::When => json!({"anyOf": [
            {"type": "string", "minLength": 1, "pattern": "\\S"},
            {"type": "boolean"},
            {"type": "object",
             "properties": {"command": shape_schema(Shape::Command)},
             "required": ["command"],
             "additionalProperties": false}
        ]}),
        Shape::Any => json!({}),
        Shape::CaptureMode => json!({"enum": ["all", "inputs", "outputs", "none"]}),
        Shape::Size => json!({"anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": "^\\s*[0-9]+\\s*([bB]|[kKmMgG]([iI]?[bB])?|[tT][iI][bB])?\\s*$"}
        ]}),
        Shape::SizeLimit => json!({"anyOf": [shape_schema(Shape::Size), {"const": "none"}]}),
        Shape::Executor => json!({"enum": ["local", "slurm"]}),
        Shape::Durability => json!({"enum": ["fsync", "batched"]}),
        Shape::Memory => json!({"type": "string",
            "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*([kKmMgGtT]([iI]?[bB])?)\\s*$"}),
        Shape::Resources => super::schema::resources_json_schema(),
        Shape::Secrets => json!({"anyOf": [
            {"type": "object",
             "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
             "additionalProperties": {"oneOf": [
                {"type": "object", "properties": {"env": shape_schema(Shape::Text)},
                 "required": ["env"], "additionalProperties": false},
                {"type": "object", "properties": {"file": shape_schema(Shape::Text)},
                 "required": ["file"], "additionalProperties": false},
                {"type": "object", "properties": {"command": shape_schema(Shape::Command)},
                 "required": ["command"], "additionalProperties": false}
             ]}},
            {"type": "null"}
        ]}),
        Shape::Cost => super::schema::cost_json_schema(),
        Shape::ExitCodes => json!({"type": "array", "minItems": 1,
            "items": {"type": "integer", "minimum": 1, "maximum": 255}}),
        Shape::Deadline => {
            json!({"type": "string", "pattern": "^(([01][0-9]|2[0-3]):[0-5][0-9]|([0-9]+(ms|s|m|h|d))+)$"})
        }
        Shape::Hook => json!({"anyOf": [
            shape_schema(Shape::Command),
            {"type": "object",
             "properties": {
                "execute": shape_schema(Shape::Command),
                "timeout": shape_schema(Shape::Duration)
             },
             "required": ["execute"],
             "additionalProperties": false}
        ]}),
    }
}

fn object_schema(keys: &[Key], extra_patterns: &[(&str, Value)]) -> Value {
    let mut properties = serde_json::Map::new();
    for key in keys {
        let mut schema = shape_schema(key.shape);
        if let Value::Object(map) = &mut schema {
            map.insert("description".to_owned(), Value::from(key.doc));
        }
        properties.insert(key.name.to_owned(), schema);
    }
    let mut object = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    let required: Vec<&str> = keys
        .iter()
        .filter(|key| key.required)
        .map(|key| key.name)
        .collect();
    if !required.is_empty() {
        object["required"] = json!(required);
    }
    if !extra_patterns.is_empty() {
        let patterns: serde_json::Map<String, Value> = extra_patterns
            .iter()
            .map(|(pattern, schema)| ((*pattern).to_owned(), schema.clone()))
            .collect();
        object["patternProperties"] = Value::Object(patterns);
    }
    object
}

/// The JSON Schema (draft 2020-12) of a pipeline file, from the same tables the loader checks
/// keys with. The format's rules that a schema cannot say (a dependency on a unit that does
/// not exist, a cycle, a param of the wrong type) are the loader's alone.
///
/// ```
/// let schema = apollo_core::config::json_schema();
/// assert_eq!(schema["$defs"]["unit"]["required"][0], "name");
/// ```
pub fn json_schema() -> Value {
    // YAML merge keys (`<<: *defaults`) are resolved by the loader; an editor may show them.
    let merge_key = ("^<<$", json!({}));
    let mut top = object_schema(&TOP_LEVEL, &[("^x-", json!({})), merge_key.clone()]);
    top["anyOf"] = json!([{"required": ["units"]}, {"required": ["include"]}]);
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Apollo-11 pipeline",
        "description": "A pipeline for apollo, the crash-safe task orchestrator. Generated by `apollo schema`.",
    });
    if let (Value::Object(schema), Value::Object(top)) = (&mut schema, top) {
        schema.extend(top);
    }
    schema["$defs"] = json!({
        "defaults": object_schema(&DEFAULTS, std::slice::from_ref(&merge_key)),
        "unit": object_schema(&UNIT, std::slice::from_ref(&merge_key)),
        "param": object_schema(&PARAM, &[]),
    });
    schema
}

mod top_level;
pub(crate) use top_level::TOP_LEVEL;

#[cfg(test)]
mod tests;
