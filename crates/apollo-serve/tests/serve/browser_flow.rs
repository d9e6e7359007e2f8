//! The "done when", in a real browser: a user opens the URL `apollo serve` printed (the
//! runs page), sees a run start there without a reload, opens it and watches it live until it
//! fails, clicks from the failed unit to its stderr, and from there to the diff with the last
//! good run of the same pipeline. Headless Chromium through the DevTools protocol; no sleeps
//! (the page is watched with promises, the unit held on a FIFO). A screenshot of each step
//! is kept under `target/tmp/apollo-serve-screenshots/flow-*.png`. Without Chromium the test
//! says SKIPPED (and fails under CI=true).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common;

use std::io::Write;
use std::path::Path;

use common::devtools::{DevTools, launch, when};
use common::{INSTALL_HINT, Served, find_chromium, mkfifo, project, run_pipeline, unblock};

/// `check` waits for a word on `go.fifo` and fails unless it is `ok`.
const PIPELINE: &str = "\
name: flow
units:
  - name: prepare
    execute: echo prepared
  - name: check
    deps: [prepare]
    execute: |
      echo started > started.fifo
      read line < go.fifo
      echo \"checked $line\"
      if [ \"$line\" != ok ]; then echo \"bad input: $line\" >&2; exit 4; fi
";

fn navigations(devtools: &mut DevTools) -> serde_json::Value {
    devtools.evaluate("performance.getEntriesByType('navigation').length")
}

#[test]
fn a_user_watches_a_run_fail_and_clicks_to_its_stderr_and_the_diff_with_the_last_good_run() {
    let found = find_chromium();
    if !apollo_core::testing::require(found.is_some(), "chromium", INSTALL_HINT) {
        return;
    }
    let chromium = found.expect("checked just above");
    let (dir, config) = project(PIPELINE);
    let (started, go) = (dir.path().join("started.fifo"), dir.path().join("go.fifo"));
    // The good run: plain files instead of FIFOs, so it runs straight through.
    std::fs::write(&go, "ok\n").unwrap();
    let good = run_pipeline(&config);
    assert_eq!(
        good.report.status,
        Some(apollo_core::event::RunStatus::Succeeded)
    );
    let good = good.run_id.as_str().to_owned();
    std::fs::remove_file(&started).unwrap();
    std::fs::remove_file(&go).unwrap();
    mkfifo(&started);
    mkfifo(&go);

    let served = Served::start(&dir.path().join(".apollo"));
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("apollo-serve-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    // 1. The URL `apollo serve` printed: the runs page, following runs live.
    let (browser, port) = launch(&chromium, &served.url, &go);
    let mut devtools = DevTools::connect(port);
    devtools.evaluate(&when(&format!(
        "status.indexOf('live') === 0 && text.indexOf('{good}') >= 0"
    )));
    devtools.call("Page.enable", serde_json::json!({}));
    devtools.screenshot(&shots.join("flow-1-runs.png"));

    // 2. A run starts: it appears on the runs page, running, without a reload.
    let runner = {
        let (config, started) = (config.clone(), started.clone());
        std::thread::spawn(move || {
            let finished = run_pipeline(&config);
            unblock(&started, "run over\n");
            finished
        })
    };
    let said = std::fs::read_to_string(&started).expect("read started.fifo");
    assert_eq!(said.trim(), "started");
    let text = devtools.evaluate(&when("document.querySelector('tr.r-running') !== null"));
    assert!(
        text.as_str().is_some_and(|text| text.contains(&good)),
        "{text}"
    );
    assert_eq!(navigations(&mut devtools), 1, "the runs page was reloaded");
    devtools.screenshot(&shots.join("flow-2-runs-live.png"));

    // 3. Its page, followed live until the unit fails.
    let run_link =
        devtools.evaluate("document.querySelector('tr.r-running a').getAttribute('href')");
    let run_link = run_link
        .as_str()
        .expect("the running run's link")
        .to_owned();
    devtools.navigate(&format!("http://{}{run_link}", served.addr));
    devtools.evaluate(&when(
        "status.indexOf('live') === 0 && text.indexOf('check') >= 0",
    ));
    devtools.screenshot(&shots.join("flow-3-run-live.png"));
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .expect("open go.fifo");
    fifo.write_all(b"bad\n").expect("write go.fifo");
    drop(fifo);
    let failed = runner.join().expect("the run's thread");
    assert_eq!(
        failed.report.status,
        Some(apollo_core::event::RunStatus::Failed)
    );
    let failed = failed.run_id.as_str().to_owned();
    assert!(run_link.ends_with(&failed), "{run_link}");
    devtools.evaluate(&when(
        "status.indexOf('finished') === 0 && document.querySelector('table.units tr.s-failed') !== null",
    ));
    assert_eq!(navigations(&mut devtools), 1, "the run's page was reloaded");

    from_the_failed_unit(&mut devtools, &shots, (&good, &failed));
    for step in [
        "flow-1-runs",
        "flow-2-runs-live",
        "flow-3-run-live",
        "flow-4-failed-unit",
        "flow-5-diff",
    ] {
        let size =
            std::fs::metadata(shots.join(format!("{step}.png"))).map_or(0, |meta| meta.len());
        assert!(size > 10_000, "{step}.png is {size} bytes");
    }
    drop(browser);
}

/// Steps 4 and 5, on the failed run's page: from the failed unit to its stderr, then to the
/// diff with the last good run of the pipeline.
fn from_the_failed_unit(devtools: &mut DevTools, shots: &Path, (good, failed): (&str, &str)) {
    // 4. From the failed unit to its stderr.
    let loads = devtools.loads;
    devtools.evaluate("document.querySelector('table.units tr.s-failed a').click()");
    devtools.wait_load(loads);
    let text = devtools.evaluate(&when(
        "location.pathname.indexOf('/units/check') > 0 && text.indexOf('bad input: bad') >= 0",
    ));
    assert!(
        text.as_str().is_some_and(|text| text.contains("exit 4")),
        "{text}"
    );
    devtools.screenshot(&shots.join("flow-4-failed-unit.png"));
    let stderr = devtools.evaluate(
        "(function () { document.querySelector('.failed-links a[href=\"#stderr\"]').click(); \
         var heading = document.getElementById('stderr'); \
         return {hash: location.hash, text: heading.nextElementSibling.textContent}; })()",
    );
    assert_eq!(stderr["hash"], "#stderr", "{stderr}");
    assert!(
        stderr["text"]
            .as_str()
            .is_some_and(|text| text.contains("bad input: bad")),
        "{stderr}"
    );

    // 5. And to the diff with the last good run of the pipeline.
    let compare =
        devtools.evaluate("document.querySelector('a.compare-good').getAttribute('href')");
    assert_eq!(
        compare.as_str(),
        Some(format!("/diff?a={good}&b={failed}").as_str())
    );
    let loads = devtools.loads;
    devtools.evaluate("document.querySelector('a.compare-good').click()");
    devtools.wait_load(loads);
    let text = devtools.evaluate(&when(
        "location.pathname === '/diff' && text.indexOf('check') >= 0",
    ));
    let text = text.as_str().unwrap_or_default();
    assert!(
        text.contains(good) && text.contains(failed) && text.contains("failed"),
        "{text}"
    );
    devtools.screenshot(&shots.join("flow-5-diff.png"));
}
