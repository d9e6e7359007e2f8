use super::*;

fn money(text: &str) -> Money {
    text.parse().unwrap()
}

#[test]
fn money_reads_and_writes_exact_decimals() {
    assert_eq!(money("0.05").nanos(), 50_000_000);
    assert_eq!(money("12").nanos(), 12 * NANOS_PER_UNIT);
    assert_eq!(money(".5").nanos(), 500_000_000);
    assert_eq!(money("0.000000001").nanos(), 1);
    assert_eq!(money("-1.25").nanos(), -1_250_000_000);
    assert_eq!(money("0.0500").to_string(), "0.05");
    assert_eq!(money("3").to_string(), "3");
    assert_eq!(money("0").to_string(), "0");
    assert_eq!(money("-1.25").to_string(), "-1.25");
    // Ten times 0.1 is exactly 1 (a float sum is not).
    let sum: Money = std::iter::repeat_n(money("0.1"), 10).sum();
    assert_eq!(sum, money("1"));
}

#[test]
fn money_refuses_what_is_not_a_plain_decimal() {
    for text in ["", ".", "1.", "1e3", "0,5", "abc", "1.2.3", " 1", "+1"] {
        assert!(
            matches!(text.parse::<Money>(), Err(MoneyError::NotDecimal(_))),
            "{text:?}"
        );
    }
    assert!(matches!(
        "0.0000000001".parse::<Money>(),
        Err(MoneyError::TooPrecise(_))
    ));
    assert!(matches!(
        "123456789012345678901".parse::<Money>(),
        Err(MoneyError::TooLarge(_))
    ));
}

#[test]
fn money_rounds_half_up_for_people() {
    assert_eq!(money("0.0125").to_places(3), "0.013");
    assert_eq!(money("0.0125").to_places(2), "0.01");
    assert_eq!(money("0.00005").to_places(4), "0.0001");
    assert_eq!(money("0.00004999").to_places(4), "0.0000");
    assert_eq!(money("2").to_places(4), "2.0000");
    assert_eq!(money("-0.00005").to_places(4), "-0.0001");
    assert_eq!(money("-0.00001").to_places(4), "0.0000");
    assert_eq!(money("7.5").to_places(0), "8");
}

#[test]
fn a_money_is_a_json_string_never_a_float() {
    let json = serde_json::to_string(&money("0.1")).unwrap();
    assert_eq!(json, "\"0.1\"");
    let back: Money = serde_json::from_str(&json).unwrap();
    assert_eq!(back, money("0.1"));
    assert!(serde_json::from_str::<Money>("0.1").is_err());
}

fn table() -> CostTable {
    CostTable {
        cpu_hour: Some(money("0.05")),
        gib_hour: Some(money("0.01")),
        node_hour: [("gpu".to_owned(), money("2.5"))].into(),
        currency: Some("EUR".to_owned()),
    }
}

#[test]
fn a_local_attempt_pays_cpu_hours_and_gib_hours_of_its_largest_resident_set() {
    // 90 CPU-seconds at 0.05 an hour: 0.00125; 512 MiB for 30 minutes at 0.01 a GiB-hour:
    // 0.0025. Exactly 0.00375.
    let usage = Usage::local(90_000, 512 * 1024, 1_800_000);
    assert_eq!(table().price(&usage), money("0.00375"));
    // Without a memory price only the CPU counts.
    let cpu_only = CostTable {
        gib_hour: None,
        ..table()
    };
    assert_eq!(cpu_only.price(&usage), money("0.00125"));
    // The node price is for Slurm attempts only.
    assert_eq!(CostTable::default().price(&usage), Money::ZERO);
}

#[test]
fn an_attempt_is_rounded_once_half_up_to_a_billionth() {
    // 1 ms of CPU at 1 an hour: 1/3,600,000 = 0.000000277…, rounds to 0.000000278.
    let table = CostTable {
        cpu_hour: Some(money("1")),
        ..CostTable::default()
    };
    assert_eq!(table.price(&Usage::local(1, 0, 1)), money("0.000000278"));
    // 1 KiB for 1 ms at 1 a GiB-hour is far below a billionth: 0.
    let memory = CostTable {
        gib_hour: Some(money("1")),
        ..CostTable::default()
    };
    assert_eq!(memory.price(&Usage::local(0, 1, 1)), Money::ZERO);
    // Half a billionth exactly rounds up: 1,800 ms of CPU at 0.000001 an hour = 0.0000000005.
    let tiny = CostTable {
        cpu_hour: Some(money("0.000001")),
        ..CostTable::default()
    };
    assert_eq!(tiny.price(&Usage::local(1_800, 0, 0)), money("0.000000001"));
}

#[test]
fn a_slurm_attempt_pays_its_requested_memory_and_its_nodes_at_its_partitions_price() {
    let request = SlurmRequest {
        partition: Some("gpu".to_owned()),
        nodes: 2,
        mem_mib: Some(4096),
    };
    // One hour: 2 nodes × 2.5 = 5; 4 GiB × 0.01 = 0.04; 1 CPU-hour × 0.05 = 0.05.
    let usage = Usage::slurm(3_600_000, 3_600_000, request.clone());
    assert_eq!(table().price(&usage), money("5.09"));
    // Its resident set is not what it pays for: the request is.
    let mut with_rss = usage.clone();
    with_rss.max_rss_kib = 64 << 20;
    assert_eq!(table().price(&with_rss), money("5.09"));
    // A partition without a node price pays no node part; no request, no memory part.
    let unpriced = SlurmRequest {
        partition: Some("batch".to_owned()),
        nodes: 1,
        mem_mib: None,
    };
    let usage = Usage::slurm(0, 3_600_000, unpriced);
    assert_eq!(table().price(&usage), Money::ZERO);
}

#[test]
fn show_prints_four_significant_digits_below_one_and_cents_above() {
    assert_eq!(table().show(money("0.00375")), "0.003750 EUR");
    assert_eq!(table().show(money("0.000013888")), "0.00001389 EUR");
    assert_eq!(table().show(money("0.027")), "0.02700 EUR");
    assert_eq!(table().show(money("0.000000001")), "0.000000001 EUR");
    assert_eq!(CostTable::default().show(money("12")), "12.00");
    assert_eq!(CostTable::default().show(money("1234.565")), "1234.57");
    assert_eq!(CostTable::default().show(Money::ZERO), "0");
}
