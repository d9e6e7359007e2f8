//! The dependency graph of a pipeline, by unit index, and the ready queue the engine runs.
//!
//! Indices are positions in [`Pipeline::units`] (config order). Every ordering decision breaks
//! ties by index, so the same config always gives the same order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::model::Pipeline;

/// The graph could not be built: the pipeline was not validated first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DagError {
    /// A dependency names no unit.
    #[error("unit `{unit}` depends on `{dependency}`, which is not a unit of the pipeline")]
    MissingDependency {
        /// The depending unit.
        unit: String,
        /// The missing dependency.
        dependency: String,
    },
    /// The graph has a cycle (`a → b → a`).
    #[error("dependency cycle: {}", path.join(" → "))]
    Cycle {
        /// The cycle as a path whose first and last elements are the same unit.
        path: Vec<String>,
    },
}

/// Dependencies and dependents of every unit, as index lists.
#[derive(Debug, Clone)]
pub struct Dag {
    deps: Adjacency,
    dependents: Adjacency,
}

/// One index list per unit, all in one vector (`edges[starts[i]..starts[i + 1]]` is unit
/// `i`'s): two allocations for the whole graph, where a `Vec` per unit was 200,000 of them
/// for 100,000 units (each with its 24-byte header), made at load and freed one by one when
/// the run ended.
#[derive(Debug, Clone)]
struct Adjacency {
    starts: Vec<usize>,
    edges: Vec<usize>,
}

impl Adjacency {
    fn from_lists<'l>(lists: impl IntoIterator<Item = &'l [usize]>) -> Self {
        let mut adjacency = Self {
            starts: vec![0],
            edges: Vec::new(),
        };
        for list in lists {
            adjacency.edges.extend_from_slice(list);
            adjacency.starts.push(adjacency.edges.len());
        }
        adjacency
    }

    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    fn of(&self, unit_idx: usize) -> &[usize] {
        &self.edges[self.starts[unit_idx]..self.starts[unit_idx + 1]]
    }

    /// The reverse lists (who lists `i`), each in increasing order of the unit listing it.
    fn reversed(&self) -> Self {
        let mut starts = vec![0; self.len() + 1];
        for &target in &self.edges {
            starts[target + 1] += 1;
        }
        for unit_idx in 0..self.len() {
            starts[unit_idx + 1] += starts[unit_idx];
        }
        let mut next = starts.clone();
        let mut edges = vec![0; self.edges.len()];
        for source in 0..self.len() {
            for &target in self.of(source) {
                edges[next[target]] = source;
                next[target] += 1;
            }
        }
        Self { starts, edges }
    }
}

impl Dag {
    /// Build the graph of `pipeline`. Fails on a missing dependency or a cycle.
    pub fn new(pipeline: &Pipeline) -> Result<Self, DagError> {
        let index: foldhash::HashMap<&str, usize> = pipeline
            .units
            .iter()
            .enumerate()
            .map(|(unit_idx, unit)| (unit.name.as_str(), unit_idx))
            .collect();
        let mut deps = Adjacency {
            starts: Vec::with_capacity(pipeline.units.len() + 1),
            edges: Vec::new(),
        };
        deps.starts.push(0);
        for unit in &pipeline.units {
            for dependency in &unit.deps {
                let Some(&dep_idx) = index.get(dependency.as_str()) else {
                    return Err(DagError::MissingDependency {
                        unit: unit.name.clone(),
                        dependency: dependency.clone(),
                    });
                };
                deps.edges.push(dep_idx);
            }
            deps.starts.push(deps.edges.len());
        }
        let dependents = deps.reversed();
        let dag = Self { deps, dependents };
        if let Some(cycle) = dag.find_cycle() {
            return Err(DagError::Cycle {
                path: cycle
                    .iter()
                    .map(|&unit_idx| pipeline.units[unit_idx].name.clone())
                    .collect(),
            });
        }
        Ok(dag)
    }

    /// Build a graph from raw edge lists (`deps[i]` = indices unit `i` depends on), without
    /// checking for cycles. For validation, which reports cycles itself.
    pub fn from_deps(deps: Vec<Vec<usize>>) -> Self {
        let deps = Adjacency::from_lists(deps.iter().map(Vec::as_slice));
        let dependents = deps.reversed();
        Self { deps, dependents }
    }

    /// Number of units.
    pub fn len(&self) -> usize {
        self.deps.len()
    }

    /// Whether the graph has no units.
    pub fn is_empty(&self) -> bool {
        self.deps.len() == 0
    }

    /// The units `unit_idx` depends on.
    pub fn deps(&self, unit_idx: usize) -> &[usize] {
        self.deps.of(unit_idx)
    }

