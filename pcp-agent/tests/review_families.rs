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

/// The agent gives every bucket instance of a histogram the labels
/// `lower_bound` and `upper_bound` after the member's own; a label set that
/// names one twice is refused by libpcp_pmda's `pmdaAddLabels` (`-EINVAL`,
/// PCP 6.0.3), and the instances would lose all their labels. So the spec
/// reserves both keys (§5.3, `perfabi::name::RESERVED_LABEL_KEYS`): the
/// writer refuses them as a dimension or a label key (a segment holding
/// them is refused by readers), and the labels of a bucket instance name
/// every label once.
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
    let hist = |dim: &str| {
        FamilySpec::histogram(
            "disk.lat",
            "latency",
            dim,
            Unit::NS,
            Buckets::Log2 { first: 10, n: 3 },
        )
    };
    for reserved in ["lower_bound", "upper_bound"] {
        assert_eq!(
            w.add_family(&hist(reserved)),
            Err(perfabi::Error::BadLabelKey)
        );
    }
    let f = w.add_family(&hist("device")).unwrap();
    for reserved in ["lower_bound", "upper_bound"] {
        assert_eq!(
            w.add_member(f, "sda", &[(reserved, "10ms")]).err(),
            Some(perfabi::Error::BadLabelKey)
        );
    }
    w.add_member(f, "sda", &[("model", "virtio")]).unwrap();
    let s = w.snapshot().unwrap();
    let fam = s.family("disk.lat").unwrap();
    let json = instance_labels(fam, Role::Buckets, 0, 0).unwrap();
    let mut n = names(&json);
    let all = n.len();
    n.sort();
    n.dedup();
    assert_eq!(n.len(), all, "a label named twice: {json}");
    assert!(n.contains(&"lower_bound".to_string()), "{json}");
}

/// The agent rebuilds its metric table (family index, member index per
/// instance id) only when (epoch, generation, number of 1.0 entries)
/// changes (pmda.rs `refresh`), and serves values, help and labels from
/// `source.reading.snapshot.families[family]`. The source reads into two
/// snapshots in turn, each with its own cache of decoded tables: a writer
/// that changes the family table without a generation change (anything in
/// a file another user writes) makes consecutive readings of one key hold
/// different families, so `perfabi.a` is served from family `b` every
/// other request, flip-flopping, instead of one table or the other.
#[test]
fn readings_with_the_same_rebuild_key_hold_the_same_families() {
    use perfabi::layout::FamilyEntry;
    use perfabi::Kind;
    use perfabi_pcp_agent::source::Source;
    use std::os::unix::fs::FileExt;
    use std::time::Instant;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let cfg = Config {
        auto_heartbeat: false,
        heartbeat_interval: std::time::Duration::ZERO,
        max_instances: 64,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(&path, &cfg).unwrap();
    for (name, v) in [("a", 1), ("b", 2)] {
        let f = w
            .add_family(&FamilySpec::new(name, "", "", Kind::Gauge, Unit::NONE))
            .unwrap();
        let m = w.add_member(f, "", &[]).unwrap();
        w.member_set(&m, v).unwrap();
    }
    let mut s = Source::new(&path, perfabi_reader::Trust::OwnerOrRoot);
    let key = |s: &Source| {
        let r = &s.reading;
        (
            r.info.as_ref().map(|i| i.header.epoch),
            r.snapshot.generation,
            r.snapshot.instances.len(),
        )
    };
    let names = |s: &Source| -> Vec<String> {
        s.reading
            .snapshot
            .families
            .iter()
            .map(|f| f.name.clone())
            .collect()
    };
    s.refresh(Instant::now(), &mut |_| {});
    let (k1, n1) = (key(&s), names(&s));
    // Swap the two names in the table, without a generation change.
    let t = w.layout().families.unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let name_at = |slot: usize| {
        (t.families_offset + slot * 512 + core::mem::offset_of!(FamilyEntry, name)) as u64
    };
    f.write_all_at(b"b\0", name_at(0)).unwrap();
    f.write_all_at(b"a\0", name_at(1)).unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        s.refresh(Instant::now(), &mut |_| {});
        assert_eq!(key(&s), k1);
        seen.push(names(&s));
    }
    println!("first {n1:?}, then {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "one rebuild key, families {n1:?} then {seen:?}"
    );
}
