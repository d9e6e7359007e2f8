//! A running run followed to its end in a real browser: headless Chromium, driven through the
//! DevTools protocol (`common::devtools`), opens a running attempt's page; the
//! test waits — inside the page, with a promise, no sleeps — until the page's event stream is
//! connected, lets the unit finish (through a FIFO), then waits until the page shows the
//! unit's last output and says the run finished, without a reload. A second test drives the
//! pages by keyboard (Tab reaches every link and control with a visible focus, Enter opens a
//! run) and measures the contrast of every piece of text as the browser drew it (WCAG AA).
//! Without Chromium the tests say SKIPPED (and fail under CI=true).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common;

use std::io::Write;

use common::devtools::{DevTools, launch, when};
use common::{INSTALL_HINT, Served, find_chromium, mkfifo, project, run_pipeline, unblock};

const PIPELINE: &str = "\
name: live
units:
  - name: wait
    execute: echo started > started.fifo; echo first-line; read line < go.fifo; echo \"after $line\"
";

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