    /// The units that depend on `unit_idx` directly.
    pub fn dependents(&self, unit_idx: usize) -> &[usize] {
        self.dependents.of(unit_idx)
    }

    /// A cycle, if there is one, as a path of indices whose first and last are equal
    /// (`[a, a]` for a self-dependency). Deterministic: the cycle reached first from the
    /// lowest index. O(V + E), iterative (no recursion depth limit).
    pub fn find_cycle(&self) -> Option<Vec<usize>> {
        const WHITE: u8 = 0;
        const GREY: u8 = 1;
        const BLACK: u8 = 2;
        let mut colour = vec![WHITE; self.len()];
        // Explicit DFS stack of (node, next dependency position).
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for root in 0..self.len() {
            if colour[root] != WHITE {
                continue;
            }
            colour[root] = GREY;
            stack.push((root, 0));
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&dep) = self.deps.of(node).get(*next) {
                    *next += 1;
                    match colour[dep] {
                        WHITE => {
                            colour[dep] = GREY;
                            stack.push((dep, 0));
                        }
                        GREY => {
                            // `dep` is on the stack: the cycle is dep → … → node → dep, read
                            // along dependency edges. Print it in that order.
                            let start = stack.iter().position(|&(n, _)| n == dep).unwrap_or(0);
                            let mut path: Vec<usize> =
                                stack[start..].iter().map(|&(n, _)| n).collect();
                            path.push(dep);
                            return Some(path);
                        }
                        _ => {}
                    }
                } else {
                    colour[node] = BLACK;
                    stack.pop();
                }
            }
        }
        None
    }

    /// A topological order (dependencies first), ties broken by config order. O((V+E) log V).
    pub fn topo_order(&self) -> Vec<usize> {
        let mut queue = ReadyQueue::new(self, |_| false);
        let mut order = Vec::with_capacity(self.len());
        while let Some(unit_idx) = queue.pop() {
            order.push(unit_idx);
            queue.complete(self, unit_idx);
        }
        order
    }

    /// Execution layers: layer 0 has no dependencies, layer k units depend on at least one
    /// unit of layer k-1 and none later. Units keep config order within a layer.
    pub fn layers(&self) -> Vec<Vec<usize>> {
        let mut depth = vec![0usize; self.len()];
        for unit_idx in self.topo_order() {
            depth[unit_idx] = (self.deps.of(unit_idx).iter())
                .map(|&dep| depth[dep] + 1)
                .max()
                .unwrap_or(0);
        }
        let n_layers = depth.iter().max().map_or(0, |&deepest| deepest + 1);
        let mut layers = vec![Vec::new(); n_layers];
        for (unit_idx, &unit_depth) in depth.iter().enumerate() {
            layers[unit_depth].push(unit_idx);
        }
        layers
    }

    /// Every unit downstream of `unit_idx` (transitively), in index order, excluding itself.
    pub fn downstream(&self, unit_idx: usize) -> Vec<usize> {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![unit_idx];
        while let Some(node) = stack.pop() {
            for &dependent in self.dependents.of(node) {
                if !seen[dependent] {
                    seen[dependent] = true;
                    stack.push(dependent);
                }
            }
        }
        (0..self.len()).filter(|&i| seen[i]).collect()
    }

    /// Every unit upstream of the given units (transitively), plus the units themselves, in
    /// index order.
    pub fn upstream_closure(&self, unit_idxs: &[usize]) -> Vec<usize> {
        let mut seen = vec![false; self.len()];
        let mut stack: Vec<usize> = unit_idxs.to_vec();
        for &unit_idx in unit_idxs {
            seen[unit_idx] = true;
        }
        while let Some(node) = stack.pop() {
            for &dep in self.deps.of(node) {
                if !seen[dep] {
                    seen[dep] = true;
                    stack.push(dep);
                }
            }
        }
        (0..self.len()).filter(|&i| seen[i]).collect()
    }
}

/// Kahn's algorithm as a queue: in-degree counters, and a min-heap of ready units so the
/// lowest index (config order) pops first. Each unit enters at most once; total work is
/// O((V + E) log V) and nothing ever scans the pending set.
#[derive(Debug, Clone)]
pub struct ReadyQueue {
    /// Unsatisfied dependencies left per unit.
    remaining_deps: Vec<usize>,
    ready: BinaryHeap<Reverse<usize>>,
}

