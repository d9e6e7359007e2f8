//! Config loader tests: the folder of bad-config fixtures (one insta snapshot of the rendered
//! diagnostics each; adding a case is adding a file) and property tests that no input panics
//! the loader.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use apollo_core::config::{self, LoadError};
use apollo_core::diagnostic::Diagnostic;
use apollo_core::diagnostic::render_all;
use proptest::prelude::*;

const FIXTURES: &str = "tests/fixtures/config";

fn fixture_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .expect("the fixture folder exists")
        .map(|entry| entry.expect("readable fixture folder").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    paths
}

/// Loads a fixture and renders what `apollo check` would print: its diagnostics, then a
/// summary line. A fixture `x.yaml` may come with `x.params`, a params file given for the run
/// (as `apollo run --params-file` would); the environment is empty and `today` is fixed, so
/// the snapshots do not depend on the machine or the day.
fn check_output(path: &Path) -> (String, bool, usize) {
    let params_file = path.with_extension("params");
    let params = if params_file.exists() {
        config::read_params_file(&params_file).expect("a readable params file")
    } else {
        Vec::new()
    };
    let options = config::LoadOptions::default()
        .params(params)
        .env(Default::default())
        .today("2026-12-01")
        .check_notes(true);
    match config::load_with(path, &options) {
        Ok(loaded) => {
            let mut out = render_all(&loaded.warnings);
            out.push_str(&format!("valid, {} warning(s)\n", loaded.warnings.len()));
            (out, true, loaded.warnings.len())
        }
        Err(LoadError::Invalid { diagnostics, .. }) => {
            let n_errors = diagnostics.iter().filter(|d| d.is_error()).count();
            let mut out = render_all(&diagnostics);
            out.push_str(&format!(
                "invalid, {n_errors} error(s), {} warning(s)\n",
                diagnostics.len() - n_errors
            ));
            (out, false, diagnostics.len())
        }
        Err(error) => panic!("{}: {error}", path.display()),
    }
}

#[test]
fn every_fixture_matches_its_diagnostic_snapshot() {
    let paths = fixture_paths();
    assert!(paths.len() >= 25, "only {} fixtures", paths.len());
    for path in paths {
        let stem = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("fixture names are UTF-8")
            .to_owned();
        let (output, valid, n_diagnostics) = check_output(&path);
        // `warn_*` fixtures are valid configs with warnings; every other fixture is invalid.
        if stem.starts_with("warn_") {
            assert!(valid, "{stem} should be valid:\n{output}");
            assert!(n_diagnostics > 0, "{stem} should warn");
        } else {
            assert!(!valid, "{stem} should be invalid:\n{output}");
        }
        insta::with_settings!({
            snapshot_path => "fixtures/config/snapshots",
            prepend_module_to_snapshot => false,
            input_file => &path,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(stem.as_str(), output);
        });
    }
}

#[test]
fn the_bundled_example_is_valid_without_warnings() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/pipeline.yaml");
    let loaded = config::load(&example).expect("the bundled example loads");
    assert!(
        loaded.warnings.is_empty(),
        "{}",
        render_all(&loaded.warnings)
    );
    let names: Vec<&str> = loaded
        .pipeline
        .units
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "fetch_data",
            "clean_data",
            "region_report[north]",
            "region_report[south]",
            "region_report[east]",
            "region_report[west]",
            "save_result"
        ]
    );
    assert_eq!(loaded.params["date"], "2026-11-29");
}

/// The committed schema (`schema/pipeline.schema.json`) is the one the loader's description
/// generates: a key added to the loader without regenerating the file fails here.
#[test]
fn the_committed_schema_is_the_generated_one() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/pipeline.schema.json");
    let committed =
        std::fs::read_to_string(&committed).expect("schema/pipeline.schema.json exists");
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&config::json_schema()).unwrap()
    );
    assert!(
        committed == generated,
        "schema/pipeline.schema.json is out of date: run `cargo run -p apollo-cli -- schema > schema/pipeline.schema.json`"
    );
}

