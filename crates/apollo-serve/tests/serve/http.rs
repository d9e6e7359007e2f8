//! `apollo serve` over loopback HTTP: every endpoint, the token rule, escaping of what the
//! journal holds, and 4xx (never a panic) for bad requests.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common;

use apollo_store::StateDir;
use common::{HOSTILE, Served, get, state_with_runs};

#[test]
fn the_token_is_required_on_every_address() {
    let (_dir, state_dir) = state_with_runs();
    let served = Served::start(&state_dir);
    for path in [
        "/",
        "/runs/latest",
        "/runs/latest/units/fetch",
        "/diff",
        "/history?pipeline=web",
        "/api/runs",
        "/api/runs/latest",
        "/assets/app.js",
        "/no/such/page",
    ] {
        let none = get(served.addr, path, &[]);
        assert_eq!(none.status, 401, "{path} without a token");
        assert!(none.header("www-authenticate").is_some());
        let separator = if path.contains('?') { '&' } else { '?' };
        let wrong = get(
            served.addr,
            &format!("{path}{separator}token=0123456789abcdef"),
            &[],
        );
        assert_eq!(wrong.status, 403, "{path} with a wrong token");
        let bearer = get(served.addr, path, &[("Authorization", "Bearer nope")]);
        assert_eq!(bearer.status, 403, "{path} with a wrong bearer");
        let cookie = get(served.addr, path, &[("Cookie", "apollo_token_1=nope")]);
        assert_eq!(cookie.status, 401, "{path} with another server's cookie");
    }
    // The URL's token once: the answer sets the cookie, which then suffices.
    let after_scheme = served.url.strip_prefix("http://").unwrap();
    let path = &after_scheme[after_scheme.find('/').unwrap()..];
    assert!(path.starts_with("/?token="), "{path}");
    let first = get(served.addr, path, &[]);
    assert_eq!(first.status, 200);
    let cookie = first.header("set-cookie").expect("a cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let again = get(served.addr, "/runs/latest", &[("Cookie", pair)]);
    assert_eq!(again.status, 200);
    assert_eq!(served.get("/").status, 200);
}

/// Every file and folder below `root` with its length and modification time.
fn snapshot(root: &std::path::Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                folders.push(entry.path());
            }
            found.push((entry.path(), meta.len(), meta.modified().unwrap()));
        }
    }
    found.sort();
    found
}

