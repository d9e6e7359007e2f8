//! What a simulated run is made of, drawn from its seed: the units (idempotent or not, local
//! or on Slurm, hashed first or not, checked for reuse or not, their retries and how many
//! attempts fail before one succeeds), their dependencies, and the limits.

use std::time::Duration;

use crate::engine::ledger::Kind;
use crate::model::{ExecutorKind, Pipeline};

/// xorshift64*: small, seeded, the same on every machine.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct SimUnit {
    pub(super) kind: Kind,
    /// Declares input files: hashed before each attempt is decided.
    pub(super) hashes_first: bool,
    /// Checked for reuse from an earlier run on its first decision (idempotent units only):
    /// whether it is found reusable.
    pub(super) reuse: Option<bool>,
    pub(super) retries: u32,
    /// Its `retry_delay`: the backoff's base.
    pub(super) retry_delay: Duration,
    /// Attempts that fail before one succeeds.
    pub(super) failures: u32,
}

/// A run's units, their dependencies, `max_parallel` and `max_jobs` (0: no Slurm unit).
pub(super) fn draw_units(rng: &mut Rng) -> (Vec<SimUnit>, Vec<Vec<usize>>, usize, usize) {
    let n_units = 1 + rng.below(14);
    let slurm = rng.chance(25);
    let deps: Vec<Vec<usize>> = (0..n_units)
        .map(|unit| (0..unit).filter(|_| rng.chance(20)).collect())
        .collect();
    let units: Vec<SimUnit> = (0..n_units)
        .map(|_| {
            let idempotent = rng.chance(70);
            SimUnit {
                kind: Kind {
                    idempotent,
                    slurm: slurm && rng.chance(40),
                },
                hashes_first: rng.chance(30),
                reuse: (idempotent && rng.chance(25)).then(|| rng.chance(50)),
                retries: u32::try_from(rng.below(3)).unwrap_or(0),
                retry_delay: Duration::from_micros(rng.below(4000) as u64),
                failures: u32::try_from(rng.below(4)).unwrap_or(0),
            }
        })
        .collect();
    let max_parallel = 1 + rng.below(3);
    let max_jobs = if units.iter().any(|unit| unit.kind.slurm) {
        1 + rng.below(2)
    } else {
        0
    };
    (units, deps, max_parallel, max_jobs)
}

/// The real pipeline the simulated units stand for: unit `i` is named `u{i}`; one hashed first
/// declares input files; one checked for reuse says `reuse: true` and declares an output (so,
/// done in a process before a crash, its outputs are checked before it is reused).
pub(super) fn sim_pipeline(
    units: &[SimUnit],
    deps: &[Vec<usize>],
    (max_parallel, max_jobs): (usize, usize),
) -> Pipeline {
    let names: Vec<String> = (0..units.len()).map(|unit| format!("u{unit}")).collect();
    let units = units
        .iter()
        .zip(deps)
        .enumerate()
        .map(|(idx, (sim, deps))| {
            let deps: Vec<&str> = deps.iter().map(|&dep| names[dep].as_str()).collect();
            let mut unit = crate::engine::tests::unit(&names[idx], &deps);
            unit.idempotent = sim.kind.idempotent;
            unit.retries = sim.retries;
            unit.retry_delay = sim.retry_delay;
            if sim.kind.slurm {
                unit.executor = ExecutorKind::Slurm;
            }
            if sim.hashes_first {
                unit.inputs = vec!["in/*".to_owned()];
            }
            if sim.reuse.is_some() {
                unit.reuse = true;
                unit.outputs = vec![format!("out/{}", unit.name)];
            }
            unit
        })
        .collect();
    let mut pipeline = crate::engine::tests::pipeline(units, max_parallel);
    pipeline.max_jobs = (max_jobs > 0).then_some(max_jobs);
    pipeline
}
