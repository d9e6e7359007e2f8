use chrono::{FixedOffset, TimeZone, Utc};

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[test]
fn clock_times_and_durations_parse_and_print_back() {
    assert_eq!(
        Deadline::parse("06:00").unwrap(),
        Deadline::At { hour: 6, minute: 0 }
    );
    assert_eq!(
        Deadline::parse("2h").unwrap(),
        Deadline::After(Duration::from_secs(7200))
    );
    for text in ["06:00", "23:59", "2h", "1h30m"] {
        assert_eq!(Deadline::parse(text).unwrap().to_string(), text);
    }
    for bad in ["24:00", "6:00", "06:60", "0s", "soon", ""] {
        assert!(Deadline::parse(bad).is_err(), "{bad} accepted");
    }
}

#[test]
fn a_clock_time_is_the_first_one_after_the_start_in_the_local_zone() {
    let paris = FixedOffset::east_opt(3600).unwrap();
    let six = Deadline::At { hour: 6, minute: 0 };
    // 04:00 UTC is 05:00 in Paris: 06:00 Paris the same day, 05:00 UTC.
    assert_eq!(
        six.resolve(utc(2026, 12, 4, 4, 0), &paris),
        utc(2026, 12, 4, 5, 0)
    );
    // 22:00 UTC is 23:00 in Paris: tomorrow's 06:00.
    assert_eq!(
        six.resolve(utc(2026, 12, 4, 22, 0), &paris),
        utc(2026, 12, 5, 5, 0)
    );
    // Exactly at 06:00: the next one (strictly after the start).
    assert_eq!(
        six.resolve(utc(2026, 12, 4, 5, 0), &paris),
        utc(2026, 12, 5, 5, 0)
    );
    let two_hours = Deadline::After(Duration::from_secs(7200));
    assert_eq!(
        two_hours.resolve(utc(2026, 12, 4, 4, 0), &paris),
        utc(2026, 12, 4, 6, 0)
    );
}

#[test]
fn lateness_is_how_long_after_the_deadline_the_end_came() {
    let deadline = utc(2026, 12, 4, 6, 0);
    assert_eq!(late_by(deadline, utc(2026, 12, 4, 5, 59)), None);
    assert_eq!(late_by(deadline, deadline), None);
    assert_eq!(
        late_by(deadline, utc(2026, 12, 4, 6, 12)),
        Some(Duration::from_secs(720))
    );
    assert_eq!(from_journal(&to_journal(deadline)), Some(deadline));
}
