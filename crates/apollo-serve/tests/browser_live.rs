//! A running run followed to its end in a real browser: headless Chromium, driven through the
//! DevTools protocol (a minimal WebSocket client below), opens a running attempt's page; the
//! test waits — inside the page, with a promise, no sleeps — until the page's event stream is
//! connected, lets the unit finish (through a FIFO), then waits until the page shows the
//! unit's last output and says the run finished, without a reload. A second test drives the
//! pages by keyboard (Tab reaches every link and control with a visible focus, Enter opens a
//! run) and measures the contrast of every piece of text as the browser drew it (WCAG AA).
//! Without Chromium the tests say SKIPPED (and fail under CI=true).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{INSTALL_HINT, Served, find_chromium, mkfifo, project, run_pipeline, unblock};

const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

const PIPELINE: &str = "\
name: live
units:
  - name: wait
    execute: echo started > started.fifo; echo first-line; read line < go.fifo; echo \"after $line\"
";

/// Chromium, killed when dropped; and the unit released (no process outlives the test).
struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    release: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unblock(&self.release, "released\n");
    }
}

/// Starts headless Chromium on `url` with a DevTools port; the port.
fn launch(chromium: &Path, url: &str, release: &Path) -> (Browser, u16) {
    let profile = tempfile::tempdir().unwrap();
    // The test drives a browser, not a unit: apollo-exec's process rules are for units.
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--remote-debugging-port=0",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("start chromium");
    let stderr = child.stderr.take().expect("piped stderr");
    let browser = Browser {
        child,
        _profile: profile,
        release: release.to_path_buf(),
    };
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("DevTools listening on ws://127.0.0.1:").nth(1) {
                let port = rest
                    .split('/')
                    .next()
                    .and_then(|port| port.parse::<u16>().ok());
                let _ = sender.send(port);
            }
        }
    });
    let port = receiver
        .recv_timeout(BROWSER_TIMEOUT)
        .ok()
        .flatten()
        .expect("chromium announced its DevTools port");
    (browser, port)
}

/// A WebSocket connection to one DevTools target (text frames; the client's are masked).
struct DevTools {
    stream: TcpStream,
    next_id: u64,
    /// `Page.loadEventFired` events seen so far (after `Page.enable`).
    loads: u32,
}

impl DevTools {
    /// Connects to the first page target of the browser on `port`.
    fn connect(port: u16) -> DevTools {
        let list = common::get(
            format!("127.0.0.1:{port}").parse().unwrap(),
            "/json/list",
            &[],
        );
        let targets: serde_json::Value = serde_json::from_str(&list.body).unwrap();
        let target = (targets.as_array().unwrap().iter())
            .find(|target| target["type"] == "page")
            .expect("a page target");
        let ws = target["webSocketDebuggerUrl"].as_str().unwrap();
        let path = &ws[ws.find("/devtools/").unwrap()..];
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(BROWSER_TIMEOUT)).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        DevTools {
            stream,
            next_id: 1,
            loads: 0,
        }
    }

    fn send(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        match payload.len() {
            len @ 0..126 => frame.push(0x80 | u8::try_from(len).unwrap()),
            len @ 126..65_536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        // A zero mask key: masking is then the identity, which the protocol allows.
        frame.extend_from_slice(&[0, 0, 0, 0]);
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).unwrap();
    }

    /// The next message, counting the page's load events on the way.
    fn message(&mut self) -> serde_json::Value {
        let message: serde_json::Value = serde_json::from_str(&self.receive()).unwrap();
        if message["method"] == "Page.loadEventFired" {
            self.loads += 1;
        }
        message
    }

    /// Waits for the page's next load after `seen` loads (`Page.enable` first).
    fn wait_load(&mut self, seen: u32) {
        while self.loads <= seen {
            self.message();
        }
    }

    fn receive(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.stream.read_exact(&mut head).unwrap();
            let mut len = u64::from(head[1] & 0x7f);
            if len == 126 {
                let mut extended = [0u8; 2];
                self.stream.read_exact(&mut extended).unwrap();
                len = u64::from(u16::from_be_bytes(extended));
            } else if len == 127 {
                let mut extended = [0u8; 8];
                self.stream.read_exact(&mut extended).unwrap();
                len = u64::from_be_bytes(extended);
            }
            let mut payload = vec![0u8; usize::try_from(len).unwrap()];
            self.stream.read_exact(&mut payload).unwrap();
            message.extend_from_slice(&payload);
            if head[0] & 0x80 != 0 {
                return String::from_utf8(message).unwrap();
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting it when it is a promise); its value. An
    /// evaluation the page's navigation interrupted (the URL's document replacing the first
    /// blank one) is made again in the new document.
    fn evaluate(&mut self, expression: &str) -> serde_json::Value {
        for _ in 0..10 {
            match self.evaluate_once(expression) {
                Ok(value) => return value,
                Err(answer)
                    if ["context", "navigated"]
                        .iter()
                        .any(|what| answer.to_string().contains(what)) =>
                {
                    continue;
                }
                Err(answer) => panic!("{answer}"),
            }
        }
        panic!("the page kept navigating away");
    }

    fn evaluate_once(&mut self, expression: &str) -> Result<serde_json::Value, serde_json::Value> {
        let id = self.next_id;
        self.next_id += 1;
        let request = serde_json::json!({
            "id": id,
            "method": "Runtime.evaluate",
            "params": {"expression": expression, "awaitPromise": true, "returnByValue": true},
        });
        self.send(&request.to_string());
        loop {
            let answer = self.message();
            if answer["id"] == id {
                if answer.get("error").is_some() {
                    return Err(answer);
                }
                return Ok(answer["result"]["result"]["value"].clone());
            }
        }
    }
}

