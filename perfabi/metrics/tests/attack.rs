//! An adversarial review of the `metrics` recorder (issue 32's attack
//! slice): each `finding N` test fails on the code as it is and is
//! ignored with its number until fixed.

mod support;

use metrics::{counter, with_local_recorder};
use perfabi_metrics::PerfabiBuilder;
use perfabi_reader::Reading;
use support::*;

/// Finding 9: two series whose label values differ only in where a comma
/// falls (`a="x,y" b="z"` and `a="x" b="y,z"`) get one member instance
/// (`x,y,z`: the values joined by `,`), so the second is refused as a
/// duplicate and its increments are dropped (counted in the recorder's
/// dropped family, gone from the metric). Label values with commas are
/// common (lists, CSV fields, user agents).
#[test]
fn finding_9_label_values_with_commas_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.perfabi");
    let r = PerfabiBuilder::new().path(&path).build().unwrap();
    with_local_recorder(&r, || {
        counter!("app.hits", "a" => "x,y", "b" => "z").increment(3);
        counter!("app.hits", "a" => "x", "b" => "y,z").increment(4);
    });
    let (_, members) = family(&path, "app.hits");
    for m in &members {
        println!("{m:?}");
    }
    let find = |a: &str, b: &str| {
        members
            .iter()
            .find(|m| m.labels == labels(&[("a", a), ("b", b)]))
            .map(|m| m.total.clone())
    };
    assert_eq!(find("x,y", "z"), Some(Reading::Unsigned(3)));
    assert_eq!(
        find("x", "y,z"),
        Some(Reading::Unsigned(4)),
        "the second series was dropped"
    );
}

/// Finding 9's neighbours: values with `%`, `=`, spaces, an escape's own
/// text, and long values each make a series of their own, read back with
/// their labels; values a member label cannot hold (a backslash, a quote,
/// a newline, an empty value, more than 47 bytes) are refused one by one,
/// counted as dropped (`labels`), and change no other series.
#[test]
fn label_values_of_every_kind_survive_or_are_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.perfabi");
    let r = PerfabiBuilder::new().path(&path).build().unwrap();
    let long_a = "v".repeat(40);
    let (long_b, long_c) = ("w".repeat(40), format!("{}x", "w".repeat(39)));
    let kept: Vec<(&str, &str, u64)> = vec![
        ("x,y", "z", 1),
        ("x", "y,z", 2),
        ("50%", "k=v", 3),
        ("%2C", "a b", 4),
        ("x%2Cy", "z", 5),
        (&long_a, &long_b, 6),
        (&long_a, &long_c, 7),
    ];
    let refused = [
        "back\\slash",
        "say \"hi\"",
        "two\nlines",
        "",
        &"z".repeat(48),
    ];
    with_local_recorder(&r, || {
        for (a, b, n) in &kept {
            counter!("app.hits", "a" => a.to_string(), "b" => b.to_string()).increment(*n);
        }
        for b in refused {
            counter!("app.hits", "a" => "x", "b" => b.to_string()).increment(100);
        }
    });
    let (_, members) = family(&path, "app.hits");
    assert_eq!(members.len(), kept.len(), "{members:#?}");
    for (a, b, n) in &kept {
        let m = members
            .iter()
            .find(|m| m.labels == labels(&[("a", a), ("b", b)]))
            .unwrap_or_else(|| panic!("a={a:?} b={b:?} missing: {members:#?}"));
        assert_eq!(m.total, Reading::Unsigned(*n), "a={a:?} b={b:?}");
    }
    assert_eq!(dropped(&path, "labels"), refused.len() as u64);
}