/// Diagnostic codes that say the file's shape is wrong (a key, a type, a value's form): a
/// file the loader rejects with one of them in the file itself must fail the schema too.
const SHAPE_CODES: &[&str] = &[
    "unknown-key",
    "wrong-type",
    "bad-duration",
    "missing-key",
    "missing-execute",
    "empty-command",
    "no-units",
];

fn shape_error(path: &Path, diagnostics: &[Diagnostic]) -> Option<String> {
    diagnostics
        .iter()
        .find(|diagnostic| {
            diagnostic.is_error()
                && SHAPE_CODES.contains(&diagnostic.code)
                && diagnostic.file == path
        })
        .map(Diagnostic::render)
}

/// Configs that load, beyond the fixtures: every feature of the format once.
const VALID_CONFIGS: &[&str] = &[
    "x-unit: &unit {timeout: 30s, retries: 2}\nname: all\nid: all-1\nmax_parallel: 2\nenv: {TZ: UTC, N: 1, B: true}\ndefaults: {timeout: none, retries: 1, retry_delay: 1s, kill_grace: 500ms, idempotent: true, workdir: .}\nparams:\n  day: {type: date, default: today, description: the day}\n  regions: [eu, us]\n  n: 3\nunits:\n  - name: a\n    <<: *unit\n    prepare: [./a.sh, prepare, 1]\n    execute: ./a.sh ${params.day}\n    cleanup: 'true'\n    inputs: [in/*.csv]\n    outputs: [out/a.csv]\n    env: {A: a}\n    workdir: .\n    idempotent: false\n    retries: 0\n  - name: b\n    deps: [a]\n    foreach: {region: \"${params.regions}\", tier: [x, y]}\n    execute: ./b.sh ${item.region} ${item.tier}\n  - name: c\n    deps: [\"b[eu,x]\"]\n    foreach: [1, 2]\n    timeout: 90\n    when: ${params.n} != 4\n    execute: true\n  - name: d\n    when: {command: test -e x}\n    execute: [./d.sh]\n",
    "cost: {cpu_hour: 0.05, gib_hour: \"0.01\", node_hour: {gpu: 2.5, batch: 1}, currency: EUR}\nunits: [{name: a, execute: 'true'}]\n",
    "journal_segment_size: 16MiB\ndefaults: {retry_on_exit: [75, 137], retry_max_delay: 10m, cleanup_timeout: 5m}\nunits: [{name: a, execute: 'true', retries: 3, retry_on_exit: [1], cleanup: 'true', cleanup_timeout: 90}]\n",
];

