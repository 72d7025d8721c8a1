//! Reading back what the recorder wrote, with the reader library.

#![allow(dead_code)]

use std::path::Path;

use perfabi_reader::{Family, FamilyValues, Reading, Segment};

/// A member as read: its instance, its labels and its total.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub instance: String,
    pub labels: Vec<(String, String)>,
    pub total: Reading,
}

/// The family `name` of the segment at `path` and its members' totals, in
/// one consistent read.
pub fn family(path: &Path, name: &str) -> (Family, Vec<Read>) {
    let mut seg = Segment::open(path).expect("the recorder's segment opens");
    let mut h = seg
        .family_handle(name)
        .unwrap_or_else(|e| panic!("family {name}: {e}"));
    let mut out = FamilyValues::default();
    seg.read_family(&mut h, &mut out)
        .expect("a consistent read");
    let f = h.family().clone();
    let members = f
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| Read {
            instance: m.instance.clone(),
            labels: m.labels.clone(),
            total: out.reading(&f, i),
        })
        .collect();
    (f, members)
}

/// The total of the one member `instance` of family `name`.
pub fn total(path: &Path, name: &str, instance: &str) -> Reading {
    let (_, members) = family(path, name);
    members
        .into_iter()
        .find(|m| m.instance == instance)
        .unwrap_or_else(|| panic!("{name} has no member {instance:?}"))
        .total
}

/// The recorder's count of drops for `reason`.
pub fn dropped(path: &Path, reason: &str) -> u64 {
    match total(path, perfabi_metrics::DROPPED, reason) {
        Reading::Unsigned(n) => n,
        r => panic!("dropped{{reason={reason}}} is {r:?}"),
    }
}

/// Labels as owned pairs.
pub fn labels(l: &[(&str, &str)]) -> Vec<(String, String)> {
    l.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
