//! `apollo run --stream`: the running units' output as it is written, each line prefixed with
//! its unit (`report | …`, stderr lines `report ! …`).
//!
//! Units write to files, never to pipes (apollo-exec), so a unit's output cannot block on a
//! slow terminal. A poller thread reads the new complete lines of every running attempt's
//! `stdout` and `stderr` every [`POLL_INTERVAL`]; when the attempt ends, the rest (and a last
//! line without a newline) is drained by the progress printer just before the attempt's
//! outcome line, so a unit's output always comes before its `ok`/`FAILED`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use apollo_store::RunDir;

use crate::excerpt::clean_line;

/// How often the poller looks for new output.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// One stream of one running attempt.
struct Tail {
    path: PathBuf,
    file: Option<File>,
    /// Bytes read but not yet printed (an unfinished line).
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            partial: Vec::new(),
        }
    }

    /// The complete lines written since the last call (and, with `all`, an unfinished last
    /// line too), each prefixed.
    fn take_lines(&mut self, prefix: &str, all: bool, out: &mut String) {
        if self.file.is_none() {
            // The file is named a moment after the attempt starts (see apollo-exec).
            self.file = apollo_store::open_regular_file(&self.path).ok().flatten();
        }
        if let Some(file) = self.file.as_mut() {
            let mut buffer = [0u8; 16 * 1024];
            while let Ok(n_read) = file.read(&mut buffer) {
                if n_read == 0 {
                    break;
                }
                self.partial.extend_from_slice(&buffer[..n_read]);
            }
        }
        let complete = if all {
            self.partial.len()
        } else {
            self.partial
                .iter()
                .rposition(|&byte| byte == b'\n')
                .map_or(0, |last_newline| last_newline + 1)
        };
        for line in String::from_utf8_lossy(&self.partial[..complete]).lines() {
            out.push_str(prefix);
            out.push_str(&clean_line(line));
            out.push('\n');
        }
        self.partial.drain(..complete);
    }
}

/// One running attempt's two streams.
struct Running {
    stdout: Tail,
    stderr: Tail,
    stdout_prefix: String,
    stderr_prefix: String,
}

impl Running {
    fn take(&mut self, all: bool) -> String {
        let mut text = String::new();
        self.stdout.take_lines(&self.stdout_prefix, all, &mut text);
        self.stderr.take_lines(&self.stderr_prefix, all, &mut text);
        text
    }
}

#[derive(Default)]
struct State {
    running: HashMap<(String, u32), Running>,
    stop: bool,
}

/// Streams the output of running attempts; see the module docs.
pub(crate) struct Streamer {
    shared: Arc<(Mutex<State>, Condvar)>,
    run: RunDir,
    name_width: usize,
    poller: Option<JoinHandle<()>>,
}

impl Streamer {
    /// A streamer of the attempts of `run`, printing through `print` (called with whole
    /// lines, on the poller thread).
    pub(crate) fn start(
        run: &RunDir,
        name_width: usize,
        print: impl Fn(&str) + Send + 'static,
    ) -> Self {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let poller = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || poll(&shared, &print))
        };
        Self {
            shared,
            run: run.clone(),
            name_width,
            poller: Some(poller),
        }
    }

    /// Start streaming `unit`'s attempt.
    pub(crate) fn started(&self, unit: &str, attempt: u32) {
        // The attempt's folder as the store names it (a fan-out instance `load[eu]` is
        // `units/load__eu/`): never a path built here (issue 35: instances streamed nothing).
        let Ok(dir) = self.run.attempt_dir(unit, attempt) else {
            return;
        };
        let width = self.name_width;
        let running = Running {
            stdout: Tail::new(dir.stream("stdout")),
            stderr: Tail::new(dir.stream("stderr")),
            stdout_prefix: format!("{unit:<width$} | "),
            stderr_prefix: format!("{unit:<width$} ! "),
        };
        let mut state = self.shared.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.running.insert((unit.to_owned(), attempt), running);
    }

    /// The attempt ended: what it wrote that was not printed yet, prefixed.
    pub(crate) fn finished(&self, unit: &str, attempt: u32) -> String {
        let mut state = self.shared.0.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .running
            .remove(&(unit.to_owned(), attempt))
            .map(|mut running| running.take(true))
            .unwrap_or_default()
    }
}