/// The schema accepts every config that loads, and rejects every fixture the loader rejects
/// for a shape reason (validated with the `jsonschema` crate, as an editor would).
#[test]
fn the_schema_accepts_what_loads_and_rejects_shape_errors() {
    let validator = jsonschema::validator_for(&config::json_schema()).expect("a valid schema");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/pipeline.yaml");
    let mut cases: Vec<(PathBuf, String)> = fixture_paths()
        .into_iter()
        .filter(|path| !path.with_extension("params").exists())
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            (path, text)
        })
        .collect();
    cases.push((example.clone(), std::fs::read_to_string(&example).unwrap()));
    let dir = tempfile::tempdir().unwrap();
    for (index, text) in VALID_CONFIGS.iter().enumerate() {
        let path = dir.path().join(format!("valid{index}.yaml"));
        std::fs::write(&path, text).unwrap();
        cases.push((path, (*text).to_owned()));
    }
    let (mut n_accepted, mut n_rejected) = (0, 0);
    for (path, text) in cases {
        let Some(json) = config::yaml_to_json(&text) else {
            continue; // Not YAML: nothing for a schema to say.
        };
        let options = config::LoadOptions::default().env(Default::default());
        match config::load_with(&path, &options) {
            Ok(_) => {
                let errors: Vec<String> = validator
                    .iter_errors(&json)
                    .map(|error| error.to_string())
                    .collect();
                assert!(
                    errors.is_empty(),
                    "{} loads but fails the schema: {errors:?}",
                    path.display()
                );
                n_accepted += 1;
            }
            Err(LoadError::Invalid { diagnostics, .. }) => {
                if let Some(shape) = shape_error(&path, &diagnostics) {
                    assert!(
                        !validator.is_valid(&json),
                        "the schema accepts {}, which the loader rejects:\n{shape}",
                        path.display()
                    );
                    n_rejected += 1;
                }
            }
            Err(error) => panic!("{}: {error}", path.display()),
        }
    }
    assert!(
        n_accepted >= 5 && n_rejected >= 15,
        "{n_accepted} accepted, {n_rejected} rejected"
    );
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_stack_overflow() {
    let yaml = format!("units: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let Err(LoadError::Invalid { diagnostics, .. }) =
        config::load_str(&yaml, Path::new("deep.yaml"))
    else {
        panic!("deep nesting must be rejected");
    };
    assert_eq!(diagnostics[0].code, "yaml-syntax");
}

#[test]
fn alias_bombs_are_rejected() {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = format!("*a{}", level - 1);
        yaml.push_str(&format!(
            "a{level}: &a{level} [{}]\n",
            vec![previous; 10].join(", ")
        ));
    }
    yaml.push_str("units: *a11\n");
    let result = config::load_str(&yaml, Path::new("bomb.yaml"));
    assert!(matches!(result, Err(LoadError::Invalid { .. })));
}

/// Any JSON-like value, printed as JSON (which is valid YAML flow syntax), with keys drawn
/// mostly from the real config keys so the walk goes deep.
fn arbitrary_yaml() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("name".to_owned()),
        Just("units".to_owned()),
        Just("deps".to_owned()),
        Just("execute".to_owned()),
        Just("timeout".to_owned()),
        Just("retries".to_owned()),
        Just("defaults".to_owned()),
        Just("env".to_owned()),
        Just("outputs".to_owned()),
        Just("idempotent".to_owned()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        "[a-z0-9 ._-]{0,6}".prop_map(|s| format!("{s:?}")),
        Just("\"1h30m\"".to_owned()),
        Just("\"a\"".to_owned()),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|entries| {
                let body: Vec<String> =
                    entries.iter().map(|(k, v)| format!("{k:?}: {v}")).collect();
                format!("{{{}}}", body.join(", "))
            }),
        ]
    })
}

const VALID: &str = "name: etl\ndefaults: { timeout: 30s, retries: 1 }\nunits:\n  - name: fetch\n    execute: ./fetch.sh\n    outputs: [data/a.csv]\n  - name: clean\n    deps: [fetch]\n    execute: [./clean.sh, -v]\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// What a shell owns reaches the unit's command as written, around interpolated params.
    #[test]
    fn shell_references_reach_the_command_unchanged(
        name in "[A-Z_][A-Z0-9_]{0,6}",
        words in prop::collection::vec("[a-z./-]{0,6}", 0..4),
    ) {
        let shell = format!("$$ ${name} ${{{name}}} ${{HOME}} ${{{name}:-x.y}} {}", words.join(" "));
        let yaml = format!(
            "params:\n  day: {{type: date, default: \"2026-11-30\"}}\nunits:\n  - name: a\n    execute: 'echo ${{params.day}} {shell} $${{params.day}}'\n"
        );
        let loaded = config::load_str(&yaml, Path::new("p.yaml")).expect("loads");
        prop_assert_eq!(
            &loaded.pipeline.units[0].execute,
            &apollo_core::Command::Shell(format!("echo 2026-11-30 {shell} ${{params.day}}"))
        );
    }

    #[test]
    fn random_bytes_never_panic_the_loader(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("random.yaml");
        std::fs::write(&path, &bytes).expect("write");
        let _ = config::load(&path);
        let _ = config::load_str(&String::from_utf8_lossy(&bytes), &path);
    }

    #[test]
    fn random_yaml_never_panics_the_loader(yaml in arbitrary_yaml()) {
        if let Err(LoadError::Invalid { diagnostics, .. }) = config::load_str(&yaml, Path::new("random.yaml")) {
            for diagnostic in diagnostics {
                let _ = diagnostic.render();
            }
        }
    }

    #[test]
    fn mangled_configs_never_panic_the_loader(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<char>(), any::<bool>()), 1..8)
    ) {
        let mut text: Vec<char> = VALID.chars().collect();
        for (index, replacement, delete) in edits {
            let at = index.index(text.len());
            if delete { text.remove(at); } else { text.insert(at, replacement); }
        }
        let text: String = text.into_iter().collect();
        if let Err(LoadError::Invalid { diagnostics, .. }) = config::load_str(&text, Path::new("mangled.yaml")) {
            prop_assert!(!diagnostics.is_empty());
            for diagnostic in diagnostics {
                let _ = diagnostic.render();
            }
        }
    }
}

