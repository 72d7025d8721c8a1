//! Review findings on the PMDA's family metrics.

use perfabi::{Buckets, FamilySpec, Unit};
use perfabi_pcp_agent::family_metrics::{instance_labels, Role};
use perfabi_shm::writer::{Config, Writer};

/// The label names of a JSON object as the agent writes it (flat, values
/// without `,` or `:` in these tests).
fn names(json: &str) -> Vec<String> {
    json.trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .map(|kv| kv.split(':').next().unwrap().trim_matches('"').to_string())
        .collect()
}

/// Spec §5.3 reserves only `cpu` and `le` as label keys (and a member's
/// labels may not repeat the dimension); `lower_bound` and `upper_bound`
/// are valid dimensions and label keys, and the writer takes them. The
/// agent gives every bucket instance of a histogram the labels
/// `lower_bound` and `upper_bound` after the member's own, so the label set
/// names `upper_bound` twice, and libpcp_pmda's `pmdaAddLabels` refuses
/// it (`-EINVAL`, "Invalid argument", checked with PCP 6.0.3): the bucket
/// instances lose all their labels, and the agent logs the refusal at
/// every label request.
#[test]
fn bucket_instance_labels_never_name_a_label_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        auto_heartbeat: false,
        max_instances: 64,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(dir.path().join("seg"), &cfg).unwrap();
    let f = w
        .add_family(&FamilySpec::histogram(
            "disk.lat",
            "latency",
            "lower_bound",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 3 },
        ))
        .unwrap();
    w.add_member(f, "sda", &[("upper_bound", "10ms")]).unwrap();
    let s = w.snapshot().unwrap();
    let fam = s.family("disk.lat").unwrap();
    let json = instance_labels(fam, Role::Buckets, 0, 0).unwrap();
    let mut n = names(&json);
    let all = n.len();
    n.sort();
    n.dedup();
    assert_eq!(n.len(), all, "a label named twice: {json}");
}
