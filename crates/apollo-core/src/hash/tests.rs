use super::*;

#[test]
fn hex_is_written_and_read_back_as_lower_case_sha256_digits_only() {
    let digest: [u8; 32] = Sha256::digest(b"apollo").into();
    let hex = to_hex(&digest);
    assert_eq!(hex, sha256_hex(b"apollo"));
    assert_eq!(to_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    assert_eq!(sha256_from_hex(&hex), Some(digest));
    assert!(is_hex_of(&hex, &digest));
    for (at, bad) in [
        (0, 'A'),
        (63, 'g'),
        (10, ' '),
        (31, '/'),
        (32, ':'),
        (5, 'F'),
    ] {
        let mut text = hex.clone().into_bytes();
        text[at] = bad as u8;
        let text = String::from_utf8(text).unwrap();
        assert_eq!(sha256_from_hex(&text), None, "{text}");
        assert!(!is_hex_of(&text, &digest), "{text}");
    }
    let not_ascii = format!("é{}", &hex[2..]);
    assert_eq!(not_ascii.len(), 64);
    assert_eq!(sha256_from_hex(&not_ascii), None);
    assert_eq!(sha256_from_hex(&hex[..62]), None);
    assert_eq!(sha256_from_hex(&format!("{hex}0")), None);
    assert!(!is_hex_of(&hex[..62], &digest));
}

#[test]
fn sha256_is_the_standard_one() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn command_forms_hash_differently() {
    let shell = Command::Shell("echo hi".into());
    let argv = Command::Argv(vec!["echo".into(), "hi".into()]);
    assert_ne!(command_hash(&shell), command_hash(&argv));
    // Length prefixes keep argument boundaries.
    let split_a = Command::Argv(vec!["ab".into(), "c".into()]);
    let split_b = Command::Argv(vec!["a".into(), "bc".into()]);
    assert_ne!(command_hash(&split_a), command_hash(&split_b));
}

#[test]
fn changes_are_named() {
    let component = |kind, name: &str, hash: &str| InputComponent {
        kind,
        name: name.into(),
        hash: hash.into(),
    };
    let before = vec![
        component(InputKind::File, "a.csv", "1"),
        component(InputKind::Upstream, "fetch", "2"),
    ];
    let after = vec![
        component(InputKind::File, "a.csv", "9"),
        component(InputKind::Env, "TZ", "3"),
    ];
    assert_eq!(
        describe_input_changes(&before, &after),
        vec![
            "input file a.csv changed",
            "env TZ added",
            "upstream fetch output removed"
        ]
    );
}

/// A param used as `${params.x}` is in the command already: the `APOLLO_PARAM_X` a unit
/// now receives changes no input hash. A command reading the variable hashes it.
#[test]
fn param_variables_are_hashed_only_when_a_command_names_them() {
    let load = |execute: &str, day: &str| {
        let yaml = format!(
            "params:\n  day: {{type: string, default: x}}\n  dayx: {{type: string, default: y}}\nunits:\n  - name: u\n    execute: '{execute}'\n"
        );
        let options = crate::config::LoadOptions::default()
            .params(vec![crate::config::ParamOverride::text("day", day, "-p")]);
        crate::config::load_str_with(&yaml, Path::new("/p/pipeline.yaml"), &options)
            .unwrap()
            .pipeline
            .units
            .remove(0)
    };
    let env_names = |unit: &Unit| -> Vec<String> {
        input_components(unit, Path::new("/p"), &[])
            .unwrap()
            .into_iter()
            .filter(|component| component.kind == InputKind::Env)
            .map(|component| component.name)
            .collect()
    };
    let by_placeholder = load("echo ${params.day}", "2026-11-30");
    assert_eq!(by_placeholder.env["APOLLO_PARAM_DAY"], "2026-11-30");
    assert!(env_names(&by_placeholder).is_empty());
    let plain = load("echo 2026-11-30", "2026-11-30");
    assert_eq!(
        input_components(&by_placeholder, Path::new("/p"), &[]).unwrap(),
        input_components(&plain, Path::new("/p"), &[]).unwrap(),
        "the same command, the same input hash"
    );
    let by_variable = load(r#"echo "$APOLLO_PARAM_DAY""#, "2026-11-30");
    assert_eq!(by_variable.env["APOLLO_PARAM_DAY"], "2026-11-30");
    assert!(!by_variable.env.contains_key("APOLLO_PARAM_DAYX"));
    assert_eq!(env_names(&by_variable), ["APOLLO_PARAM_DAY"]);
    let other_day = load(r#"echo "$APOLLO_PARAM_DAY""#, "2026-12-01");
    assert_ne!(
        input_components(&by_variable, Path::new("/p"), &[]).unwrap(),
        input_components(&other_day, Path::new("/p"), &[]).unwrap(),
        "a change of the value reruns a unit that reads it from its environment"
    );
}

#[test]
fn a_change_of_quoting_alone_is_named() {
    let old = |script: &str| command_hash(&Command::Shell(script.to_owned()));
    let now = Command::Shell(r"./x.sh 'fixed' 'a b' 'it'\''s' c".to_owned());
    assert!(only_quoting_changed(
        &now,
        &old("./x.sh 'fixed' a b it's c")
    ));
    assert!(only_quoting_changed(
        &now,
        &old("./x.sh 'fixed' 'a b' it's c")
    ));
    assert!(!only_quoting_changed(
        &now,
        &old("./x.sh 'fixed' a b its c")
    ));
    assert!(!only_quoting_changed(
        &now,
        &old(r"./x.sh 'fixed' 'a b' 'it'\''s' c")
    ));
    let mut unit = unit_with(&[], &[]);
    unit.execute = now;
    let before = [InputComponent {
        kind: InputKind::Command,
        name: "execute".to_owned(),
        hash: old("./x.sh fixed a b it's c"),
    }];
    let mut changes = vec![
        "command execute changed".to_owned(),
        "env A added".to_owned(),
    ];
    explain_quoting_changes(&mut changes, &unit, &before);
    assert_eq!(
        changes,
        [
            "command execute changed (quoting changed: values are now quoted, see UPGRADING.md)",
            "env A added"
        ]
    );
}

fn unit_with(inputs: &[&str], outputs: &[&str]) -> Unit {
    let yaml = "units:\n  - name: u\n    execute: \"true\"\n";
    let mut unit = crate::config::load_str(yaml, Path::new("/p/pipeline.yaml"))
        .unwrap()
        .pipeline
        .units
        .remove(0);
    unit.inputs = inputs.iter().map(|input| (*input).to_owned()).collect();
    unit.outputs = outputs.iter().map(|output| (*output).to_owned()).collect();
    unit
}

#[test]
fn a_secret_enters_the_input_hash_by_name_and_source_never_by_value() {
    use crate::model::SecretSource;
    let mut unit = unit_with(&[], &[]);
    let without = input_components(&unit, Path::new("/p"), &[]).unwrap();
    unit.secrets.insert(
        "API_TOKEN".to_owned(),
        SecretSource::Env("API_TOKEN".to_owned()),
    );
    let with = input_components(&unit, Path::new("/p"), &[]).unwrap();
    assert_ne!(combine_components(&without), combine_components(&with));
    let component = with
        .iter()
        .find(|component| component.name == "API_TOKEN")
        .expect("the secret is a component");
    assert_eq!(component.kind, InputKind::Env);
    // The same whatever the value: the value is not an input.
    assert_eq!(
        component.hash,
        secret_source_hash(&SecretSource::Env("API_TOKEN".to_owned()))
    );
    unit.secrets.insert(
        "API_TOKEN".to_owned(),
        SecretSource::Env("OTHER_VARIABLE".to_owned()),
    );
    let moved = input_components(&unit, Path::new("/p"), &[]).unwrap();
    assert_ne!(combine_components(&with), combine_components(&moved));
}

#[test]
fn sha256_file_refuses_a_fifo_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || tx.send(sha256_file(&path).is_err()));
    // The timeout is only a safety net: a hashing that waits never answers.
    let refused = rx.recv_timeout(Duration::from_secs(60));
    if refused.is_err() {
        // Unblock the waiting open so the thread ends with the test.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    assert_eq!(refused, Ok(true));
    std::fs::write(dir.path().join("file"), "x").unwrap();
    assert_eq!(
        sha256_file(&dir.path().join("file")).unwrap(),
        sha256_hex(b"x")
    );
}

#[test]
fn a_recorded_output_counts_only_when_a_declaration_stands_for_it() {
    let base = Path::new("/p");
    let unit = unit_with(
        &["data/in.csv"],
        &[
            "out/a.csv",
            "out/dir",
            "out/parts/*.csv",
            "/abs/x.bin",
            "../shared/y",
        ],
    );
    let declared = |path: &str| declares_output(&unit, base, path);
    for ok in [
        "out/a.csv",
        "out/dir/b/c.txt",
        "out/dir/.hidden",
        "out/parts/1.csv",
        "out/parts/.2.csv",
        "/p/out/a.csv",
        "/abs/x.bin",
        "../shared/y",
        "../shared/y/z",
        "out/./a.csv",
    ] {
        assert!(declared(ok), "{ok} should be declared");
    }
    // Spellings a declaration may use that recorded names never do.
    let spelled = unit_with(
        &[],
        &["./out/*.csv", "out//x.bin", "out/*/", "./out/**/*.txt"],
    );
    for ok in ["out/a.csv", "out/x.bin", "out/d/e.json", "out/s/t/u.txt"] {
        assert!(
            declares_output(&spelled, base, ok),
            "{ok} should be declared"
        );
    }
    for refused in ["out/../a.csv", "x.bin", "out/d/../../e"] {
        assert!(!declares_output(&spelled, base, refused), "{refused}");
    }
    for refused in [
        "data/in.csv",
        "out/b.csv",
        "out/a.csv/../../victim",
        "out/dir/../../victim",
        "out/parts/../../victim.csv",
        "out/parts/sub/1.csv",
        "out/parts/1.txt",
        "/etc/passwd",
        "/abs/x.bin/../../etc/passwd",
        "../elsewhere",
        "../shared",
        "",
    ] {
        assert!(!declared(refused), "{refused:?} should not be declared");
    }
    // A folder matched by a glob stands for the files under it.
    let globbed = unit_with(&[], &["out/run-*"]);
    assert!(declares_output(&globbed, base, "out/run-1/part/0.csv"));
    assert!(!declares_output(&globbed, base, "out/run-1/../../x"));
    assert!(!declares_output(&globbed, base, "out/other/0.csv"));
}

/// A hash cache of a few entries.
#[derive(Debug, Default)]
struct MapCache(std::sync::Mutex<std::collections::HashMap<FileStamp, CachedHash>>);

impl FileHashCache for MapCache {
    fn get(&self, stamp: &FileStamp) -> Option<CachedHash> {
        self.0.lock().unwrap().get(stamp).cloned()
    }

    fn put(&self, stamp: FileStamp, hash: CachedHash) {
        self.0.lock().unwrap().insert(stamp, hash);
    }
}

#[test]
fn stat_only_limits_take_a_trusted_cached_hash_and_read_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("out.csv"), "a,b\n").unwrap();
    let unit = unit_with(&[], &["out.csv"]);
    let expected = output_hash(&unit, dir.path()).unwrap();
    let cache = MapCache::default();

    // Not cached: not read.
    let limits = Limits::none().with_cache(Some(&cache)).stat_only();
    let error = output_hash_within(&unit, dir.path(), &limits).unwrap_err();
    assert!(error.not_read_here(), "{error}");
    assert!(cache.0.lock().unwrap().is_empty());
    // A missing file is known without reading: it is missing.
    let missing = unit_with(&[], &["gone.csv"]);
    assert!(
        output_hash_within(&missing, dir.path(), &limits)
            .unwrap_err()
            .not_found()
    );

    // Cached, but racily clean (hashed as it was written): not trusted, not read.
    let reading = Limits::none().with_cache(Some(&cache));
    assert_eq!(
        output_hash_within(&unit, dir.path(), &reading).unwrap(),
        expected
    );
    for (stamp, cached) in cache.0.lock().unwrap().iter_mut() {
        cached.hashed_at_ns = stamp.mtime_ns.max(stamp.ctime_ns);
    }
    let error = output_hash_within(&unit, dir.path(), &limits).unwrap_err();
    assert!(error.not_read_here(), "{error}");

    // Cached and trusted: known from the cache.
    for cached in cache.0.lock().unwrap().values_mut() {
        cached.hashed_at_ns = i64::MAX / 2;
    }
    assert_eq!(
        output_hash_within(&unit, dir.path(), &limits).unwrap(),
        expected
    );
    // Other limits are not stat-only: an error from them is not "not read here".
    let error = output_hash_within(&missing, dir.path(), &reading).unwrap_err();
    assert!(!error.not_read_here());
    // A declared output folder is not walked, whatever the cache holds.
    std::fs::create_dir(dir.path().join("tree")).unwrap();
    std::fs::write(dir.path().join("tree/leaf.csv"), "a,b\n").unwrap();
    let folder = unit_with(&[], &["tree"]);
    assert!(output_hash_within(&folder, dir.path(), &reading).is_ok());
    for cached in cache.0.lock().unwrap().values_mut() {
        cached.hashed_at_ns = i64::MAX / 2;
    }
    let error = output_hash_within(&folder, dir.path(), &limits).unwrap_err();
    assert!(error.not_read_here(), "{error}");
}

