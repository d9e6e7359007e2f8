//! Warnings for keys that are set where they can have no effect (issues 35 and 36):
//! `retry_on_exit` on a unit that is never retried (`retries` is 0), and
//! `resources: {slurm: {queue_timeout: ...}}` on a unit that does not run on Slurm. Each is
//! reported where it is written: on the unit, or once on `defaults:` when no unit that
//! inherits it gives it an effect.

use crate::config::schema::{Settings, Spec};
use crate::diagnostic::{Diagnostic, SourceFile};
use crate::model::ExecutorKind;

/// The warning for a `retry_on_exit` without retries.
pub(crate) const RETRY_ON_EXIT_WITHOUT_RETRIES: &str = "retry-on-exit-without-retries";
/// The warning for a `queue_timeout` on a unit that does not run on Slurm.
pub(crate) const QUEUE_TIMEOUT_NOT_SLURM: &str = "queue-timeout-not-slurm";

const RETRY_HINT: &str = "set `retries` (how many extra attempts) for the list to choose which failures are retried, or remove `retry_on_exit`";
const QUEUE_HINT: &str = "`queue_timeout` limits how long a Slurm job may wait in the queue: run the unit with `executor: slurm`, or remove it";

/// Pushes the warnings about keys without effect in `spec` to `diagnostics`.
pub(crate) fn check_no_effect(
    spec: &Spec,
    source: &SourceFile<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    check_retry_on_exit(spec, source, diagnostics);
    check_queue_timeout(spec, source, diagnostics);
}

/// The `retries` a unit with `settings` ends up with (`defaults:`, else 0).
fn retries(settings: &Settings, defaults: &Settings) -> u32 {
    (settings.retries.as_ref())
        .or(defaults.retries.as_ref())
        .map_or(0, |retries| retries.value)
}

fn check_retry_on_exit(spec: &Spec, source: &SourceFile<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let defaults = &spec.defaults;
    let mut default_has_effect = false;
    let mut default_inherited = false;
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let settings = &unit.settings;
        let n_retries = retries(settings, defaults);
        let Some(own) = &settings.retry_on_exit else {
            default_inherited = true;
            default_has_effect |= n_retries > 0;
            continue;
        };
        if n_retries == 0 {
            diagnostics.push(
                source
                    .warning(
                        RETRY_ON_EXIT_WITHOUT_RETRIES,
                        own.loc,
                        format!(
                            "{} has `retry_on_exit` but is never retried (`retries` is 0): the list has no effect",
                            unit.named(unit_idx)
                        ),
                    )
                    .with_hint(RETRY_HINT),
            );
        }
    }
    if let Some(default) = &defaults.retry_on_exit
        && default_inherited
        && !default_has_effect
    {
        diagnostics.push(
            source
                .warning(
                    RETRY_ON_EXIT_WITHOUT_RETRIES,
                    default.loc,
                    "`retry_on_exit` in `defaults:` has no effect: no unit that takes it is retried (`retries` is 0)",
                )
                .with_hint(RETRY_HINT),
        );
    }
}

/// Whether `settings` set a `queue_timeout` (`none` included).
fn sets_queue_timeout(settings: &Settings) -> bool {
    (settings.resources.as_ref()).is_some_and(|resources| resources.value.queue_timeout.is_some())
}

fn check_queue_timeout(spec: &Spec, source: &SourceFile<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let defaults = &spec.defaults;
    let mut default_has_effect = false;
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let settings = &unit.settings;
        let executor = (settings.executor.as_ref())
            .or(defaults.executor.as_ref())
            .map_or(ExecutorKind::Local, |executor| executor.value);
        let on_slurm = executor == ExecutorKind::Slurm;
        if !sets_queue_timeout(settings) {
            default_has_effect |= on_slurm;
            continue;
        }
        if let Some(resources) = &settings.resources
            && !on_slurm
        {
            diagnostics.push(
                source
                    .warning(
                        QUEUE_TIMEOUT_NOT_SLURM,
                        resources.loc,
                        format!(
                            "{} sets `queue_timeout` in `resources: {{slurm: ...}}` but does not run on Slurm (`executor: {}`): it has no effect",
                            unit.named(unit_idx),
                            executor.as_str()
                        ),
                    )
                    .with_hint(QUEUE_HINT),
            );
        }
    }
    if let Some(resources) = &defaults.resources
        && resources.value.queue_timeout.is_some()
        && !default_has_effect
    {
        diagnostics.push(
            source
                .warning(
                    QUEUE_TIMEOUT_NOT_SLURM,
                    resources.loc,
                    "`queue_timeout` in `defaults:` has no effect: no unit that takes it runs on Slurm",
                )
                .with_hint(QUEUE_HINT),
        );
    }
}
