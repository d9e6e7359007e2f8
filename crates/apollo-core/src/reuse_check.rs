//! `apollo check`'s rules for `reuse:` (DESIGN §12): a unit that says `reuse: true` must
//! declare outputs — reuse means "its outputs are already there", so with none there is
//! nothing to reuse — and `reuse: true` on an `idempotent: false` unit is allowed but warned
//! about: skipping a unit whose side effects are outside its declared outputs (a payment, a
//! deployment) is rarely what its author meant.
//!
//! `reuse: true` in `defaults:` applies only to the units that declare outputs; a unit without
//! outputs that inherits it is simply never reused (see `config::resolve`), so a pipeline-wide
//! default does not force `reuse: false` onto every unit that writes no file.

use crate::config::schema::Spec;
use crate::diagnostic::{Diagnostic, SourceFile};

/// The `reuse` diagnostics of every unit.
pub(crate) fn check_reuse(spec: &Spec, source: &SourceFile<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let defaults = &spec.defaults;
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        // Skipped by its `when:`: nothing of it runs, its declared files were set aside.
        if unit.skip_when.is_some() {
            continue;
        }
        let label = unit.named(unit_idx);
        let own = unit.settings.reuse.as_ref().filter(|reuse| reuse.value);
        if let Some(reuse) = own
            && unit.outputs.is_empty()
        {
            diagnostics.push(
                source
                    .error(
                        "reuse-without-outputs",
                        reuse.loc,
                        format!("{label} has `reuse: true` but declares no outputs: there is nothing to reuse"),
                    )
                    .with_hint(
                        "declare the files the unit writes in `outputs:`, or remove `reuse: true` (a unit reused from an earlier run is not run; only its outputs stand for it)",
                    ),
            );
            continue;
        }
        // The unit's own `reuse:` wins over `defaults:`, `false` included.
        let reuse = (unit.settings.reuse.as_ref())
            .or(defaults.reuse.as_ref())
            .filter(|reuse| reuse.value);
        let idempotent = unit
            .settings
            .idempotent
            .as_ref()
            .or(defaults.idempotent.as_ref());
        if let (Some(reuse), Some(idempotent)) = (reuse, idempotent)
            && !idempotent.value
            && !unit.outputs.is_empty()
            && !unit.acknowledges("reuse-not-idempotent")
        {
            diagnostics.push(
                source
                    .warning(
                        "reuse-not-idempotent",
                        reuse.loc,
                        format!("{label} is not idempotent but may be reused from an earlier run (`reuse: true`)"),
                    )
                    .with_note(format!("`idempotent: false` is set at line {}", idempotent.loc.line))
                    .with_hint(
                        "a reused unit is not run at all: its side effects beyond its declared outputs (a payment, a deployment) do not happen again; set `reuse: false` if they must",
                    ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn warned(yaml: &str) -> bool {
        let loaded = crate::config::load_str(yaml, Path::new("/base/p.yaml")).expect("valid");
        (loaded.warnings.iter()).any(|warning| warning.code == "reuse-not-idempotent")
    }

    /// A non-idempotent unit that says `reuse: false` is not reused, whatever `defaults:`
    /// says (it was warned about from `defaults: { reuse: true }`, found by the torture mix).
    #[test]
    fn the_unit_s_own_reuse_false_wins_over_the_defaults() {
        let unit = "units:\n  - name: pay\n    idempotent: false\n    outputs: [receipt]\n    execute: ./pay\n";
        let defaults = "defaults:\n  reuse: true\n";
        assert!(warned(&format!("{defaults}{unit}")));
        assert!(!warned(&format!("{defaults}{unit}    reuse: false\n")));
        assert!(warned(&format!("{unit}    reuse: true\n")));
        assert!(!warned(unit));
    }
}