#[test]
fn special_files_and_directories_are_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let error = output_hash(&unit_with(&[], &["/dev/zero"]), dir.path()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "output file `/dev/zero`: it is a character device, not a regular file"
    );
    let error = input_components(&unit_with(&["."], &[]), dir.path(), &[]).unwrap_err();
    assert!(matches!(error.problem, Problem::NotRegular("a directory")));
    assert_eq!(
        special_declared_files(&unit_with(&["/dev/null", "*.csv"], &["out"]), dir.path()),
        vec![(
            "input file",
            PathBuf::from("/dev/null"),
            "a character device"
        )]
    );
}

#[test]
fn a_cancellation_or_a_spent_budget_stops_hashing_before_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), b"abc").unwrap();
    let unit = unit_with(&["data"], &[]);
    let cancel = CancelToken::new();
    let spent = Limits::new(&cancel, Some(Duration::ZERO), Some(Duration::from_secs(5)));
    let error = input_components_within(&unit, dir.path(), &[], &spent).unwrap_err();
    assert!(error.timed_out());
    assert!(
        error
            .to_string()
            .ends_with("within the unit's timeout of 5s"),
        "{error}"
    );
    cancel.cancel(crate::CancelLevel::Graceful);
    let limits = Limits::new(&cancel, None, None);
    let error = input_components_within(&unit, dir.path(), &[], &limits).unwrap_err();
    assert!(error.cancelled());
    let graceful = Limits::new(&cancel, None, None).with_grace(Duration::from_secs(3600));
    assert!(input_components_within(&unit, dir.path(), &[], &graceful).is_ok());
    let halt = AtomicBool::new(true);
    let limits = Limits::none().with_halt(&halt);
    let error = input_components_within(&unit, dir.path(), &[], &limits).unwrap_err();
    assert!(error.cancelled());
    cancel.cancel(crate::CancelLevel::Immediate);
    let error = input_components_within(&unit, dir.path(), &[], &graceful).unwrap_err();
    assert!(error.cancelled());
    let components = input_components(&unit, dir.path(), &[]).unwrap();
    assert!(components.iter().any(|c| c.hash == sha256_hex(b"abc")));
}

