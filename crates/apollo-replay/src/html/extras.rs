//! [`HtmlExtras`]: what the HTML page shows beyond the journal, read by the caller.

/// What the journal alone does not hold, for a richer page: the caller reads it from the
/// run's files (apollo-replay reads none).
#[derive(Default)]
#[non_exhaustive]
pub struct HtmlExtras<'a> {
    /// The end of a failed attempt's stderr: `(unit, attempt)` → text, shown under the unit.
    pub excerpts: Option<crate::ExcerptSource<'a>>,
    /// Each unit's `timeout`, in milliseconds: a marker where its last attempt would be cut off.
    pub timeouts_ms: std::collections::HashMap<String, u64>,
    /// Each unit's dependencies: the critical path (the chain of units that ended last, each
    /// waiting for the previous) is highlighted.
    pub deps: std::collections::HashMap<String, Vec<String>>,
    /// When the page is made: a live run's duration runs until then
    /// ([`crate::Timeline::duration_ms_at`]); without it, until the run's last record.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

impl<'a> HtmlExtras<'a> {
    /// Nothing extra.
    pub fn new() -> Self {
        Self::default()
    }

    /// With failed attempts' stderr excerpts.
    pub fn excerpts(mut self, excerpts: crate::ExcerptSource<'a>) -> Self {
        self.excerpts = Some(excerpts);
        self
    }

    /// With the units' timeouts, in milliseconds.
    pub fn timeouts_ms(mut self, timeouts_ms: std::collections::HashMap<String, u64>) -> Self {
        self.timeouts_ms = timeouts_ms;
        self
    }

    /// With the units' dependencies.
    pub fn deps(mut self, deps: std::collections::HashMap<String, Vec<String>>) -> Self {
        self.deps = deps;
        self
    }

    /// Made at `now` (a live run's duration runs until then).
    pub fn now(mut self, now: chrono::DateTime<chrono::Utc>) -> Self {
        self.now = Some(now);
        self
    }
}
