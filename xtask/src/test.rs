//! `cargo xtask test [--budget SUITE=SECONDS]... [CARGO_TEST_ARGS]...`: the README's test
//! command. Runs `cargo test --workspace --no-fail-fast` (with the extra arguments), passes its
//! output through as it comes, and at the end prints what a plain `cargo test` cannot: how long
//! each suite (test binary) took, slowest first, and every test that skipped itself because
//! this machine lacks what it needs (`apollo_core::testing::require`), grouped by what is
//! missing. A `--budget` makes a suite that took longer fail the command (`.ci/run` gives the
//! browser, cluster and validator suites one each).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::{Duration, Instant};

/// What to run, parsed from the command line.
#[derive(Debug, Default, PartialEq)]
struct Options {
    budgets: Vec<(String, u64)>,
    cargo_args: Vec<String>,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if *arg == "--budget" {
            let value = iter
                .next()
                .ok_or("--budget needs SUITE=SECONDS, e.g. --budget e2e=480")?;
            let (suite, seconds) = value
                .split_once('=')
                .and_then(|(suite, seconds)| Some((suite, seconds.parse::<u64>().ok()?)))
                .ok_or_else(|| format!("--budget takes SUITE=SECONDS, not {value:?}"))?;
            options.budgets.push((suite.to_string(), seconds));
        } else {
            options.cargo_args.push((*arg).to_string());
        }
    }
    Ok(options)
}

/// One test binary's run: its name and what its `test result:` line said.
#[derive(Debug, PartialEq)]
struct Suite {
    name: String,
    took: Duration,
    passed: u64,
    failed: u64,
}

/// The suite a line of cargo's output starts, if it starts one: `Running unittests src/lib.rs
/// (target/debug/deps/apollo_core-0123abcd)` is `apollo_core`, `Running tests/e2e/main.rs
/// (target/debug/deps/e2e-…)` is `e2e`, `Doc-tests apollo_core` is `apollo_core (doc)`.
fn suite_started(line: &str) -> Option<String> {
    let line = line.trim();
    if let Some(krate) = line.strip_prefix("Doc-tests ") {
        return Some(format!("{krate} (doc)"));
    }
    let rest = line.strip_prefix("Running ")?;
    let binary = rest.rsplit_once('(')?.1.trim_end_matches(')');
    let file = Path::new(binary).file_name()?.to_str()?;
    let name = file.rsplit_once('-').map_or(file, |(name, _hash)| name);
    Some(if rest.starts_with("unittests ") {
        format!("{name} (unit)")
    } else {
        name.to_string()
    })
}

/// The passed and failed counts of a `test result: ok. 12 passed; 0 failed; …` line.
fn suite_result(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    // `ok. 96 passed; 1 failed; …`: each part ends in "<number> <word>".
    let count = |word: &str| {
        rest.split(';').find_map(|part| {
            let mut words = part.split_whitespace().rev();
            (words.next()? == word).then_some(())?;
            words.next()?.parse().ok()
        })
    };
    Some((count("passed")?, count("failed")?))
}

/// The skips noted in the log, grouped by what was missing: `(reason, tests)`, in first-seen
/// order. A line is `SKIPPED: needs chromium (apt-get install chromium) in some::test`.
fn group_skips(log: &str) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.strip_prefix("SKIPPED: ") else {
            continue;
        };
        let (reason, test) = rest.rsplit_once(" in ").unwrap_or((rest, "?"));
        match groups.iter_mut().find(|(known, _)| known == reason) {
            Some((_, tests)) => tests.push(test.to_string()),
            None => groups.push((reason.to_string(), vec![test.to_string()])),
        }
    }
    groups
}

/// Runs cargo test with stdout and stderr through one pipe (so suite headers and results stay
/// in order), echoing every line, and times each suite from its header to its result line.
fn run_cargo(
    root: &Path,
    options: &Options,
    skip_log: &Path,
) -> Result<(bool, Vec<Suite>), String> {
    let (reader, writer) =
        std::io::pipe().map_err(|error| format!("cannot make a pipe: {error}"))?;
    let writer_too = writer
        .try_clone()
        .map_err(|error| format!("cannot make a pipe: {error}"))?;
    #[allow(clippy::disallowed_methods)] // xtask drives cargo.
    let mut child =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(&options.cargo_args)
            .env(apollo_core::testing::SKIPPED_LOG, skip_log)
            .current_dir(root)
            .stdout(writer)
            .stderr(writer_too)
            .spawn()
            .map_err(|error| format!("cannot run cargo: {error}"))?;
    let mut suites = Vec::new();
    let mut current: Option<(String, Instant)> = None;
    for line in BufReader::new(reader).lines() {
        let line = line.map_err(|error| format!("cannot read cargo's output: {error}"))?;
        println!("{line}");
        if let Some(name) = suite_started(&line) {
            current = Some((name, Instant::now()));
        } else if let Some((passed, failed)) = suite_result(&line)
            && let Some((name, started)) = current.take()
        {
            suites.push(Suite {
                name,
                took: started.elapsed(),
                passed,
                failed,
            });
        }
    }
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait for cargo: {error}"))?;
    Ok((status.success(), suites))
}