/// A promise that resolves with the page's text once `condition` (JS, over `text` and
/// `status`) holds, looked at on every change of the page.
fn when(condition: &str) -> String {
    format!(
        "new Promise(function (resolve) {{
            function check() {{
                var text = document.body ? document.body.innerText : '';
                var node = document.getElementById('live-status');
                var status = node ? node.textContent : '';
                if ({condition}) {{ resolve(text); return true; }}
                return false;
            }}
            if (check()) {{ return; }}
            var observer = new MutationObserver(function () {{ if (check()) {{ observer.disconnect(); }} }});
            observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
        }})"
    )
}

#[test]
fn a_running_unit_is_followed_to_its_end_in_headless_chromium() {
    let found = find_chromium();
    if !apollo_core::testing::require(found.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let chromium = found.expect("checked just above");
    let (dir, config) = project(PIPELINE);
    let (started, go) = (dir.path().join("started.fifo"), dir.path().join("go.fifo"));
    mkfifo(&started);
    mkfifo(&go);
    let runner = {
        let (config, started) = (config.clone(), started.clone());
        std::thread::spawn(move || {
            let finished = run_pipeline(&config);
            // Should the unit never have reached its FIFO, the test's read must not wait
            // forever.
            unblock(&started, "run over\n");
            finished
        })
    };
    let said = std::fs::read_to_string(&started).expect("read started.fifo");
    assert_eq!(said.trim(), "started");

    let served = Served::start(&dir.path().join(".apollo"));
    let url = format!(
        "http://{}/runs/latest/units/wait?token={}",
        served.addr, served.token
    );
    let (browser, port) = launch(&chromium, &url, &go);
    let mut devtools = DevTools::connect(port);
    // The page is loaded, shows the running attempt, and its event stream is connected.
    let text = devtools.evaluate(&when(
        "status.indexOf('live') === 0 && text.indexOf('first-line') >= 0",
    ));
    assert!(
        text.as_str().is_some_and(|text| text.contains("running")),
        "{text}"
    );

    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .expect("open go.fifo");
    fifo.write_all(b"go\n").expect("write go.fifo");
    drop(fifo);
    let finished = runner.join().expect("the run's thread");
    assert_eq!(
        finished.report.status,
        Some(apollo_core::event::RunStatus::Succeeded)
    );
    // Without a reload: the page swapped its content when the stream said so.
    let text = devtools.evaluate(&when(
        "status.indexOf('finished') === 0 && text.indexOf('after go') >= 0",
    ));
    assert!(
        text.as_str().is_some_and(|text| text.contains("succeeded")),
        "{text}"
    );
    let navigations = devtools.evaluate("performance.getEntriesByType('navigation').length");
    assert_eq!(navigations, 1, "the page was not reloaded");
    drop(browser);
}

impl DevTools {
    /// Sends a DevTools command and waits for its answer (events in between are dropped).
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = serde_json::json!({"id": id, "method": method, "params": params});
        self.send(&request.to_string());
        loop {
            let answer = self.message();
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer;
            }
        }
    }

    /// Presses a key (down, then up), as a keyboard user would.
    fn press(&mut self, key: &str, code: u32) {
        for kind in ["keyDown", "keyUp"] {
            let params = serde_json::json!({
                "type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code,
                "text": if key == "Enter" && kind == "keyDown" { "\r" } else { "" },
            });
            self.call("Input.dispatchKeyEvent", params);
        }
    }
}

