//! perfabi-cat prints integers exactly in every output: values at the
//! edges of what an `f64` holds (2^64 − 1, 2^63, 2^53 + 1, i64::MIN) in the
//! table, `--cpu`, `--json`, `--openmetrics`, and `--watch` (lines and
//! JSON); a value in a unit converted to its base unit as the exact
//! decimal of the rational number (2^64 − 1 ms is 18446744073709551.615 s).

use std::path::Path;
use std::process::{Command, Output};

use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit, ValueType};
use perfabi_shm::writer::{Config, Writer};
use serde_json::Value;

const MAX: &str = "18446744073709551615";
const P63: &str = "9223372036854775808";
const P53_1: &str = "9007199254740993";
const MIN: &str = "-9223372036854775808";
/// 2^64 − 1 ms in seconds.
const MAX_MS_IN_S: &str = "18446744073709551.615";

/// What an `f64` makes of them, which no output may show.
const ROUNDED: [&str; 4] = [
    "18446744073709551616",
    "9223372036854775808.0",
    "9007199254740992",
    "-9223372036854775808.0",
];

fn cat(args: &[&str]) -> String {
    let out: Output = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat");
    assert!(
        out.status.success(),
        "perfabi-cat {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The edge values in 1.0 counters and instants, counter and gauge
/// families, a histogram's sum, and a counter of milliseconds exposed in
/// seconds.
fn edges(path: &Path) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            max_instances: 64,
            max_families: 8,
            max_members: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let max = w.add("legacy.max", "count", Semantics::Counter).unwrap();
    w.adjust(max, -1).unwrap();
    let min = w
        .add_typed("legacy.min", "", Semantics::Instant, ValueType::I64)
        .unwrap();
    w.set(min, i64::MIN).unwrap();

    let count = w
        .add_family(&FamilySpec::new(
            "big.count",
            "edges",
            "v",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (inst, delta) in [("max", -1), ("p63", i64::MIN), ("p53", (1 << 53) + 1)] {
        let m = w.add_member(count, inst, &[]).unwrap();
        w.member_add(&m, delta).unwrap();
    }
    let level = w
        .add_family(&FamilySpec {
            value_type: ValueType::I64,
            ..FamilySpec::new("big.level", "edges", "v", Kind::Gauge, Unit::COUNT)
        })
        .unwrap();
    for (inst, v) in [("min", i64::MIN), ("p53", (1 << 53) + 1)] {
        let m = w.add_member(level, inst, &[]).unwrap();
        w.member_set(&m, v).unwrap();
    }
    let ms = w
        .add_family(&FamilySpec::new(
            "big.time_seconds",
            "edges",
            "",
            Kind::Counter,
            Unit::MS,
        ))
        .unwrap();
    let m = w.add_member(ms, "", &[]).unwrap();
    w.member_add(&m, -1).unwrap();
    let hist = w
        .add_family(&FamilySpec::histogram(
            "big.hist",
            "edges",
            "",
            Unit::COUNT,
            Buckets::Explicit(vec![10, (1 << 53) + 1]),
        ))
        .unwrap();
    let m = w.add_member(hist, "", &[]).unwrap();
    w.observe(&m, u64::MAX).unwrap();
    w
}

fn no_rounding(mode: &str, text: &str) {
    for r in ROUNDED {
        assert!(!text.contains(r), "{mode}: {r} in {text}");
    }
}

#[test]
fn integers_are_exact_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = edges(&path);
    let p = path.to_str().unwrap();

    // The table and its per-CPU columns: plain numbers exactly, and the
    // histogram's sum and bucket bound.
    for mode in [&[][..], &["--cpu"]] {
        let text = cat(&[&[p][..], mode].concat());
        no_rounding(&format!("table {mode:?}"), &text);
        let row = |name: &str| {
            text.lines()
                .find(|l| l.split_whitespace().any(|w| w == name))
                .unwrap_or_else(|| panic!("no {name} row: {text}"))
                .to_string()
        };
        assert!(row("legacy.max").contains(MAX), "{text}");
        assert!(row("legacy.min").contains(MIN), "{text}");
        assert!(row("v=max").contains(MAX), "{text}");
        assert!(row("v=p63").contains(P63), "{text}");
        assert!(row("v=min").contains(MIN), "{text}");
        assert!(text.matches(P53_1).count() >= 2, "{text}");
        assert!(row("big.hist").contains(&format!("sum {MAX}")), "{text}");
        assert!(row("big.hist").contains(&format!(">{P53_1}")), "{text}");
    }

    // JSON: the numbers as written, read back exactly.
    let text = cat(&[p, "--json"]);
    no_rounding("--json", &text);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let fam = &doc["families"];
    let total = |f: &str, i: &str| fam[f]["instances"][i]["total"].clone();
    assert_eq!(total("big.count", "max").as_u64(), Some(u64::MAX));
    assert_eq!(total("big.count", "p63").as_u64(), Some(1 << 63));
    assert_eq!(total("big.count", "p53").as_u64(), Some((1 << 53) + 1));
    assert_eq!(total("big.level", "min").as_i64(), Some(i64::MIN));
    assert_eq!(total("big.hist", "")["sum"].as_u64(), Some(u64::MAX));
    for v in [MAX, P63, P53_1, MIN] {
        assert!(text.contains(v), "--json: no {v}");
    }

    // OpenMetrics: integers as they are, milliseconds in exact seconds.
    let text = cat(&[p, "--openmetrics"]);
    no_rounding("--openmetrics", &text);
    for line in [
        format!("perfabi_big_count_total{{v=\"max\"}} {MAX}"),
        format!("perfabi_big_count_total{{v=\"p63\"}} {P63}"),
        format!("perfabi_big_count_total{{v=\"p53\"}} {P53_1}"),
        format!("perfabi_big_level{{v=\"min\"}} {MIN}"),
        format!("perfabi_big_time_seconds_total {MAX_MS_IN_S}"),
        format!("perfabi_big_hist_sum {MAX}"),
        format!("perfabi_big_hist_bucket{{le=\"{P53_1}\"}} 0"),
        format!("perfabi_legacy_max_total {MAX}"),
        format!("perfabi_legacy_min {MIN}"),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }

    // --watch: a gauge's level is a value, exact; lines and JSON.
    let text = cat(&[p, "--watch", "0.05", "--count", "1"]);
    no_rounding("--watch", &text);
    for (row, v) in [("big.level{v=min}", MIN), ("big.level{v=p53}", P53_1)] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(row) && l.trim_end().ends_with(v)),
            "--watch: {row} {v}: {text}"
        );
    }
    let text = cat(&[p, "--watch", "0.05", "--count", "1", "--json"]);
    no_rounding("--watch --json", &text);
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["rates"]["big.level"]["min"].as_i64(), Some(i64::MIN));
    assert_eq!(
        line["rates"]["big.level"]["p53"].as_u64(),
        Some((1 << 53) + 1)
    );
    assert_eq!(line["rates"]["legacy.min"].as_i64(), Some(i64::MIN));
    drop(w);
}
