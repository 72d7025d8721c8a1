//! `spec/vectors/label_series.jsonl` (spec §9.2): each series of labels
//! registered through the recorder becomes the family dimension, member
//! instance and member labels the vector says, read back with the reader
//! library, or is refused and counted under the reason it says.

mod support;

use metrics::{counter, with_local_recorder, Label};
use perfabi_metrics::PerfabiBuilder;
use perfabi_reader::Reading;
use serde_json::Value;
use support::*;

fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .expect("an array of pairs")
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_string(),
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn label_series_vector() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/vectors/label_series.jsonl"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.perfabi");
    let r = PerfabiBuilder::new().path(&path).build().unwrap();
    let mut refused = 0;
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let labels = pairs(&v["labels"]);
        // A family of its own per line, so lines do not meet.
        let name = format!("vector.series{i}");
        let lbls: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label::new(k.clone(), v.clone()))
            .collect();
        with_local_recorder(&r, || counter!(name.clone(), lbls).increment(1));
        match v["refused"].as_str() {
            Some(reason) => {
                refused += 1;
                assert_eq!(reason, "labels", "line {}", i + 1);
                assert_eq!(dropped(&path, reason), refused, "line {} is refused", i + 1);
            }
            None => {
                let (f, m) = family(&path, &name);
                assert_eq!(
                    f.dimension,
                    v["dimension"].as_str().unwrap(),
                    "line {}",
                    i + 1
                );
                assert_eq!(m.len(), 1);
                assert_eq!(
                    m[0].instance,
                    v["instance"].as_str().unwrap(),
                    "line {}",
                    i + 1
                );
                assert_eq!(m[0].labels, pairs(&v["member_labels"]), "line {}", i + 1);
                assert_eq!(m[0].total, Reading::Unsigned(1));
            }
        }
    }
    assert!(refused > 0);
    // `counter!` itself takes the same path.
    with_local_recorder(&r, || {
        counter!("vector.macro", "b" => "2", "a" => "1").increment(1)
    });
    assert_eq!(family(&path, "vector.macro").1[0].instance, "1,2");
}
