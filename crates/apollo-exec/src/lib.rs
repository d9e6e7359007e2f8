#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
// Raw system calls live in `sys` only (see its docs); everything else is safe code.
#![deny(unsafe_code)]

#[cfg(not(target_os = "linux"))]
compile_error!("apollo-exec supervises processes with Linux interfaces (pidfd, clone, /proc)");

mod attempt_files;
mod cancel_event;
mod client;
mod command_line;
mod environment;
mod escaped;
mod executor;
mod group_leader;
mod group_members;
mod guard;
mod isolate;
pub mod log_cap;
mod output;
mod phase;
mod pidfds;
mod procfs;
mod program_search;
mod relay;
mod secrets;
mod spawn;
mod stdio;
mod strays;
#[allow(unsafe_code)]
mod sys;

pub use attempt_files::{
    create_attempt_dir, open_attempt_file, read_attempt_file, write_attempt_file,
};
pub use client::{ClientCommand, ClientError, ClientOutput};
pub use executor::{ExecOptions, ProcessExecutor};
pub use isolate::{IsolationError, PrivateMounts};
pub use secrets::{
    MAX_SECRET_FILE_BYTES, MIN_MASKED_LEN, Masker, SECRET_COMMAND_TIMEOUT, SecretError,
    SecretValues, read_secret,
};
pub use strays::{
    CLUSTER_JOB_MARKER, StrayError, kill_stray_processes, kill_stray_processes_in, run_key,
};