/// The summary after every suite ran: times, skips, budgets. Returns the budgets broken.
fn summarise(
    suites: &[Suite],
    skips: &[(String, Vec<String>)],
    budgets: &[(String, u64)],
) -> Vec<String> {
    let passed: u64 = suites.iter().map(|suite| suite.passed).sum();
    let failed: u64 = suites.iter().map(|suite| suite.failed).sum();
    let took: Duration = suites.iter().map(|suite| suite.took).sum();
    println!();
    println!(
        "== {passed} passed, {failed} failed, in {} suites ({:.0} s running tests)",
        suites.len(),
        took.as_secs_f64()
    );
    let mut slowest: Vec<&Suite> = suites.iter().collect();
    slowest.sort_by_key(|suite| std::cmp::Reverse(suite.took));
    let shown: Vec<String> = slowest
        .iter()
        .take(8)
        .map(|suite| format!("{} {:.0} s", suite.name, suite.took.as_secs_f64()))
        .collect();
    println!("   slowest suites: {}", shown.join(", "));
    let skipped: usize = skips.iter().map(|(_, tests)| tests.len()).sum();
    if suites.is_empty() {
        println!("   no suite ran (a build error? see above)");
    } else if skipped == 0 {
        println!("   skipped: none (everything this suite checks was checked here)");
    } else {
        println!("   skipped {skipped} tests: this machine lacks what they need (CI runs them):");
        for (reason, tests) in skips {
            println!("     {reason}: {} — {}", tests.len(), tests.join(", "));
        }
    }
    let mut broken = Vec::new();
    for (name, seconds) in budgets {
        match suites.iter().find(|suite| &suite.name == name) {
            Some(suite) if suite.took > Duration::from_secs(*seconds) => broken.push(format!(
                "suite {name} took {:.0} s, over its budget of {seconds} s (see .ci/run)",
                suite.took.as_secs_f64()
            )),
            Some(_) => {}
            None => broken.push(format!(
                "a budget names suite {name}, which did not run (suites: {})",
                suites
                    .iter()
                    .map(|suite| suite.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    broken
}

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let options = parse(args)?;
    let tmp = root.join("target").join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|error| format!("cannot create {}: {error}", tmp.display()))?;
    let skip_log = tmp.join("skipped.log");
    match std::fs::remove_file(&skip_log) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(format!("cannot remove {}: {error}", skip_log.display())),
    }
    let (passed, suites) = run_cargo(root, &options, &skip_log)?;
    let log = std::fs::read_to_string(&skip_log).unwrap_or_default();
    let broken = summarise(&suites, &group_skips(&log), &options.budgets);
    for message in &broken {
        eprintln!("error: {message}");
    }
    if !passed {
        return Err("tests failed (see above)".into());
    }
    if !broken.is_empty() {
        return Err("a suite went over its time budget".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_named_by_their_binary() {
        let unit = "     Running unittests src/lib.rs (target/debug/deps/apollo_core-0123abcd)";
        assert_eq!(suite_started(unit).as_deref(), Some("apollo_core (unit)"));
        let e2e = "     Running ../../tests/e2e/main.rs (target/debug/deps/e2e-99aa)";
        assert_eq!(suite_started(e2e).as_deref(), Some("e2e"));
        let doc = "   Doc-tests apollo_store";
        assert_eq!(suite_started(doc).as_deref(), Some("apollo_store (doc)"));
        assert_eq!(suite_started("test foo ... ok"), None);
    }

    #[test]
    fn a_result_line_gives_its_counts() {
        let line = "test result: FAILED. 96 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 16.31s";
        assert_eq!(suite_result(line), Some((96, 1)));
        assert_eq!(suite_result("test foo ... ok"), None);
    }

    #[test]
    fn skips_are_grouped_by_what_is_missing() {
        let log = "SKIPPED: needs chromium (apt-get install chromium) in browser::a\n\
                   SKIPPED: needs root (run as root) in lifecycle::b\n\
                   SKIPPED: needs chromium (apt-get install chromium) in browser::c\n";
        let groups = group_skips(log);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, "needs chromium (apt-get install chromium)");
        assert_eq!(groups[0].1, ["browser::a", "browser::c"]);
    }

    #[test]
    fn a_suite_over_its_budget_or_a_budget_for_no_suite_is_reported() {
        let suite = |name: &str, secs| Suite {
            name: name.into(),
            took: Duration::from_secs(secs),
            passed: 1,
            failed: 0,
        };
        let suites = [suite("e2e", 500), suite("serve", 10)];
        let budgets = [
            ("e2e".to_string(), 480),
            ("serve".to_string(), 60),
            ("gone".to_string(), 5),
        ];
        let broken = summarise(&suites, &[], &budgets);
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(broken[0].contains("e2e took 500 s"), "{broken:?}");
        assert!(broken[1].contains("gone"), "{broken:?}");
    }

    #[test]
    fn budgets_are_parsed_and_the_rest_goes_to_cargo() {
        let options = parse(&["--budget", "e2e=480", "--locked"]).unwrap();
        assert_eq!(options.budgets, [("e2e".to_string(), 480)]);
        assert_eq!(options.cargo_args, ["--locked"]);
        assert!(parse(&["--budget", "e2e"]).is_err());
        assert!(parse(&["--budget"]).is_err());
    }
}