#[test]
fn every_page_and_endpoint_answers_with_what_the_cli_says() {
    let (_dir, state_dir) = state_with_runs();
    let before = snapshot(&state_dir);
    let served = Served::start(&state_dir);
    let state = StateDir::open_existing(&state_dir).unwrap();
    let first = state.run_ids().unwrap()[0].clone();
    let first = first.as_str();

    let runs = served.ok("/");
    assert!(runs.contains(first) && runs.contains("Runs"), "{runs}");
    assert!(runs.contains("&lt;b&gt;day&lt;/b&gt;") && !runs.contains("<b>day</b>"));
    let filtered = served.ok("/?status=succeeded");
    assert!(filtered.contains("No run matches"), "{filtered}");
    assert!(served.ok("/?q=DAY").contains(first));

    let run = served.ok(&format!("/runs/{first}"));
    for text in [
        "fetch",
        "bad",
        "failed",
        "Attempts over time",
        "/report",
        "class=\"node s-failed\"",
    ] {
        assert!(run.contains(text), "run page lacks {text}");
    }
    let report = served.ok(&format!("/runs/{first}/report"));
    assert!(report.contains("<svg") || report.contains("lane"), "report");

    let unit = served.ok(&format!("/runs/{first}/units/bad"));
    for text in [
        "exit 3",
        "echo oops",
        "oops",
        "apollo reproduce",
        "Input hash",
    ] {
        assert!(unit.contains(text), "unit page lacks {text}");
    }
    let fetch = served.ok(&format!("/runs/{first}/units/fetch?attempt=1"));
    assert!(fetch.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!fetch.contains("<img src=x"));

    let history = served.ok("/history?pipeline=web");
    assert!(
        history.contains("class=\"cell s-failed\"") && history.contains(first),
        "{history}"
    );
    // `apollo stats`'s numbers and its timeout advice, from the same read side.
    assert!(
        history.contains("<h2>Numbers</h2>") && history.contains("is above 10 × its p95 of"),
        "{history}"
    );
    assert_eq!(served.get("/history").status, 400);
    let diff = served.ok(&format!("/diff?a={first}&b=latest"));
    assert!(
        diff.contains("units differ") || diff.contains("the same"),
        "{diff}"
    );

    // The JSON documents are the CLI's (built by the same read side).
    let json = |path: &str| -> serde_json::Value {
        let response = served.get(path);
        assert_eq!(response.status, 200, "{path}: {}", response.body);
        assert!(
            response
                .header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        serde_json::from_str(&response.body).unwrap()
    };
    assert_eq!(
        json("/api/runs?pipeline=nope")["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let show = json(&format!("/api/runs/{first}"));
    assert_eq!(show["schema"], "apollo.show_run/3");
    assert_eq!(show["status"], "failed");
    let unit = json(&format!("/api/runs/{first}/units/bad"));
    assert_eq!(unit["schema"], "apollo.show_unit/3");
    assert_eq!(unit["attempts"][0]["outcome"]["exit"]["code"], 3);
    let diff = json(&format!("/api/diff?a={first}&b={first}"));
    assert!(diff["schema"].as_str().unwrap().starts_with("apollo.diff/"));
    let log = served.get(&format!("/api/runs/{first}/units/bad/log?stream=stderr"));
    assert_eq!((log.status, log.body.as_str()), (200, "oops\n"));
    assert_eq!(log.header("x-apollo-log-length"), Some("5"));
    assert!(served.ok("/assets/app.css").contains("badge"));
    drop(served);
    assert_eq!(
        before,
        snapshot(&state_dir),
        "serve wrote into the state directory"
    );
}

#[test]
fn a_unit_named_script_is_text() {
    let (_dir, state_dir) = state_with_runs();
    let served = Served::start(&state_dir);
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    let run = served.ok("/runs/latest");
    assert!(run.contains(escaped), "{run}");
    assert!(!run.contains(HOSTILE));
    let encoded = "%3Cscript%3Ealert%281%29%3C%2Fscript%3E";
    assert!(run.contains(encoded), "the link to it is percent-encoded");
    // Its page renders; its logs are not read (the name is not a folder name).
    let unit = served.ok(&format!("/runs/latest/units/{encoded}"));
    assert!(unit.contains(escaped) && !unit.contains(HOSTILE));
    let api = served.get(&format!("/api/runs/latest/units/{encoded}/log"));
    assert_eq!(api.status, 400, "{}", api.body);
}

#[test]
fn bad_requests_get_4xx_and_a_damaged_journal_says_where() {
    let (_dir, state_dir) = state_with_runs();
    let served = Served::start(&state_dir);
    for (path, status) in [
        ("/runs/nope", 404),
        ("/runs/latest~x", 400),
        ("/runs/latest~99", 404),
        ("/runs/2026", 400),
        ("/runs/..%2F..%2Fetc", 404),
        ("/runs/latest/units/nope", 404),
        ("/runs/latest/units/..%2F..%2Fetc%2Fpasswd", 404),
        ("/runs/latest/units/fetch?attempt=9", 404),
        ("/runs/latest/units/fetch?attempt=x", 400),
        ("/api/runs/nope", 404),
        ("/api/runs/latest/units/fetch/log?stream=x", 400),
        ("/api/diff?a=latest", 400),
        ("/runs/%FF", 400),
        ("/nothing", 404),
    ] {
        let response = served.get(path);
        assert_eq!(response.status, status, "{path}: {}", response.body);
    }
    assert!(served.get("/api/runs/nope").body.contains("\"error\""));
    // Damage the first run's journal mid-file: its page says damaged, and where.
    let state = StateDir::open_existing(&state_dir).unwrap();
    let first = state.run_ids().unwrap()[0].clone();
    let segment = state
        .run_dir(&first)
        .unwrap()
        .journal_dir()
        .join("000001.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&segment, bytes).unwrap();
    let page = served.get(&format!("/runs/{first}"));
    assert!(page.body.contains("damaged"), "{}", page.body);
    assert!(page.body.contains("000001.log"), "{}", page.body);
    assert_eq!(
        served.get("/").status,
        200,
        "the runs page still lists every run"
    );
}

/// A pipeline of `n` units in a chain of three levels: `a0`, then `b1..` after it, then `c`
/// after every `b`; one `b` fails.
fn wide_pipeline(n: usize) -> String {
    let mut yaml = String::from("name: wide\nunits:\n  - name: a0\n    execute: 'true'\n");
    for index in 1..n - 1 {
        let command = if index == 1 { "exit 1" } else { "'true'" };
        yaml.push_str(&format!(
            "  - name: b{index}\n    deps: [a0]\n    execute: {command}\n"
        ));
    }
    let bs: Vec<String> = (1..n - 1).map(|index| format!("b{index}")).collect();
    yaml.push_str(&format!(
        "  - name: c\n    deps: [{}]\n    execute: 'true'\n",
        bs.join(", ")
    ));
    yaml
}

#[test]
fn the_graph_is_drawn_with_its_edges_and_by_depth_past_the_size_drawn() {
    let (dir, config) = common::project(&wide_pipeline(4));
    common::run_pipeline(&config);
    let (big_dir, big_config) = common::project(&wide_pipeline(205));
    common::run_pipeline(&big_config);

    let served = Served::start(&dir.path().join(".apollo"));
    let page = served.ok("/runs/latest");
    assert!(page.contains("<svg class=\"dag-svg\""), "{page}");
    // a0 → b1, a0 → b2, b1 → c, b2 → c: four edges.
    assert_eq!(
        page.matches("marker-end=\"url(#arrow)\"").count(),
        4,
        "{page}"
    );
    assert!(page.contains("<a class=\"node s-failed\""), "{page}");
    drop(served);

    let served = Served::start(&big_dir.path().join(".apollo"));
    let page = served.ok("/runs/latest");
    assert!(!page.contains("<svg"), "205 units are not drawn");
    assert!(page.contains("Graph by depth"), "{page}");
    // Depth 1 holds the 203 b's, one failed and named; depth 2 the c left not run.
    assert!(
        page.contains("<th scope=\"row\">1</th><td class=\"num\">203</td>"),
        "{page}"
    );
    assert!(page.contains("href=\"/runs/"), "{page}");
    assert!(page.contains(">b1</a>"), "{page}");
    assert!(
        page.contains("<th scope=\"row\">2</th><td class=\"num\">1</td>"),
        "{page}"
    );
}

#[test]
fn api_runs_gives_pages_of_the_clis_items_newest_first() {
    let (_dir, state_dir) = state_with_runs();
    let served = Served::start(&state_dir);
    let first = StateDir::open_existing(&state_dir)
        .unwrap()
        .run_ids()
        .unwrap()[0]
        .clone();
    let first = first.as_str();
    let json =
        |path: &str| -> serde_json::Value { serde_json::from_str(&served.ok(path)).unwrap() };
    // A page of runs, newest first, each item exactly the CLI's `apollo runs --format json`
    // item (apollo.runs/2).
    let runs = json("/api/runs");
    assert_eq!(runs["schema"], "apollo.runs_page/1");
    assert_eq!(
        (runs["total"].as_u64(), runs["page"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(runs["next"].is_null(), "{runs}");
    let state = apollo_runner::read::open(&state_dir).unwrap().unwrap();
    let summaries = apollo_runner::read::list_runs(&state, false).unwrap();
    let mut cli = apollo_runner::read::run_lines(&state, &summaries, chrono::Utc::now());
    cli.reverse();
    let strip = |mut value: serde_json::Value| {
        for item in value.as_array_mut().unwrap() {
            item.as_object_mut().unwrap().remove("duration_ms");
        }
        value
    };
    assert_eq!(
        strip(runs["runs"].clone()),
        strip(serde_json::to_value(&cli).unwrap())
    );
    assert_eq!(runs["runs"][1]["counts"]["failed"], 1);
    let first_page = json("/api/runs?limit=1");
    assert_eq!(first_page["runs"][0]["id"], cli[0].id.as_str());
    assert_eq!(first_page["next"], "/api/runs?page=2&limit=1");
    let second_page = json("/api/runs?limit=1&page=2");
    assert_eq!(second_page["runs"][0]["id"], first);
    assert!(second_page["next"].is_null());
    assert_eq!(
        json("/api/runs?limit=1&page=9")["runs"],
        serde_json::json!([])
    );
}

/// A run with a price table (`cost:`): its page shows the run's cost, wasted and saved, and a
/// Cost column in the unit table, as `apollo show --format json` (the same document, from
/// the API) counts them; a run without one shows no cost.
#[test]
fn the_run_page_shows_cost_wasted_and_saved_when_the_run_has_a_price_table() {
    let (dir, config) = common::project(
        "name: priced\ncost: {cpu_hour: 3600, gib_hour: 36.5, currency: EUR}\nunits:\n  \
         - name: fails\n    execute: exit 3\n  - name: works\n    execute: echo done\n",
    );
    common::run_pipeline(&config);
    let served = common::Served::start(&dir.path().join(".apollo"));
    let api = served.get("/api/runs/latest");
    assert_eq!(api.status, 200);
    let document: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    let cost = &document["cost"];
    let amount = |value: &serde_json::Value| {
        value
            .as_str()
            .unwrap()
            .parse::<apollo_core::cost::Money>()
            .unwrap()
    };
    let fails = amount(&document["units"][0]["cost"]["total"]);
    let works = amount(&document["units"][1]["cost"]["total"]);
    assert_eq!(amount(&cost["total"]), fails + works);
    assert_eq!(amount(&cost["wasted"]), fails);
    let page = served.get("/runs/latest");
    assert_eq!(page.status, 200);
    let show = |money: apollo_core::cost::Money| format!("{} EUR", money.human());
    assert!(page.body.contains("<dt>Cost</dt>"), "{}", page.body);
    assert!(page.body.contains(&show(fails + works)), "{}", page.body);
    assert!(
        page.body.contains(&format!("wasted {}", show(fails))),
        "{}",
        page.body
    );
    assert!(page.body.contains("<th scope=\"col\">Cost</th>"));
    drop(served);
    let (_dir, state_dir) = state_with_runs();
    let served = Served::start(&state_dir);
    let page = served.get("/runs/latest");
    assert!(!page.body.contains("Cost"), "{}", page.body);
}
