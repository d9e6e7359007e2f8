//! A `unit_submitted` laid out: the attempt's cluster job, and the inputs a job reattached to
//! ran under.

use apollo_core::event::UnitSubmitted;

use super::TimelineBuilder;

impl TimelineBuilder {
    /// Attach `submitted` to its attempt. A job reattached to after apollo died ran under the
    /// inputs of the attempt that submitted it, so the attempt shows those (as the resume fold
    /// and the reuse index count them, issue 36), not the ones hashed when apollo came back.
    pub(super) fn submitted(&mut self, mut submitted: UnitSubmitted) {
        let unit_idx = self.unit_idx(submitted.unit.clone());
        let Some(&attempt_idx) = self.open.get(&(unit_idx, submitted.attempt)) else {
            return;
        };
        let attempts = &mut self.timeline.units[unit_idx].attempts;
        if let Some(from) = submitted.reattached_from
            && let Some(earlier) = attempts.iter().find(|attempt| attempt.number == from)
        {
            // A reattach submitted nothing: the job asked for what its submission asked for.
            if let Some(job) = &earlier.job
                && submitted.partition.is_none()
                && submitted.nodes.is_none()
                && submitted.mem_mib.is_none()
            {
                submitted.partition.clone_from(&job.partition);
                (submitted.nodes, submitted.mem_mib) = (job.nodes, job.mem_mib);
            }
            let (hash, inputs, manifest) = (
                earlier.input_hash.clone(),
                earlier.inputs.clone(),
                earlier.inputs_manifest.clone(),
            );
            let attempt = &mut attempts[attempt_idx];
            (attempt.input_hash, attempt.inputs, attempt.inputs_manifest) =
                (hash, inputs, manifest);
        }
        attempts[attempt_idx].job = Some(submitted);
    }
}

#[cfg(test)]
mod tests {
    use crate::Timeline;
    use crate::testkit::RunBuilder;

    #[test]
    fn a_reattached_attempt_shows_the_inputs_its_job_was_submitted_with() {
        let mut run = RunBuilder::new("20261203T000000Z-0001", &["a"]);
        run.file("a", "in.txt", "v1")
            .start(0, "a", 1)
            .submit(1, "a", 1, None);
        // apollo died; the input was edited; the resume reattached attempt 2 to the job.
        run.file("a", "in.txt", "v2")
            .start(10, "a", 2)
            .submit(11, "a", 2, Some(1));
        run.succeed(20, "a", 2);
        let timeline = Timeline::from_records(run.reads()).unwrap();
        let attempts = &timeline.units[0].attempts;
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[1].input_hash, attempts[0].input_hash);
        assert_eq!(attempts[1].inputs, attempts[0].inputs);
        assert!(attempts[1].job.as_ref().unwrap().reattached_from == Some(1));
    }
}