/// A restore cut off by a SIGKILL leaves `.NAME.apollo-restore-XXXXXXXX` beside the output
/// (issue 36 item 7): a folder output or a glob output never counts it, so it is neither
/// hashed nor recorded nor handed to dependents; a file a user named like it is still counted
/// when declared by its own path.
#[test]
fn a_restore_temp_file_in_a_folder_or_glob_output_is_not_an_output() {
    use crate::restore_temp::temp_name;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("out");
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    std::fs::write(folder.join("a.bin"), b"a").unwrap();
    std::fs::write(folder.join("sub/b.bin"), b"b").unwrap();
    let unit = unit_with(&[], &["out", "out/*.bin"]);
    let before = output_hash(&unit, dir.path()).unwrap();
    let stale = [
        folder.join(temp_name("a.bin", "0123abcd")),
        folder.join("sub").join(temp_name("b.bin", "89ef4567")),
    ];
    for path in &stale {
        std::fs::write(path, b"half a restore").unwrap();
    }
    assert_eq!(output_hash(&unit, dir.path()).unwrap(), before);
    let files = expand_outputs(&unit, dir.path()).unwrap();
    assert_eq!(files, [folder.join("a.bin"), folder.join("sub/b.bin")]);

    // A glob that matches only such a file matches nothing: the output is missing.
    let only_temp = unit_with(&[], &["out/sub/.b.bin.*"]);
    assert!(expand_outputs(&only_temp, dir.path()).is_err());
    // Declared by its own path, it is what the user asked for.
    let declared = format!("out/{}", temp_name("a.bin", "0123abcd"));
    let named = unit_with(&[], &[declared.as_str()]);
    assert_eq!(
        expand_outputs(&named, dir.path()).unwrap(),
        [stale[0].clone()]
    );
}
