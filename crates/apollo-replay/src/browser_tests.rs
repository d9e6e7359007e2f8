//! The HTML report rendered by a real browser: headless Chromium loads the file and dumps the
//! DOM after its scripts ran, and the test checks the chart is in it and that journal text
//! stayed text.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use apollo_core::event::RunStatus;

use crate::testkit::{RunBuilder, SHOWCASE_UNITS, showcase_run};
use crate::{Timeline, write_html};

/// How to provide the browser (Debian; `.ci/run` does it).
const INSTALL_HINT: &str = "apt-get install chromium";

/// A generous safety net: a cold Chromium start on a loaded 2-core machine takes seconds.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

/// The Chromium on `PATH`, if any.
fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
}

/// Loads `page` in headless Chromium and returns the DOM it rendered.
fn dump_dom(chromium: &Path, page: &Path, profile: &Path) -> String {
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
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("could not start {} ({error})", chromium.display()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut dom = String::new();
        let result = stdout.read_to_string(&mut dom).map(|_| dom);
        let _ = sender.send(result);
    });
    match receiver.recv_timeout(BROWSER_TIMEOUT) {
        Ok(dom) => {
            let status = child.wait().expect("wait for chromium");
            assert!(status.success(), "chromium failed: {status}");
            dom.expect("read chromium's output")
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not render the page within {BROWSER_TIMEOUT:?}");
        }
    }
}

#[test]
fn html_report_renders_its_gantt_chart_in_headless_chromium() {
    let chromium = find_chromium();
    if !apollo_core::testing::require(chromium.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let chromium = chromium.expect("checked just above");
    let mut run = showcase_run();
    // Journal text is user data: markup in a unit name or an error must stay text.
    let hostile = "evil<b id=\"pwned\">x</b>";
    run.start(90_040, hostile, 1).fail(
        90_050,
        hostile,
        1,
        2,
        "</title><img id=\"pwned2\" src=x onerror=\"document.body.id='owned'\">",
    );
    run.end(90_060, RunStatus::Failed, 4, 2, 2);
    let timeline = Timeline::from_records(run.reads()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let mut html = Vec::new();
    write_html(&timeline, &mut html).unwrap();
    std::fs::write(&page, &html).unwrap();
    let profile = tempfile::tempdir().unwrap();

    let dom = dump_dom(&chromium, &page, profile.path());

    assert!(dom.contains("<svg id=\"gantt\""), "no chart in:\n{dom}");
    // One bar per attempt: 8 in the showcase run, plus the hostile unit's.
    assert_eq!(dom.matches("<rect class=\"bar ").count(), 9, "{dom}");
    // The inline script ran and found the bars.
    assert!(
        dom.contains("data-bars=\"9\""),
        "the page's script did not run:\n{dom}"
    );
    for unit in SHOWCASE_UNITS {
        assert!(
            dom.contains(&format!("data-unit=\"{unit}\"")),
            "no {unit} in:\n{dom}"
        );
    }
    assert!(dom.contains("data-status=\"timed_out\""));
    assert!(dom.contains("data-attempt=\"2\""));
    assert!(dom.contains("class=\"bar s-unfinished\""));
    assert!(dom.contains("skipped: upstream slow failed"));
    assert!(dom.contains("class=\"resume\""));
    assert!(dom.contains("data-verdict=\"failed\""));
    assert!(dom.contains("20261130T021507Z-3f9a"));
    // The hostile strings are text in the DOM, never elements or live handlers.
    assert!(
        !dom.contains("<b id=\"pwned\""),
        "unit name became markup:\n{dom}"
    );
    assert!(!dom.contains("<img"), "error text became markup:\n{dom}");
    assert!(
        !dom.contains("id=\"owned\""),
        "an injected handler ran:\n{dom}"
    );
    assert!(
        dom.contains("evil&lt;b id=\"pwned\"&gt;x&lt;/b&gt;"),
        "{dom}"
    );
}

#[test]
fn html_report_of_an_empty_journal_is_still_a_page() {
    let timeline = Timeline::from_records(RunBuilder::new("r", &[]).reads()).unwrap();
    let mut html = Vec::new();
    write_html(&timeline, &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains("<svg id=\"gantt\""));
    assert_eq!(html.matches("<rect class=\"bar ").count(), 0);
    // Self-contained: the only URL is the SVG namespace; nothing is loaded.
    assert_eq!(html.matches("http").count(), 1, "{html}");
    assert!(
        !html.contains(" src=") && !html.contains(" href="),
        "{html}"
    );
}

#[test]
fn html_report_with_extras_renders_to_a_screenshot_in_headless_chromium() {
    let chromium = find_chromium();
    if !apollo_core::testing::require(chromium.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let chromium = chromium.expect("checked just above");
    let timeline = Timeline::from_records(showcase_run().reads()).unwrap();
    let deps = std::collections::HashMap::from([("slow".to_owned(), vec!["transform".to_owned()])]);
    let timeouts = std::collections::HashMap::from([("slow".to_owned(), 30_000)]);
    let excerpt = |_: &str, _: u32| Some("Traceback (most recent call last):\n".to_owned());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let mut html = Vec::new();
    crate::write_html_with(
        &timeline,
        &mut html,
        &crate::HtmlExtras::new()
            .deps(deps)
            .timeouts_ms(timeouts)
            .excerpts(&excerpt),
    )
    .unwrap();
    std::fs::write(&page, &html).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("report.png");

    // The test drives a browser, not a unit: apollo-exec's process rules are for units.
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let deadline = std::time::Instant::now() + BROWSER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not take the screenshot within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "chromium failed: {status}");
    let png = std::fs::read(&shot).expect("a screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A rendered chart with a table compresses to far more than a blank page does.
    assert!(
        png.len() > 20_000,
        "a nearly empty screenshot: {} bytes",
        png.len()
    );
}
