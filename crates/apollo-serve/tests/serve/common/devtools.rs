//! Headless Chromium driven through the DevTools protocol (a minimal WebSocket client): a
//! browser started with a DevTools port, killed when dropped; evaluating script in its page
//! (awaiting promises), pressing keys, waiting for loads, and screenshots.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::unblock;

pub const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

/// Chromium, killed when dropped; and the unit released (no process outlives the test).
pub struct Browser {
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
pub fn launch(chromium: &Path, url: &str, release: &Path) -> (Browser, u16) {
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
pub struct DevTools {
    stream: TcpStream,
    next_id: u64,
    /// `Page.loadEventFired` events seen so far (after `Page.enable`).
    pub loads: u32,
}

impl DevTools {
    /// Connects to the first page target of the browser on `port`.
    pub fn connect(port: u16) -> DevTools {
        let list = super::get(
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

    pub fn send(&mut self, text: &str) {
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
    pub fn message(&mut self) -> serde_json::Value {
        let message: serde_json::Value = serde_json::from_str(&self.receive()).unwrap();
        if message["method"] == "Page.loadEventFired" {
            self.loads += 1;
        }
        message
    }

    /// Waits for the page's next load after `seen` loads (`Page.enable` first).
    pub fn wait_load(&mut self, seen: u32) {
        while self.loads <= seen {
            self.message();
        }
    }

    pub fn receive(&mut self) -> String {
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
    pub fn evaluate(&mut self, expression: &str) -> serde_json::Value {
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

    pub fn evaluate_once(
        &mut self,
        expression: &str,
    ) -> Result<serde_json::Value, serde_json::Value> {
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
pub fn when(condition: &str) -> String {
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

impl DevTools {
    /// Sends a DevTools command and waits for its answer (events in between are dropped).
    pub fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
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
    pub fn press(&mut self, key: &str, code: u32) {
        for kind in ["keyDown", "keyUp"] {
            let params = serde_json::json!({
                "type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code,
                "text": if key == "Enter" && kind == "keyDown" { "\r" } else { "" },
            });
            self.call("Input.dispatchKeyEvent", params);
        }
    }
}
impl DevTools {
    /// Saves a PNG of what the page shows now at `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let answer = self.call(
            "Page.captureScreenshot",
            serde_json::json!({"format": "png"}),
        );
        let data = answer["result"]["data"].as_str().expect("screenshot data");
        std::fs::write(path, base64_decode(data)).expect("write screenshot");
    }

    /// Navigates to `url` and waits for its load (`Page.enable` first).
    pub fn navigate(&mut self, url: &str) {
        let loads = self.loads;
        self.call("Page.navigate", serde_json::json!({ "url": url }));
        self.wait_load(loads);
    }
}

/// Standard base64 (the DevTools protocol's binary data), decoded.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |byte: u8| match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|byte| *byte != b'=')
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut bits = 0u32;
        for (i, digit) in chunk.iter().enumerate() {
            bits |= u32::from(*digit) << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