impl Drop for Streamer {
    fn drop(&mut self) {
        {
            let mut state = self.shared.0.lock().unwrap_or_else(PoisonError::into_inner);
            state.stop = true;
            self.shared.1.notify_all();
        }
        if let Some(poller) = self.poller.take() {
            let _ = poller.join();
        }
    }
}

fn poll(shared: &(Mutex<State>, Condvar), print: &dyn Fn(&str)) {
    let mut state = shared.0.lock().unwrap_or_else(PoisonError::into_inner);
    while !state.stop {
        let mut text = String::new();
        for running in state.running.values_mut() {
            text.push_str(&running.take(false));
        }
        if !text.is_empty() {
            // Printed under the lock: `finished` cannot drain an attempt's rest ahead of
            // lines read before it.
            print(&text);
        }
        state = shared
            .1
            .wait_timeout(state, POLL_INTERVAL)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Writes `text` to stdout at once (the poller's printer outside a live terminal line).
pub(crate) fn print_to_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan-out instance's output is where the store keeps it (`units/load__eu/1`).
    #[test]
    fn a_fan_out_instance_streams_from_its_folder_as_the_store_names_it() {
        let root = tempfile::tempdir().unwrap();
        let state = apollo_store::StateDir::open_or_create(root.path()).unwrap();
        let run = state.create_run(&state.new_run_id()).unwrap();
        // The poller may print the line before `finished` drains the rest: both count.
        let printed = Arc::new(Mutex::new(String::new()));
        let streamer = {
            let printed = Arc::clone(&printed);
            Streamer::start(&run, 8, move |text| {
                printed.lock().unwrap().push_str(text);
            })
        };
        let dir = run.attempt_dir("load[eu]", 1).unwrap().into_path();
        assert!(dir.ends_with("units/load__eu/1"), "{}", dir.display());
        std::fs::create_dir_all(&dir).unwrap();
        streamer.started("load[eu]", 1);
        std::fs::write(dir.join("stdout"), "loaded\n").unwrap();
        let rest = streamer.finished("load[eu]", 1);
        drop(streamer);
        let all = format!("{}{rest}", printed.lock().unwrap());
        assert_eq!(all.matches("load[eu] | loaded").count(), 1, "{all:?}");
    }

    #[test]
    fn lines_are_prefixed_and_the_rest_drained_at_the_end() {
        let root = tempfile::tempdir().unwrap();
        let state = apollo_store::StateDir::open_or_create(root.path()).unwrap();
        let run = state.create_run(&state.new_run_id()).unwrap();
        let printed = Arc::new(Mutex::new(String::new()));
        let streamer = {
            let printed = Arc::clone(&printed);
            Streamer::start(&run, 6, move |text| {
                printed.lock().unwrap().push_str(text);
            })
        };
        let dir = run.path().join("units/report/1");
        std::fs::create_dir_all(&dir).unwrap();
        streamer.started("report", 1);
        std::fs::write(dir.join("stdout"), "one\ntwo\nunfinished").unwrap();
        std::fs::write(dir.join("stderr"), "warn\x1b[31m\n").unwrap();
        let rest = streamer.finished("report", 1);
        drop(streamer);
        let all = format!("{}{rest}", printed.lock().unwrap());
        // Each stream's lines in order; how the two interleave depends on when the poller
        // looked (between the writes, or not before the end).
        let (stdout, stderr): (Vec<&str>, Vec<&str>) =
            all.lines().partition(|line| line.starts_with("report |"));
        assert_eq!(
            stdout,
            ["report | one", "report | two", "report | unfinished"],
            "{all}"
        );
        assert_eq!(stderr, ["report ! warn\\u{1b}[31m"], "{all}");
    }
}
