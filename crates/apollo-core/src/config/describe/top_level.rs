//! The top level's keys (a table of the format's description, `describe.rs`).

use super::{Key, Shape, key};

/// The top level of a pipeline file.
pub(crate) const TOP_LEVEL: [Key; 22] = [
    key(
        "name",
        Shape::Text,
        "The pipeline's name; defaults to the file stem.",
    ),
    key(
        "id",
        Shape::Text,
        "The pipeline's identity in its state directory, instead of its name and config path.",
    ),
    key("defaults", Shape::Defaults, "Settings every unit inherits."),
    key(
        "max_parallel",
        Shape::Count { minimum: 1 },
        "How many units run at once; default: the number of CPUs.",
    ),
    key(
        "env",
        Shape::Env,
        "Environment variables merged under each unit's env.",
    ),
    key("units", Shape::Units, "The units, in order."),
    key(
        "params",
        Shape::Params,
        "Typed run parameters, used as ${params.NAME} (in a shell command quoted for its place; ${params.NAME:raw} unquoted, at your risk) and received by the units using them as APOLLO_PARAM_NAME; set with `apollo run -p NAME=VALUE`.",
    ),
    key(
        "include",
        Shape::Include,
        "Other pipeline files whose units, defaults, env and params join this one.",
    ),
    key(
        "on_failure",
        Shape::Hook,
        "Runs once when a run fails or stops for a human's verdict (APOLLO_RUN_ID, APOLLO_RUN_STATUS, APOLLO_FAILED_UNITS, APOLLO_SUMMARY_JSON).",
    ),
    key("on_success", Shape::Hook, "Runs once when a run succeeds."),
    key(
        "on_finish",
        Shape::Hook,
        "Runs once when a run ends, whatever its status.",
    ),
    key(
        "on_late",
        Shape::Hook,
        "Runs once per run, while it goes on, when its predicted finish (each unit's p50 in `apollo stats`, over the critical path) passes its `deadline`, or the deadline comes with units not done (APOLLO_DEADLINE, APOLLO_PREDICTED_FINISH, APOLLO_SUMMARY_JSON). Never stops the run.",
    ),
    key(
        "deadline",
        Shape::Deadline,
        "When the run should be done: `06:00` (the first 06:00 local time after it starts) or a duration (`2h`). Never stops anything: apollo records by how much the run ended after it.",
    ),
    key(
        "max_cpus",
        Shape::Count { minimum: 1 },
        "CPUs the local executor may use at once (sum of the running units' `cpus`); default: the machine's.",
    ),
    key(
        "max_memory",
        Shape::Memory,
        "Memory the local executor may use at once (sum of the running units' `memory`); default: the machine's.",
    ),
    key(
        "max_jobs",
        Shape::Count { minimum: 1 },
        "Slurm jobs in flight at once (default 100), beside the `max_parallel` local units.",
    ),
    key(
        "blob_store_max",
        Shape::SizeLimit,
        "When a run ends with the state directory's blob store over this size (default 20GiB), the captures of the oldest runs are evicted first, never those of the latest run of each pipeline; `none` for no limit.",
    ),
    key(
        "durability",
        Shape::Durability,
        "How the run's journal is made durable: `fsync` (the default) syncs every record before acting on it; `batched` writes at once and syncs within `sync_interval`, strictly before an `idempotent: false` or Slurm unit starts (a power loss may cost the last interval's records: their idempotent units run again). `apollo run --durability` wins over it.",
    ),
    key(
        "sync_interval",
        Shape::Duration,
        "Under `durability: batched`, how long a record may stay unsynced (default 10ms).",
    ),
    key(
        "secrets",
        Shape::Secrets,
        "Secrets by name and source ({env: VAR}, {file: PATH} or {command: ...}), read when a run starts; a unit lists those it receives (`secrets: [NAME]`) and gets each as an environment variable. Values are never written down.",
    ),
    key(
        "cost",
        Shape::Cost,
        "Prices that turn each attempt's recorded use into money: `cpu_hour`, `gib_hour` (local: largest resident set; Slurm: memory requested), `node_hour: {PARTITION: price}` (Slurm), `currency`. Without it no cost is shown.",
    ),
    key(
        "journal_segment_size",
        Shape::Size,
        "The size at which a run's journal starts a new segment file (default 64MiB; 2MiB to 1GiB).",
    ),
];