/// The lowest WCAG contrast ratio between an element's text colour and the background it is
/// drawn on (the first ancestor's that is not transparent; white at the top), over every
/// element with text of its own, and where it is (`{"ratio": …, "where": …}`).
const LOWEST_CONTRAST: &str = "(function () {
    function rgb(text) { var m = text.match(/[\\d.]+/g) || [0, 0, 0, 0];
        return {r: +m[0], g: +m[1], b: +m[2], a: m.length > 3 ? +m[3] : 1}; }
    function lum(c) { return [c.r, c.g, c.b].map(function (v) { v /= 255;
        return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
        .reduce(function (sum, v, i) { return sum + v * [0.2126, 0.7152, 0.0722][i]; }, 0); }
    function background(node) { for (; node && node.nodeType === 1; node = node.parentElement) {
        var c = rgb(getComputedStyle(node).backgroundColor); if (c.a > 0) { return c; } }
        return {r: 255, g: 255, b: 255, a: 1}; }
    var lowest = {ratio: 21, where: ''};
    document.querySelectorAll('body *').forEach(function (node) {
        var own = Array.prototype.some.call(node.childNodes, function (child) {
            return child.nodeType === 3 && child.textContent.trim() !== ''; });
        if (!own || node.closest('iframe')) { return; }
        var a = lum(rgb(getComputedStyle(node).color)), b = lum(background(node));
        var ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < lowest.ratio) { lowest = {ratio: ratio, where: node.tagName + '.' + node.className + ': ' + node.textContent.trim().slice(0, 40)}; }
    });
    return lowest;
})()";

#[test]
fn the_pages_are_driven_by_keyboard_with_a_visible_focus_and_readable_text() {
    let found = find_chromium();
    if !apollo_core::testing::require(found.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let chromium = found.expect("checked just above");
    let (dir, state_dir) = common::state_with_runs();
    let served = Served::start(&state_dir);
    let url = format!("http://{}/?token={}", served.addr, served.token);
    let (browser, port) = launch(&chromium, &url, &dir.path().join("no-fifo"));
    let mut devtools = DevTools::connect(port);
    devtools.evaluate(&when("text.indexOf('web') >= 0"));
    devtools.call("Page.enable", serde_json::json!({}));
    let loads = devtools.loads;
    // Tab moves the focus through the page's links and controls, each drawn with an outline;
    // Enter on a run's link opens it.
    let mut opened = false;
    for _ in 0..40 {
        devtools.press("Tab", 9);
        let focused = devtools.evaluate(
            "(function () { var e = document.activeElement; return {tag: e.tagName, \
             href: e.getAttribute('href') || '', outline: getComputedStyle(e).outlineStyle}; })()",
        );
        let tag = focused["tag"].as_str().unwrap_or_default().to_owned();
        assert!(
            ["A", "INPUT", "SELECT", "BUTTON"].contains(&tag.as_str()),
            "Tab landed on {focused}"
        );
        assert_ne!(focused["outline"], "none", "no visible focus on {focused}");
        if tag == "A"
            && focused["href"]
                .as_str()
                .is_some_and(|href| href.starts_with("/runs/"))
        {
            devtools.press("Enter", 13);
            opened = true;
            break;
        }
    }
    assert!(opened, "no run link reached by Tab");
    devtools.wait_load(loads);
    let text = devtools.evaluate(&when(
        "location.pathname.indexOf('/runs/') === 0 && text.indexOf('fetch') >= 0",
    ));
    assert!(
        text.as_str().is_some_and(|text| text.contains("failed")),
        "{text}"
    );
    // Readable: WCAG AA (4.5:1) for every piece of text on the runs page and a run's page.
    for page in ["/", "/runs/latest"] {
        let loads = devtools.loads;
        let url = format!("http://{}{page}", served.addr);
        devtools.call("Page.navigate", serde_json::json!({ "url": url }));
        devtools.wait_load(loads);
        let lowest = devtools.evaluate(LOWEST_CONTRAST);
        let ratio = lowest["ratio"].as_f64().unwrap_or(0.0);
        assert!(
            ratio >= 4.5,
            "{page}: contrast {ratio:.2} below 4.5:1 at {}",
            lowest["where"]
        );
    }
    drop(browser);
}
