//! The typed walk of `deadline:` (issue 40 item 3, DESIGN §18 "Cost and deadlines"), on the
//! pipeline and on a unit: a local clock time `HH:MM` or a duration after the run starts. A
//! child of the schema walk, so it shares its `Walker`.

use super::{Sp, Walker};
use crate::config::raw::{Node, Value};
use crate::deadline::Deadline;

const DEADLINE_HELP: &str = "write a local clock time such as `deadline: \"06:00\"` (the first 06:00 after the run starts) or a duration after the start such as `deadline: 2h`";

impl Walker<'_, '_> {
    /// `deadline: 06:00` or `deadline: 2h` (`what` names it in messages).
    pub(super) fn deadline(&mut self, node: &Node, what: &str) -> Option<Sp<Deadline>> {
        let loc = node.loc;
        match &node.value {
            Value::Str(text) if text.contains(':') => match Deadline::parse(text) {
                Ok(deadline) => Some(Sp {
                    value: deadline,
                    loc,
                }),
                Err(error) => {
                    self.error("bad-value", loc, format!("{what} is invalid: {error}"))
                        .hint(DEADLINE_HELP);
                    None
                }
            },
            Value::Str(_) | Value::Int(_) => {
                let duration = self.duration(node, "deadline", &format!("({what})"))?;
                if duration.value.is_zero() {
                    self.error("bad-value", loc, format!("{what} is zero"))
                        .hint(DEADLINE_HELP);
                    return None;
                }
                Some(Sp {
                    value: Deadline::After(duration.value),
                    loc,
                })
            }
            _ => {
                self.wrong_type(node, what, "a clock time or a duration")
                    .hint(DEADLINE_HELP);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{LoadError, Loaded, load_str};
    use crate::deadline::Deadline;

    fn load(yaml: &str) -> Result<Loaded, String> {
        load_str(yaml, std::path::Path::new("/base/p.yaml")).map_err(|error| match error {
            LoadError::Invalid { diagnostics, .. } => crate::diagnostic::render_all(&diagnostics),
            error => error.to_string(),
        })
    }

    #[test]
    fn deadlines_are_read_on_the_pipeline_and_on_units() {
        let loaded = load(
            "deadline: \"06:00\"\nunits:\n  - name: a\n    execute: 'true'\n    deadline: 90m\n  - name: b\n    execute: 'true'\n",
        )
        .unwrap();
        assert_eq!(
            loaded.pipeline.deadline,
            Some(Deadline::At { hour: 6, minute: 0 })
        );
        assert_eq!(
            loaded.pipeline.units[0].deadline,
            Some(Deadline::After(Duration::from_secs(5400)))
        );
        assert_eq!(loaded.pipeline.units[1].deadline, None);
    }

    #[test]
    fn without_a_deadline_the_definition_snapshot_has_no_trace_of_it() {
        let yaml = "units:\n  - name: a\n    execute: 'true'\n";
        let plain = serde_json::to_string(&load(yaml).unwrap().pipeline).unwrap();
        assert!(!plain.contains("deadline"), "{plain}");
        let timed = load(&format!("deadline: 2h\n{yaml}")).unwrap().pipeline;
        let text = serde_json::to_string(&timed).unwrap();
        assert!(text.contains(r#""deadline":"2h""#), "{text}");
        let back: crate::model::Pipeline = serde_json::from_str(&text).unwrap();
        assert_eq!(back.deadline, timed.deadline);
    }

    #[test]
    fn a_bad_deadline_is_refused_with_a_hint() {
        for (yaml, said) in [
            ("deadline: \"25:00\"", "not a clock time"),
            ("deadline: soon", "deadline"),
            ("deadline: [1]", "a clock time or a duration"),
            ("deadline: 0s", "zero"),
        ] {
            let error =
                load(&format!("{yaml}\nunits: [{{name: a, execute: 'true'}}]")).unwrap_err();
            assert!(error.contains(said), "{yaml}: {error}");
        }
    }
}
