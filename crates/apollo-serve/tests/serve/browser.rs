//! `apollo serve`'s pages in a real browser: the system's headless Chromium loads each view
//! (its `--dump-dom` mode, after the page's script ran) and the test checks what is on it;
//! a screenshot of each is kept under `target/tmp/apollo-serve-screenshots/`. Without
//! Chromium the test says SKIPPED (and fails under CI=true).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use apollo_store::StateDir;
use common::{INSTALL_HINT, Served, find_chromium, state_with_runs};

/// A generous safety net: a cold Chromium start on a loaded 2-core machine takes seconds.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs headless Chromium on `url` with `mode` (`--dump-dom` or `--screenshot=…`); its
/// stdout.
fn chromium(chromium: &Path, url: &str, mode: &str) -> String {
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
            "--hide-scrollbars",
            "--window-size=1280,1100",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(mode)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().expect("start chromium");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let result = stdout.read_to_string(&mut out).map(|_| out);
        let _ = sender.send(result);
    });
    match receiver.recv_timeout(BROWSER_TIMEOUT) {
        Ok(out) => {
            let status = child.wait().expect("wait for chromium");
            assert!(status.success(), "chromium failed: {status}");
            out.expect("read chromium's output")
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not render {url} within {BROWSER_TIMEOUT:?}");
        }
    }
}

#[test]
fn every_view_renders_in_headless_chromium() {
    let found = find_chromium();
    if !apollo_core::testing::require(found.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let browser = found.expect("checked just above");
    let (_dir, state_dir) = state_with_runs();
    let first = StateDir::open_existing(&state_dir)
        .unwrap()
        .run_ids()
        .unwrap()[0]
        .clone();
    let first = first.as_str();
    let served = Served::start(&state_dir);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("apollo-serve-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let views: [(&str, String, &[&str]); 6] = [
        (
            "runs",
            "/".to_owned(),
            &["Runs", first, "failed", "day=&lt;b&gt;day&lt;/b&gt;"],
        ),
        (
            "run",
            format!("/runs/{first}"),
            &[
                "Units",
                "fetch",
                "bad",
                "exit",
                "Attempts over time",
                "<iframe",
                "class=\"node s-failed\"",
            ],
        ),
        (
            "attempt",
            format!("/runs/{first}/units/bad"),
            &[
                "exit 3",
                "oops",
                "apollo reproduce",
                "Input hash",
                "echo oops",
            ],
        ),
        (
            "diff",
            format!("/diff?a={first}&b=latest"),
            &["Compare two runs", "units differ"],
        ),
        (
            "history",
            "/history?pipeline=web".to_owned(),
            &["History of", "fetch", "class=\"cell s-failed\""],
        ),
        (
            "hostile",
            "/runs/latest".to_owned(),
            &["&lt;script&gt;alert(1)&lt;/script&gt;"],
        ),
    ];
    for (name, path, expected) in &views {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = format!(
            "http://{}{path}{separator}token={}",
            served.addr, served.token
        );
        let dom = chromium(&browser, &url, "--dump-dom");
        assert!(
            dom.contains("data-js=\"ready\""),
            "{name}: the page's script did not run:\n{dom}"
        );
        for text in *expected {
            assert!(dom.contains(text), "{name}: no {text:?} in:\n{dom}");
        }
        // Journal text stays text: no element the journal's strings would have made.
        assert!(
            !dom.contains("<script>alert"),
            "{name}: markup from the journal:\n{dom}"
        );
        assert!(
            !dom.contains("<img src=\"x\""),
            "{name}: markup from a log:\n{dom}"
        );
        let shot = shots.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&shot);
        chromium(&browser, &url, &format!("--screenshot={}", shot.display()));
        let size = std::fs::metadata(&shot).map(|meta| meta.len()).unwrap_or(0);
        assert!(
            size > 10_000,
            "{name}: screenshot {} is {size} bytes",
            shot.display()
        );
    }
}
