//! Short client commands (a cluster scheduler's `sbatch`, `squeue`, `scancel`): run one with
//! a timeout and capture what it prints. apollo-slurm goes through this, so that apollo-exec
//! stays the only crate that creates processes (DESIGN §17).
//!
//! Unlike a unit's phases, a client command is not a process group of its own and is not
//! registered with the guard: it is short, its output is read through pipes (it prints
//! little), and one that outlives its timeout is killed and reaped here.

use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How a client command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOutput {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to stderr (lossy UTF-8).
    pub stderr: String,
}

impl ClientOutput {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Why a client command could not be run to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// It could not be started (not on `PATH`, not executable).
    #[error("cannot start `{program}`")]
    Spawn {
        /// The program.
        program: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// It ran longer than its timeout and was killed.
    #[error("`{program}` did not finish within {timeout:?} and was killed")]
    TimedOut {
        /// The program.
        program: String,
        /// The timeout it was given.
        timeout: Duration,
    },
    /// Waiting for it failed.
    #[error("cannot wait for `{program}`")]
    Wait {
        /// The program.
        program: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// A client command to run: a program, its arguments, and at most how long it may take.
#[derive(Debug, Clone)]
pub struct ClientCommand {
    program: PathBuf,
    args: Vec<String>,
    timeout: Duration,
    current_dir: Option<PathBuf>,
    env_removed: Vec<String>,
}

impl ClientCommand {
    /// `program` (searched on `PATH` when it has no `/`) with no arguments and a 60 s timeout.
    pub fn program(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            timeout: Duration::from_secs(60),
            current_dir: None,
            env_removed: Vec::new(),
        }
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Add arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Kill it when it runs longer than `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Run it in `dir` instead of apollo's own working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Run it without the environment variable `name` (apollo's others it inherits): for a
    /// value that must not reach it, as `sbatch` hands its environment to the controller.
    pub fn env_remove(mut self, name: impl Into<String>) -> Self {
        self.env_removed.push(name.into());
        self
    }

    /// Run it with stdin from `/dev/null`, wait for it (at most its timeout) and return what
    /// it printed.
    pub fn run(&self) -> Result<ClientOutput, ClientError> {
        let program = self.program.display().to_string();
        #[allow(
            clippy::disallowed_methods,
            reason = "apollo-exec is where processes are made"
        )]
        let mut command = std::process::Command::new(&self.program);
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        for name in &self.env_removed {
            command.env_remove(name);
        }
        let mut child = command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ClientError::Spawn {
                program: program.clone(),
                source,
            })?;
        // Both pipes are drained on threads of their own, so a chatty command never blocks
        // on a full pipe while we wait for it.
        let readers = [
            child.stdout.take().map(drain),
            child.stderr.take().map(drain),
        ];
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(1);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    for reader in readers.into_iter().flatten() {
                        let _ = reader.join();
                    }
                    return Err(ClientError::TimedOut {
                        program,
                        timeout: self.timeout,
                    });
                }
                Ok(None) => {
                    // A client command takes milliseconds to seconds: a short, growing pause
                    // between checks costs nothing noticeable and needs no pidfd machinery.
                    std::thread::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    );
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(source) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(ClientError::Wait { program, source });
                }
            }
        };
        let [stdout, stderr] = readers.map(|reader| {
            reader
                .and_then(|reader| reader.join().ok())
                .unwrap_or_default()
        });
        Ok(ClientOutput {
            code: status.code(),
            stdout,
            stderr,
        })
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_exit_code_are_captured() {
        let output = ClientCommand::program("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .run()
            .unwrap();
        assert_eq!(output.code, Some(3));
        assert_eq!(output.stdout, "out\n");
        assert_eq!(output.stderr, "err\n");
        assert!(!output.success());
    }

    #[test]
    fn a_command_past_its_timeout_is_killed() {
        let error = ClientCommand::program("sleep")
            .arg("30")
            .timeout(Duration::from_millis(50))
            .run()
            .unwrap_err();
        assert!(matches!(error, ClientError::TimedOut { .. }), "{error}");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let error = ClientCommand::program("/nonexistent/sbatch")
            .run()
            .unwrap_err();
        assert_eq!(error.to_string(), "cannot start `/nonexistent/sbatch`");
    }
}
