//! The search: delta debugging with interference (Zeller's bisection of changes), pure —
//! the steps are run through the probe it is given.

use std::collections::BTreeMap;

use super::BisectOutcome;

/// A step's verdict, as the search sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    /// The output was as wanted.
    Good,
    /// It was not.
    Bad,
    /// Stop searching (a signal).
    Stop,
}

/// Searches `count` changes: first GOOD's inputs alone (must be good), then all changes
/// (must be bad), then halves until one change, or a minimal set needed together, is left.
/// Each subset (sorted indices) is probed at most once.
pub(super) fn run<E>(
    count: usize,
    probe: &mut dyn FnMut(&[usize]) -> Result<Probe, E>,
) -> Result<BisectOutcome, E> {
    if count == 0 {
        return Ok(BisectOutcome::NoChanges);
    }
    let mut search = Search {
        probe,
        seen: BTreeMap::new(),
    };
    match search.probe(&[])? {
        Probe::Stop => return Ok(BisectOutcome::Interrupted),
        Probe::Bad => return Ok(BisectOutcome::GoodNotReproduced),
        Probe::Good => {}
    }
    let all: Vec<usize> = (0..count).collect();
    match search.probe(&all)? {
        Probe::Stop => return Ok(BisectOutcome::Interrupted),
        Probe::Good => return Ok(BisectOutcome::BadNotReproduced),
        Probe::Bad => {}
    }
    Ok(match search.narrow(&[], &all)? {
        Some(found) => BisectOutcome::Found(found),
        None => BisectOutcome::Interrupted,
    })
}

struct Search<'p, E> {
    probe: &'p mut dyn FnMut(&[usize]) -> Result<Probe, E>,
    seen: BTreeMap<Vec<usize>, Probe>,
}

impl<E> Search<'_, E> {
    fn probe(&mut self, applied: &[usize]) -> Result<Probe, E> {
        if let Some(&known) = self.seen.get(applied) {
            return Ok(known);
        }
        let verdict = (self.probe)(applied)?;
        self.seen.insert(applied.to_vec(), verdict);
        Ok(verdict)
    }

    /// With `base` good and `base` + `candidates` bad: the smallest part of `candidates`
    /// that makes `base` bad (`None`: stopped).
    fn narrow(&mut self, base: &[usize], candidates: &[usize]) -> Result<Option<Vec<usize>>, E> {
        if candidates.len() <= 1 {
            return Ok(Some(candidates.to_vec()));
        }
        let (first, second) = candidates.split_at(candidates.len() / 2);
        for half in [first, second] {
            match self.probe(&union(base, half))? {
                Probe::Stop => return Ok(None),
                Probe::Bad => return self.narrow(base, half),
                Probe::Good => {}
            }
        }
        // Neither half alone: each is narrowed with the other applied (interference).
        let Some(from_first) = self.narrow(&union(base, second), first)? else {
            return Ok(None);
        };
        let Some(from_second) = self.narrow(&union(base, &from_first), second)? else {
            return Ok(None);
        };
        Ok(Some(union(&from_first, &from_second)))
    }
}

/// `a` ∪ `b`, sorted.
fn union(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut both: Vec<usize> = a.iter().chain(b).copied().collect();
    both.sort_unstable();
    both.dedup();
    both
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Searches `count` changes where the output is bad exactly when every change of `culprits`
    /// is applied; returns the outcome and the subsets probed.
    fn search(count: usize, culprits: &[usize]) -> (BisectOutcome, Vec<Vec<usize>>) {
        let mut probed = Vec::new();
        let outcome = run::<()>(count, &mut |applied| {
            probed.push(applied.to_vec());
            Ok(if culprits.iter().all(|c| applied.contains(c)) {
                Probe::Bad
            } else {
                Probe::Good
            })
        })
        .unwrap();
        (outcome, probed)
    }

    #[test]
    fn one_change_of_many_is_named_in_logarithmic_steps() {
        for culprit in 0..16 {
            let (outcome, probed) = search(16, &[culprit]);
            assert_eq!(outcome, BisectOutcome::Found(vec![culprit]));
            // Two ends, then at most two probes per halving.
            assert!(probed.len() <= 2 + 2 * 4, "{culprit}: {probed:?}");
        }
    }

    #[test]
    fn changes_needed_together_are_named_as_a_minimal_set() {
        for (count, culprits) in [(2, vec![0, 1]), (8, vec![1, 6]), (9, vec![0, 4, 8])] {
            let (outcome, _) = search(count, &culprits);
            assert_eq!(outcome, BisectOutcome::Found(culprits));
        }
    }

    #[test]
    fn the_ends_are_confirmed_first() {
        assert_eq!(search(0, &[]).0, BisectOutcome::NoChanges);
        let (outcome, probed) = search(3, &[]);
        assert_eq!(outcome, BisectOutcome::GoodNotReproduced);
        assert_eq!(probed, vec![Vec::<usize>::new()]);
        // A culprit outside the changes: all of them applied stays good.
        assert_eq!(search(3, &[7]).0, BisectOutcome::BadNotReproduced);
    }

    #[test]
    fn a_stop_ends_the_search_and_an_error_is_passed_on() {
        let outcome = run::<()>(4, &mut |applied| {
            Ok(if applied.len() == 4 {
                Probe::Stop
            } else {
                Probe::Good
            })
        });
        assert_eq!(outcome, Ok(BisectOutcome::Interrupted));
        assert_eq!(run(4, &mut |_| Err("no")), Err("no"));
    }
}
