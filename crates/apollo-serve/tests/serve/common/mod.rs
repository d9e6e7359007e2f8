//! Test helpers: real runs of small pipelines (apollo-runner with the process executor), a
//! server on a free loopback port stopped when dropped, and a plain HTTP/1.1 client.
#![allow(dead_code, unreachable_pub)]

pub mod devtools;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::{CancelToken, config};
use apollo_exec::{ExecOptions, ProcessExecutor, SecretValues};
use apollo_runner::{FinishedRun, Opened, RunSession, RunTarget, SweepError};
use apollo_serve::{Options, Server, Token};
use apollo_store::RunId;

/// How to provide the browser the browser tests drive (Debian; `.ci/run` does it).
pub const INSTALL_HINT: &str = "apt-get install chromium";

/// The Chromium on `PATH`, if any.
pub fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
}

/// A FIFO at `path` (units and tests synchronise through them, never through sleeps).
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// Writes `text` into a FIFO without waiting for a reader (opened read-write, as Linux
/// allows): whoever opens it next reads it. Nothing happens when there is no such file.
pub fn unblock(path: &Path, text: &str) {
    if let Ok(mut fifo) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        let _ = fifo.write_all(text.as_bytes());
    }
}

/// A generous safety net for reads from the server (a loaded 2-core machine).
pub const SAFETY: Duration = Duration::from_secs(120);

fn sweep(run: &RunId) -> Result<u32, SweepError> {
    Ok(apollo_exec::kill_stray_processes(run.as_str())?)
}

fn quiet(_: &apollo_runner::SessionNotice<'_>) {}

/// Runs the pipeline `config` (in its folder) to its end, as a new run, its units given the
/// secrets they list.
pub fn run_pipeline(config_path: &Path) -> FinishedRun {
    let loaded = config::load(config_path).expect("pipeline loads");
    let state_dir = config_path.parent().expect("folder").join(".apollo");
    let sweep = sweep;
    let session =
        RunSession::new(&state_dir, config_path, &loaded, &sweep).target(RunTarget::Fresh);
    let Opened::Ready(run) = session.open(&mut quiet).expect("run opens") else {
        panic!("nothing to run");
    };
    // The secrets the units receive, read as `apollo run` reads them when a run starts.
    let pipeline = &loaded.pipeline;
    let secrets = SecretValues::read_for(&pipeline.units, &pipeline.base_dir).expect("secrets");
    let executor = ProcessExecutor::new(ExecOptions::default()).with_secrets(secrets);
    run.run(
        &apollo_runner::Dispatch::new(&executor),
        &mut apollo_core::engine::NoObserver,
        &CancelToken::new(),
        &mut quiet,
    )
    .expect("run runs")
}

/// A project folder holding `pipeline` as `pipeline.yaml`.
pub fn project(pipeline: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config_path = dir.path().join("pipeline.yaml");
    std::fs::write(&config_path, pipeline).expect("write pipeline");
    (dir, config_path)
}

/// A server on a free loopback port, stopped (and its thread joined) when dropped.
pub struct Served {
    pub addr: SocketAddr,
    pub token: String,
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    pub fn start(state_dir: &Path) -> Served {
        let token = Token::generate().expect("token");
        let token_text = token.as_str().to_owned();
        let server = Server::bind(Options::new(state_dir, token)).expect("server binds");
        let (addr, url) = (server.local_addr(), server.url());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            server
                .run_until(async move {
                    let _ = stopped.await;
                })
                .expect("server runs");
        });
        Served {
            addr,
            token: token_text,
            url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `GET path` with the bearer token.
    pub fn get(&self, path: &str) -> Response {
        get(
            self.addr,
            path,
            &[("Authorization", &format!("Bearer {}", self.token))],
        )
    }

    /// `GET path` with the token, expecting 200: the body.
    pub fn ok(&self, path: &str) -> String {
        let response = self.get(path);
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
        response.body
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Opens a connection and sends `GET path` (HTTP/1.1, `Connection: close`).
pub fn send(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(SAFETY)).expect("timeout");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    BufReader::new(stream)
}

/// Reads the status line and headers.
pub fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header");
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    (status, headers)
}

/// `GET path`: the whole answer (chunked bodies decoded).
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut reader = send(addr, path, headers);
    let (status, headers) = read_head(&mut reader);
    let chunked = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked")
    });
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).expect("chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).expect("chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = (headers.iter())
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
    {
        body = vec![0; len];
        reader.read_exact(&mut body).expect("body");
    } else {
        reader.read_to_end(&mut body).expect("body");
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The next server-sent event's name and data from an event stream (chunk framing skipped).
pub fn next_event(reader: &mut BufReader<TcpStream>) -> (String, String) {
    let (mut name, mut data) = (String::new(), String::new());
    loop {
        let mut line = String::new();
        let n_read = reader.read_line(&mut line).expect("event stream line");
        assert!(n_read > 0, "the event stream ended");
        let line = line.trim_end();
        if let Some(value) = line.strip_prefix("event:") {
            name = value.trim().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            data = value.trim().to_owned();
        } else if line.is_empty() && !name.is_empty() {
            return (name, data);
        }
    }
}

use apollo_core::Event;
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, StateDir, WriterOptions,
};

pub const PIPELINE: &str = "\
name: web
params:
  day: {default: \"<b>day</b>\"}
units:
  - name: fetch
    timeout: 1h
    execute: echo fetched; echo '<img src=x onerror=alert(1)>' >&2
  - name: bad
    deps: [fetch]
    execute: echo oops >&2; exit 3
";

/// A state directory with one real failed run, then a copy of it whose unit `bad` is named
/// `<script>alert(1)</script>` (a hostile or damaged journal: the loader would refuse the
/// name, the journal can still hold it).
pub fn state_with_runs() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, config) = project(PIPELINE);
    run_pipeline(&config);
    let state_dir = dir.path().join(".apollo");
    write_hostile_copy(&state_dir);
    (dir, state_dir)
}

pub const HOSTILE: &str = "<script>alert(1)</script>";

pub fn write_hostile_copy(state_dir: &Path) {
    let state = StateDir::open_existing(state_dir).unwrap();
    let source = state.run_ids().unwrap().pop().unwrap();
    let events: Vec<Event> = JournalReader::open(
        state.run_dir(&source).unwrap().path(),
        ReadOptions::default(),
    )
    .unwrap()
    .map(|record| record.unwrap().event)
    .collect();
    let id = state.new_run_id();
    let run_dir = state.create_run(&id).unwrap();
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(run_dir.path(), id.as_str(), options).unwrap();
    for event in events {
        let text = serde_json::to_string(&event)
            .unwrap()
            .replace("\"bad\"", &serde_json::to_string(HOSTILE).unwrap())
            .replace(source.as_str(), id.as_str());
        let event: Event = serde_json::from_str(&text).unwrap();
        writer.append_batch(&[event]).unwrap();
    }
}
