//! The parse cache stands for a load only while nothing the load depended on changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use apollo_core::config::{self, LoadOptions, ParamOverride};

use super::{file_name, key, load_cached, lookup, sha256_hex};

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".apollo/runs")).unwrap();
        let project = Self { dir };
        project.write("p.yaml", config);
        project
    }

    fn write(&self, name: &str, text: &str) {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("p.yaml")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join(".apollo")
    }

    /// Whether the cache holds an entry that stands for a load with `options` now.
    fn hit(&self, options: &LoadOptions) -> bool {
        let bytes = std::fs::read(self.config()).unwrap();
        let key = key(&self.config(), &bytes, options).unwrap();
        lookup(
            &self.state(),
            &file_name(&self.config()),
            &key,
            bytes,
            options,
        )
        .is_some()
    }

    /// A load through the cache, checked against a fresh load with the same options.
    fn load(&self, options: &LoadOptions) -> config::Loaded {
        let cached = load_cached(&self.state(), &self.config(), options).unwrap();
        let fresh = config::load_with(&self.config(), options).unwrap();
        assert_eq!(cached.pipeline, fresh.pipeline);
        assert_eq!(cached.id, fresh.id);
        assert_eq!(cached.params, fresh.params);
        assert_eq!(cached.reads, fresh.reads);
        assert_eq!(cached.source, fresh.source);
        // A hit (and the miss that made the entry) knows the hash of the definition snapshot
        // a run would keep, so the run need not serialise the pipeline again. With no state
        // directory to keep an entry in, the run hashes the snapshot as it writes it.
        let snapshot = crate::session::definition_snapshot(&fresh.pipeline).unwrap();
        let kept = self.state().join("runs").is_dir();
        assert_eq!(cached.definition_hash, kept.then(|| sha256_hex(&snapshot)));
        assert_eq!(fresh.definition_hash, None);
        cached
    }
}

