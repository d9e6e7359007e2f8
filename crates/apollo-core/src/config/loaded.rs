//! What a load gives: the resolved pipeline with what it was made from ([`Loaded`]), and what
//! the load read besides the config file ([`LoadReads`], which decides whether a cached load
//! still stands).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{LoadOptions, Params, fanout, read};
use crate::diagnostic::Diagnostic;
use crate::model::Pipeline;

/// A pipeline that loaded and validated.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved pipeline.
    pub pipeline: Pipeline,
    /// The pipeline's explicit identity (`id:` in the config), which names it in its state
    /// directory instead of its name and config path (see apollo-runner's run selection).
    pub id: Option<String>,
    /// Warnings found on the way (the pipeline is valid despite them), in file order.
    pub warnings: Vec<Diagnostic>,
    /// The config file's text, as read; empty after [`Loaded::release_source`].
    pub source: String,
    /// The SHA-256 (hex) of the config file's text, once [`Loaded::release_source`] has let
    /// the text go; `None` while `source` holds it.
    pub source_sha256: Option<String>,
    /// The run's params (`params:` with the values given in [`LoadOptions`], else their
    /// defaults), as a run records them in `run_started`. Empty when the pipeline declares
    /// none.
    pub params: Params,
    /// What the load read besides the config file and its [`LoadOptions`]: a cached load
    /// stands for a new one only while these are unchanged.
    pub reads: LoadReads,
    /// The SHA-256 (hex) of the pipeline's definition snapshot — its pretty-printed JSON,
    /// which a run keeps in the state directory's blob store — when it is already known (a
    /// parse-cache hit carries the one computed when the entry was made); `None`: compute it.
    /// Whoever changes `pipeline` must set this to `None`.
    pub definition_hash: Option<String>,
}

impl Loaded {
    /// The SHA-256 (hex) of the config file's text, as a run records it in `run_started`.
    pub fn config_hash(&self) -> String {
        self.source_sha256
            .clone()
            .unwrap_or_else(|| crate::hash::sha256_hex(self.source.as_bytes()))
    }

    /// Lets the config file's text go, keeping its hash ([`Loaded::config_hash`]): a run
    /// needs only the pipeline, and the YAML of 100,000 units is 8 MB held for the whole run.
    pub fn release_source(&mut self) {
        if self.source_sha256.is_none() {
            self.source_sha256 = Some(crate::hash::sha256_hex(self.source.as_bytes()));
        }
        self.source = String::new();
    }
}

/// What a load read besides the config file's text and its [`LoadOptions`] (the included
/// files, the environment variables `${env.NAME}` looked up, the files `foreach` globs
/// matched, the date `today` stood for): with the same text and options, a load finds the
/// same pipeline exactly when these are unchanged ([`LoadReads::unchanged`]). The machine's
/// CPU count and memory are among them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct LoadReads {
    /// Each included file (its absolute path) and the SHA-256 of its text.
    pub included: Vec<(PathBuf, String)>,
    /// Each environment variable looked up, and its value (`None`: unset).
    pub env: BTreeMap<String, Option<String>>,
    /// Each `foreach` glob (interpolated) and the items it matched, relative to `base_dir`.
    pub globs: Vec<(String, Vec<String>)>,
    /// The config's folder, which relative globs are matched from.
    pub base_dir: PathBuf,
    /// The date `today` stood for.
    pub today: String,
    /// This machine's CPUs and memory (bytes) as the load saw them: the default
    /// `max_parallel` is the CPU count, and `check` measures `resources:` against both.
    pub machine: (u32, Option<u64>),
}

impl LoadReads {
    /// Whether a load with `options` now would read the same: every included file has the
    /// same text, every variable the same value (in `options.env`, else apollo's environment),
    /// every glob the same matches, it is the same day (unless `options.today` is given), and
    /// the machine offers the same CPUs and memory.
    /// Reads files and runs the globs again; never an error (a file that cannot be read is a
    /// change).
    pub fn unchanged(&self, options: &LoadOptions) -> bool {
        let today = options
            .today
            .clone()
            .unwrap_or_else(|| chrono::Utc::now().format("%Y-%m-%d").to_string());
        if today != self.today || crate::engine::resources::machine_capacity() != self.machine {
            return false;
        }
        let env_now = |name: &str| match &options.env {
            Some(env) => env.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        if self.env.iter().any(|(name, value)| env_now(name) != *value) {
            return false;
        }
        let files_same = self.included.iter().all(|(path, sha256)| {
            read::read_bounded(path, read::Accept::Regular)
                .is_ok_and(|text| crate::hash::sha256_hex(&text) == *sha256)
        });
        files_same
            && self.globs.iter().all(|(pattern, items)| {
                fanout::glob_items(pattern, &self.base_dir).is_ok_and(|now| now == *items)
            })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_released_source_is_gone_and_its_hash_stays() {
        let yaml = "units:\n  - name: a\n    execute: 'true'\n";
        let mut loaded = super::super::load_str(yaml, std::path::Path::new("/p/apollo.yaml"))
            .unwrap_or_else(|error| panic!("{error}"));
        let hash = crate::hash::sha256_hex(yaml.as_bytes());
        assert_eq!(loaded.config_hash(), hash);
        loaded.release_source();
        assert!(loaded.source.is_empty());
        assert_eq!(loaded.config_hash(), hash);
        loaded.release_source();
        assert_eq!(loaded.config_hash(), hash, "releasing twice keeps the hash");
    }
}