#[test]
fn executor_and_resources_inherit_from_defaults_field_by_field() {
    let yaml = "\
max_cpus: 3
max_memory: 2G
max_jobs: 7
defaults:
  executor: slurm
  resources: {cpus: 2, memory: 512M, slurm: {partition: short, account: lab, on_stop: detach}}
units:
  - name: align
    resources: {cpus: 16, memory: 1.5G, gpus: 1, slurm: {partition: long, extra_args: [--exclusive]}}
    execute: ./align.sh
  - name: summary
    executor: local
    deps: [align]
    execute: ./summary.sh
";
    let loaded = config::load_str(yaml, Path::new("/p/pipeline.yaml")).expect("valid");
    let pipeline = &loaded.pipeline;
    assert_eq!(pipeline.capacity.cpus, Some(3));
    assert_eq!(pipeline.max_jobs, Some(7));
    assert_eq!(pipeline.capacity.memory, Some(2 << 30));
    let align = &pipeline.units[0];
    assert_eq!(align.executor, apollo_core::model::ExecutorKind::Slurm);
    assert_eq!(align.resources.cpus, Some(16));
    assert_eq!(align.resources.memory, Some(3 << 29));
    assert_eq!(align.resources.gpus, Some(1));
    assert_eq!(align.resources.slurm.partition.as_deref(), Some("long"));
    assert_eq!(align.resources.slurm.account.as_deref(), Some("lab"));
    assert_eq!(align.resources.slurm.extra_args, ["--exclusive"]);
    let summary = &pipeline.units[1];
    assert_eq!(summary.executor, apollo_core::model::ExecutorKind::Local);
    assert_eq!(summary.resources.cpus, Some(2));
    assert_eq!(summary.resources.memory, Some(512 << 20));
    assert_eq!(summary.resources.slurm.partition.as_deref(), Some("short"));
    assert!(summary.resources.slurm.extra_args.is_empty());
    assert!(align.resources.slurm.detach_on_stop);
}

/// `acknowledge:` silences the named warnings for its unit only; an unknown code is itself a
/// warning with a suggestion.
#[test]
fn a_unit_acknowledges_its_own_warnings_and_an_unknown_code_is_said() {
    let yaml = "units:
  - name: pay
    idempotent: false
    retries: 2
    acknowledge: [retry-not-idempotent]
    execute: ./pay.sh
  - name: charge
    idempotent: false
    retries: 2
    execute: ./charge.sh
  - name: other
    acknowledge: [retry-not-idempotnet]
    execute: 'true'
";
    let loaded = config::load_str(yaml, Path::new("p.yaml")).expect("loads");
    let text = render_all(&loaded.warnings);
    assert!(!text.contains("unit `pay` is not idempotent"), "{text}");
    assert!(text.contains("unit `charge` is not idempotent"), "{text}");
    assert!(
        text.contains("acknowledges `retry-not-idempotnet`")
            && text.contains("did you mean `retry-not-idempotent`?"),
        "{text}"
    );
    assert_eq!(loaded.warnings.len(), 2, "{text}");
}
