#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod args;
mod array;
mod client;
mod executor;
mod job_name;
mod options;
mod poller;
mod queue_limit;
mod reattach;
mod request;
mod result;
mod script;
#[cfg(test)]
mod script_sh_tests;
mod secrets;
mod squeue;
mod submit;
#[cfg(test)]
mod test_support;
pub mod testing;
mod wait;

pub use client::{ClientCalls, ClientFailure};
pub use executor::{EXECUTOR_NAME, SlurmExecutor};
pub use job_name::{
    PREFIX as JOB_NAME_PREFIX, array_job_name, job_name, job_name_with_token, parse_job_name,
    parse_job_token,
};
pub use options::SlurmOptions;
pub use script::{WrapperSpec, quote as shell_quote, wrapper_script};
pub use squeue::{JobState, QueueEntry, parse_squeue};
