//! HTML building blocks: escaping (every text a journal holds is user data), links, the page
//! frame with the embedded stylesheet and script.

use std::fmt::Write;

/// The stylesheet, embedded in the binary (no CDN, works offline).
pub(crate) const STYLE: &str = include_str!("../assets/app.css");
/// The script: live updates and the table filter, embedded in the binary.
pub(crate) const SCRIPT: &str = include_str!("../assets/app.js");

/// `text` escaped for HTML text and quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for one path segment or query value (everything but RFC 3986's
/// unreserved characters).
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The link to a run's page.
pub(crate) fn run_href(run: &str) -> String {
    format!("/runs/{}", encode(run))
}

/// The link to a unit's page in a run (its last attempt, or `attempt`).
pub(crate) fn unit_href(run: &str, unit: &str, attempt: Option<u32>) -> String {
    let mut href = format!("/runs/{}/units/{}", encode(run), encode(unit));
    if let Some(attempt) = attempt {
        let _ = write!(href, "?attempt={attempt}");
    }
    href
}

/// A duration in milliseconds for people: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// A state's label in a coloured badge (the class is the state's stable name).
pub(crate) fn badge(class: &str, label: &str) -> String {
    format!(
        "<span class=\"badge s-{}\">{}</span>",
        escape(class),
        escape(label)
    )
}

/// What a page's frame needs besides its body.
pub(crate) struct Frame<'a> {
    /// The `<title>`.
    pub(crate) title: &'a str,
    /// The breadcrumb links above the title: (text, href).
    pub(crate) crumbs: &'a [(&'a str, String)],
    /// The event stream that says when the page is out of date (a live run's).
    pub(crate) live: Option<String>,
}

/// A whole page: `body` inside the frame.
pub(crate) fn page(frame: &Frame<'_>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(out, "<title>{} · apollo</title>", escape(frame.title));
    // Both from this server (`/assets/`): the pages' content policy allows no inline script.
    out.push_str("<link rel=\"stylesheet\" href=\"/assets/app.css\"></head><body");
    if let Some(live) = &frame.live {
        let _ = write!(out, " data-live=\"{}\"", escape(live));
    }
    out.push_str("><header><nav aria-label=\"breadcrumbs\"><a href=\"/\">apollo</a>");
    for (text, href) in frame.crumbs {
        let _ = write!(out, " / <a href=\"{}\">{}</a>", escape(href), escape(text));
    }
    out.push_str("</nav><span id=\"live-status\" role=\"status\" aria-live=\"polite\"></span></header>\n<main id=\"main\">");
    out.push_str(body);
    out.push_str("</main><script src=\"/assets/app.js\"></script></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_text_stays_text() {
        assert_eq!(
            escape("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(encode("load[eu]/<x>"), "load%5Beu%5D%2F%3Cx%3E");
        assert_eq!(
            unit_href("r1", "a b", Some(2)),
            "/runs/r1/units/a%20b?attempt=2"
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
        assert_eq!(duration(7_380_000), "2 h 03 min");
    }
}
