//! A unit with a `log_limit` (issue 36 item 18): its output goes through a relay that keeps
//! the head and the last part of each log, with a marker line where it cut; the unit is
//! neither killed nor slowed (it writes 8 MiB with a 64 KiB limit and exits 0), the failure
//! tail still has the last lines, and the cut is noted for `apollo logs`.

use apollo_core::event::AttemptStatus;
use apollo_exec::log_cap;

use crate::{Fixture, assert_no_survivors};

#[test]
fn a_log_over_its_limit_keeps_its_head_a_marker_and_its_last_lines() {
    // 8 MiB on stdout in lines, a little on stderr, then a last line each.
    let mut fixture = Fixture::new(
        "i=0; while [ $i -lt 128 ]; do head -c 65536 /dev/zero | tr '\\0' x | fold -w 63; \
         i=$((i+1)); done; echo 'last line of stdout'; echo 'small stderr' >&2; exit 3",
    );
    fixture.unit.log_limit = Some(64 * 1024);
    let outcome = fixture.run();
    assert_no_survivors(&fixture.run_id);
    // The unit ran to its own end: its exit code, not a kill.
    assert_eq!(outcome.status, AttemptStatus::Failed, "{outcome:?}");
    assert_eq!(
        outcome.exit,
        Some(apollo_core::event::ExitStatus::Code(3)),
        "{outcome:?}"
    );
    let stdout = fixture.read("stdout");
    assert!(stdout.len() < 64 * 1024 + 200, "{}", stdout.len());
    assert!(stdout.starts_with("xxx"), "{}", &stdout[..40]);
    assert!(stdout.ends_with("last line of stdout\n"));
    let marker = stdout
        .lines()
        .find(|line| line.starts_with("[apollo: "))
        .expect("a marker line");
    assert!(
        marker.ends_with(" bytes cut: log_limit 64 KiB]"),
        "{marker}"
    );
    // stderr was within the limit: whole, and not noted.
    assert_eq!(fixture.read("stderr"), "small stderr\n");
    let dir = fixture.dir.path().to_owned();
    let (cut, limit) = log_cap::read_capped(&dir, "stdout").expect("noted");
    assert_eq!(limit, 64 * 1024);
    assert!(cut > (8 << 20) - 64 * 1024 - 10_000, "{cut}");
    assert!(
        marker.contains(&format!("[apollo: {cut} bytes cut")),
        "{marker}"
    );
    assert_eq!(log_cap::read_capped(&dir, "stderr"), None);
    assert_eq!(outcome.stdout_bytes, stdout.len() as u64);
}