fn env(pairs: &[(&str, &str)]) -> LoadOptions {
    LoadOptions::default().env(
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn unit_names(loaded: &config::Loaded) -> Vec<&str> {
    (loaded.pipeline.units.iter())
        .map(|unit| unit.name.as_str())
        .collect()
}

#[test]
fn an_unchanged_config_is_loaded_from_the_cache_exactly_as_parsed() {
    let project = Project::new(
        "id: etl\nparams:\n  day: {type: date, default: today}\n  regions: {type: list, default: [eu, us]}\n\
         env: {TARGET: \"${env.TARGET}\"}\nunits:\n  - name: fetch\n    foreach: ${params.regions}\n    \
         execute: echo ${params.day} ${item}\n    outputs: [\"out/${item}.csv\"]\n  - name: report\n    \
         deps: [\"fetch[eu]\"]\n    execute: echo done\n    timeout: 5m\n    retries: 2\n",
    );
    let options = env(&[("TARGET", "prod")]);
    assert!(!project.hit(&options), "nothing cached yet");
    project.load(&options);
    assert!(project.hit(&options));
    let loaded = project.load(&options);
    assert_eq!(unit_names(&loaded), ["fetch[eu]", "fetch[us]", "report"]);
    // Another param value is another load.
    let given = options
        .clone()
        .params(vec![ParamOverride::text("regions", "eu", "-p regions=eu")]);
    assert!(!project.hit(&given));
}

#[test]
fn a_change_to_anything_the_load_read_is_a_miss() {
    let project = Project::new(
        "include: [common.yaml]\nunits:\n  - name: t\n    foreach: in/*.csv\n    execute: ./t.sh ${item} ${env.MODE}\n",
    );
    project.write(
        "common.yaml",
        "units:\n  - name: shared\n    execute: echo one\n",
    );
    project.write("in/a.csv", "");
    let options = env(&[("MODE", "fast")]);
    let loaded = project.load(&options);
    assert_eq!(unit_names(&loaded), ["shared", "t[a.csv]"]);
    assert!(project.hit(&options));

    // The environment variable the config reads.
    assert!(!project.hit(&env(&[("MODE", "slow")])));
    assert!(!project.hit(&env(&[])));
    // A variable it does not read does not matter.
    assert!(project.hit(&env(&[("MODE", "fast"), ("OTHER", "x")])));

    // A file the glob now matches.
    project.write("in/b.csv", "");
    assert!(!project.hit(&options));
    let loaded = project.load(&options);
    assert_eq!(unit_names(&loaded), ["shared", "t[a.csv]", "t[b.csv]"]);
    assert!(project.hit(&options));

    // The included file.
    project.write(
        "common.yaml",
        "units:\n  - name: shared\n    execute: echo two\n",
    );
    assert!(!project.hit(&options));
    assert_eq!(
        project.load(&options).pipeline.units[0].execute,
        apollo_core::model::Command::Shell("echo two".into())
    );

    // The config itself.
    project.write("p.yaml", "units:\n  - name: other\n    execute: true\n");
    assert!(!project.hit(&options));
    assert_eq!(unit_names(&project.load(&options)), ["other"]);

    // Another day, for a load that gives no date.
    assert!(project.hit(&options.clone()));
    let tomorrow = options.clone().today("2999-01-01");
    assert!(!project.hit(&tomorrow));

    // Another machine (the default `max_parallel` is its CPU count).
    let loaded = project.load(&options);
    assert!(loaded.reads.unchanged(&options));
    let mut elsewhere = loaded.reads.clone();
    elsewhere.machine.0 += 1;
    assert!(!elsewhere.unchanged(&options));
}

#[test]
fn a_damaged_entry_is_a_miss_and_a_load_with_warnings_is_not_cached() {
    let project = Project::new("units:\n  - name: a\n    execute: echo a\n");
    let options = LoadOptions::default();
    project.load(&options);
    assert!(project.hit(&options));
    let file = project
        .state()
        .join("index")
        .join(file_name(&project.config()));
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    std::fs::write(&file, &bytes).unwrap();
    assert!(!project.hit(&options), "fails its checksum");
    project.load(&options);
    assert!(project.hit(&options), "written again");

    // `reuse: true` without outputs... is an error; a unit idempotent: false with reuse is a
    // warning: such a load is never cached.
    let project = Project::new(
        "units:\n  - name: a\n    execute: echo a\n    outputs: [a.txt]\n    reuse: true\n    idempotent: false\n",
    );
    let loaded = load_cached(&project.state(), &project.config(), &options).unwrap();
    assert!(!loaded.warnings.is_empty(), "the test needs a warning");
    assert!(!project.hit(&options));
}

#[test]
fn nothing_is_written_without_a_state_directory() {
    let project = Project::new("units:\n  - name: a\n    execute: echo a\n");
    std::fs::remove_dir_all(project.state()).unwrap();
    project.load(&LoadOptions::default());
    assert!(!project.state().exists());
    assert!(!Path::new(&project.state()).join("index").exists());
}

#[test]
fn a_large_pipeline_is_kept_in_chunks_and_read_back_whole_and_in_order() {
    let mut config = String::from("units:\n");
    for index in 0..2_500 {
        config.push_str(&format!(
            "  - name: u{index:05}\n    execute: echo {index}\n"
        ));
        if index > 0 {
            config.push_str(&format!("    deps: [u{:05}]\n", index - 1));
        }
    }
    let project = Project::new(&config);
    let options = LoadOptions::default();
    project.load(&options);
    let body =
        apollo_store::cache_file::read(&project.state(), &file_name(&project.config())).unwrap();
    // A head line, then 3 chunks of at least 1,000 units, each its length and its units.
    let head_end = body.iter().position(|&byte| byte == b'\n').unwrap() + 1;
    let mut chunk_starts = Vec::new();
    let mut at = head_end;
    while at < body.len() {
        chunk_starts.push(at);
        let len: [u8; 8] = body[at..at + 8].try_into().unwrap();
        at += 8 + usize::try_from(u64::from_le_bytes(len)).unwrap();
    }
    assert_eq!((chunk_starts.len(), at), (3, body.len()));
    assert!(project.hit(&options));
    // A damaged chunk that still decodes (a unit renamed) fails the checksum: a miss, never
    // the damaged pipeline. So does a byte added at the end.
    let path = project
        .state()
        .join("index")
        .join(file_name(&project.config()));
    let saved = std::fs::read(&path).unwrap();
    let at = saved
        .windows(6)
        .rposition(|window| window == b"u02499")
        .unwrap();
    let mut renamed = saved.clone();
    renamed[at + 5] = b'8';
    for damaged in [renamed, [saved.as_slice(), b" "].concat()] {
        std::fs::write(&path, &damaged).unwrap();
        assert!(!project.hit(&options));
    }
    std::fs::write(&path, &saved).unwrap();
    assert!(project.hit(&options));
    let loaded = project.load(&options);
    assert_eq!(loaded.pipeline.units.len(), 2_500);
    assert_eq!(loaded.pipeline.units[2_499].name, "u02499");

    // A count of units per chunk other than the chunks hold (an edited entry, whose checksum
    // was made to match): a miss, whatever the count — far beyond what the bytes could hold
    // (nothing is reserved for it: apollo does not abort on an allocation of terabytes), one
    // more (a middle chunk falls short) or one fewer (a chunk holds more than its part: the
    // units decoded into the vector so far are dropped again, each once).
    let head = std::str::from_utf8(&body[..head_end]).unwrap();
    assert!(head.contains(r#""units_per_chunk":1000,"#), "{head}");
    for count in ["1000000000000", "1001", "999", "0"] {
        let edited = head.replacen(
            r#""units_per_chunk":1000,"#,
            &format!(r#""units_per_chunk":{count},"#),
            1,
        );
        apollo_store::cache_file::write(
            &project.state(),
            &file_name(&project.config()),
            &[edited.as_bytes(), &body[head_end..]].concat(),
        )
        .unwrap();
        assert!(!project.hit(&options), "units_per_chunk {count}");
    }
    apollo_store::cache_file::write(&project.state(), &file_name(&project.config()), &body)
        .unwrap();
    assert!(project.hit(&options));
    assert_eq!(project.load(&options).pipeline.units.len(), 2_500);

    // Under a checksum that matches (an edited file): a chunk lost, a chunk cut short, a
    // length past the end, a unit's bytes garbled: a miss, never fewer or other units.
    let last = chunk_starts[2];
    let mut past_end = body.clone();
    past_end[last] = past_end[last].wrapping_add(1);
    let mut garbled = body.clone();
    garbled[last + 8] = 0xff;
    garbled[last + 9] = 0xff;
    for damaged in [&body[..last], &body[..body.len() - 1], &past_end, &garbled] {
        apollo_store::cache_file::write(&project.state(), &file_name(&project.config()), damaged)
            .unwrap();
        assert!(!project.hit(&options));
    }
}

#[test]
fn a_unit_with_every_field_set_is_read_back_as_parsed() {
    // `Project::load` checks the cached load against a fresh one, field by field.
    let project = Project::new(
        "units:\n  - name: up\n    execute: echo up\n    outputs: [up.txt]\n\
         \x20 - name: all\n    deps: [up]\n    prepare: echo prepare\n\
         \x20   execute: [\"/bin/echo\", \"argv\"]\n    cleanup: echo cleanup\n\
         \x20   inputs: [\"in/*.csv\"]\n    outputs: [out.txt]\n    env: {A: \"1\", B: \"2\"}\n\
         \x20   workdir: sub\n    timeout: 90s\n    retries: 3\n    retry_delay: 2s\n\
         \x20   kill_grace: 7s\n    capture: inputs\n    capture_max_file: 1MiB\n\
         \x20   reuse: true\n    executor: slurm\n    resources:\n      cpus: 4\n\
         \x20     memory: 2G\n      gpus: 1\n      slurm:\n        partition: p\n\
         \x20       account: a\n        qos: q\n        extra_args: [\"--x\"]\n\
         \x20       on_stop: detach\n",
    );
    let options = LoadOptions::default();
    let first = project.load(&options);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    assert!(project.hit(&options), "cached");
    let cached = project.load(&options);
    let unit = &cached.pipeline.units[1];
    assert!(unit.reuse && unit.prepare.is_some() && unit.resources.slurm.detach_on_stop);
}