impl ReadyQueue {
    /// A queue over `dag` where units for which `already_done` is true count as completed
    /// (they never pop, and their dependents do not wait for them).
    pub fn new(dag: &Dag, already_done: impl Fn(usize) -> bool) -> Self {
        let mut remaining_deps = vec![0usize; dag.len()];
        let mut ready = BinaryHeap::new();
        for (unit_idx, remaining) in remaining_deps.iter_mut().enumerate() {
            if already_done(unit_idx) {
                // Never becomes ready; a large count keeps `complete` of a dependency from
                // pushing it.
                *remaining = usize::MAX;
                continue;
            }
            *remaining = dag
                .deps(unit_idx)
                .iter()
                .filter(|&&dep| !already_done(dep))
                .count();
            if *remaining == 0 {
                ready.push(Reverse(unit_idx));
            }
        }
        Self {
            remaining_deps,
            ready,
        }
    }

    /// The next ready unit, lowest index first.
    pub fn pop(&mut self) -> Option<usize> {
        self.ready.pop().map(|Reverse(unit_idx)| unit_idx)
    }

    /// The next ready unit without taking it.
    pub fn peek(&self) -> Option<usize> {
        self.ready.peek().map(|Reverse(unit_idx)| *unit_idx)
    }

    /// Whether no unit is ready right now.
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Number of units ready right now.
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    /// Put `unit_idx` back in the queue (a retry that came due). It must not be queued already.
    pub fn requeue(&mut self, unit_idx: usize) {
        self.ready.push(Reverse(unit_idx));
    }

    /// `unit_idx` is done in a way that satisfies its dependents: count it down in each of
    /// them and queue those whose last dependency it was.
    pub fn complete(&mut self, dag: &Dag, unit_idx: usize) {
        for &dependent in dag.dependents(unit_idx) {
            let remaining = &mut self.remaining_deps[dependent];
            if *remaining == usize::MAX || *remaining == 0 {
                continue;
            }
            *remaining -= 1;
            if *remaining == 0 {
                self.ready.push(Reverse(dependent));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(edges: &[&[usize]]) -> Dag {
        Dag::from_deps(edges.iter().map(|deps| deps.to_vec()).collect())
    }

    #[test]
    fn each_unit_has_its_deps_as_listed_and_its_dependents_in_config_order() {
        let graph = dag(&[&[], &[0], &[1, 0], &[], &[2, 0, 3]]);
        assert_eq!(graph.len(), 5);
        let deps: Vec<&[usize]> = (0..5).map(|unit_idx| graph.deps(unit_idx)).collect();
        assert_eq!(deps, [&[][..], &[0], &[1, 0], &[], &[2, 0, 3]]);
        let dependents: Vec<&[usize]> = (0..5).map(|unit_idx| graph.dependents(unit_idx)).collect();
        assert_eq!(dependents, [&[1, 2, 4][..], &[2], &[4], &[4], &[]]);
        assert!(dag(&[]).is_empty());
    }

    #[test]
    fn topo_order_breaks_ties_by_config_order() {
        // 0 ← 2, 1 ← 2, 3 independent.
        let graph = dag(&[&[], &[], &[1, 0], &[]]);
        assert_eq!(graph.topo_order(), vec![0, 1, 2, 3]);
        let graph = dag(&[&[1], &[], &[]]);
        assert_eq!(graph.topo_order(), vec![1, 0, 2]);
    }

    #[test]
    fn layers_group_by_longest_dependency_path() {
        let graph = dag(&[&[], &[0], &[0], &[1, 2], &[]]);
        assert_eq!(graph.layers(), vec![vec![0, 4], vec![1, 2], vec![3]]);
    }

    #[test]
    fn cycles_are_found_as_paths() {
        assert_eq!(dag(&[&[0]]).find_cycle(), Some(vec![0, 0]));
        assert_eq!(
            dag(&[&[1], &[2], &[0]]).find_cycle(),
            Some(vec![0, 1, 2, 0])
        );
        assert_eq!(dag(&[&[], &[0], &[1]]).find_cycle(), None);
    }

    #[test]
    fn ready_queue_skips_done_units_and_releases_dependents_once() {
        let graph = dag(&[&[], &[0], &[0, 1]]);
        let mut queue = ReadyQueue::new(&graph, |unit_idx| unit_idx == 0);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), None);
        queue.complete(&graph, 1);
        assert_eq!(queue.pop(), Some(2));
        queue.complete(&graph, 2);
        assert!(queue.is_empty());
    }

    #[test]
    fn downstream_and_upstream_are_transitive() {
        let graph = dag(&[&[], &[0], &[1], &[]]);
        assert_eq!(graph.downstream(0), vec![1, 2]);
        assert_eq!(graph.upstream_closure(&[2]), vec![0, 1, 2]);
    }
}
