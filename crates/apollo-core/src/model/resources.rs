//! What a unit asks of the machine or the cluster (`resources:`).

use serde::{Deserialize, Serialize};

/// What one attempt of a unit asks for. `None` means "not stated": the local executor then
/// counts 1 CPU and no memory, Slurm uses the cluster's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Resources {
    /// CPUs (`cpus:`).
    pub cpus: Option<u32>,
    /// Memory in bytes (`memory: 4G`; binary units, `K`, `M`, `G`, `T`).
    pub memory: Option<u64>,
    /// GPUs (`gpus:`; Slurm only: `--gpus`).
    pub gpus: Option<u32>,
    /// Settings only Slurm reads (`slurm:`). Shared: most units have none, and a copy each
    /// would be 104 bytes per unit (10 MB of 100,000 units); see [`SlurmResources::shared`].
    /// To change one unit's, `Arc::make_mut`.
    #[serde(
        serialize_with = "serialize_shared",
        deserialize_with = "deserialize_shared"
    )]
    pub slurm: std::sync::Arc<SlurmResources>,
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            cpus: None,
            memory: None,
            gpus: None,
            slurm: SlurmResources::default().shared(),
        }
    }
}

fn serialize_shared<S: serde::Serializer>(
    slurm: &std::sync::Arc<SlurmResources>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    slurm.as_ref().serialize(serializer)
}

fn deserialize_shared<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<std::sync::Arc<SlurmResources>, D::Error> {
    SlurmResources::deserialize(deserializer).map(SlurmResources::shared)
}

/// A unit's Slurm settings (`resources: {slurm: {...}}`), each turned into an `sbatch` option.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SlurmResources {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// Further `sbatch` arguments, passed as written after apollo's own.
    pub extra_args: Vec<String>,
    /// `on_stop: detach`: a graceful stop of apollo (Ctrl-C, SIGTERM) leaves the job running
    /// for a later resume to reattach to, instead of cancelling it (`on_stop: cancel`, the
    /// default).
    pub detach_on_stop: bool,
}

impl SlurmResources {
    /// These settings behind an `Arc`: the unset ones (most units') all share one.
    pub fn shared(self) -> std::sync::Arc<Self> {
        static UNSET: std::sync::LazyLock<std::sync::Arc<SlurmResources>> =
            std::sync::LazyLock::new(Default::default);
        if self == Self::default() {
            std::sync::Arc::clone(&UNSET)
        } else {
            std::sync::Arc::new(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Resources, SlurmResources};

    fn unit_resources(yaml: &str) -> Vec<Resources> {
        let loaded = crate::config::load_str(yaml, std::path::Path::new("/p/apollo.yaml"))
            .unwrap_or_else(|error| panic!("{error}"));
        let units = loaded.pipeline.units.into_iter();
        units.map(|unit| unit.resources).collect()
    }

    #[test]
    fn units_without_slurm_settings_share_one_and_those_with_keep_their_own() {
        let resources = unit_resources(
            "units:
  - name: a
    execute: 'true'
  - name: b
    execute: 'true'
    resources: {cpus: 2}
  - name: c
    execute: 'true'
    resources: {slurm: {partition: long}}
",
        );
        assert!(Arc::ptr_eq(&resources[0].slurm, &resources[1].slurm));
        assert_eq!(resources[1].cpus, Some(2));
        assert!(!Arc::ptr_eq(&resources[0].slurm, &resources[2].slurm));
        assert_eq!(resources[2].slurm.partition.as_deref(), Some("long"));
    }

    /// Shared or not, the settings are written as before: the definition snapshot and the
    /// parse cache do not change, and what is read back without settings is shared again.
    #[test]
    fn shared_settings_serialize_as_the_settings_themselves() {
        let slurm = SlurmResources {
            partition: Some("long".into()),
            extra_args: vec!["--exclusive".into()],
            ..SlurmResources::default()
        };
        let resources = Resources {
            cpus: Some(4),
            slurm: slurm.clone().shared(),
            ..Resources::default()
        };
        let json = serde_json::to_value(&resources).unwrap();
        assert_eq!(json["slurm"], serde_json::to_value(&slurm).unwrap());
        let back: Resources = serde_json::from_value(json).unwrap();
        assert_eq!(back, resources);
        let plain: Resources = serde_json::from_str(r#"{"cpus": 1}"#).unwrap();
        assert!(Arc::ptr_eq(
            &plain.slurm,
            &SlurmResources::default().shared()
        ));
    }
}
