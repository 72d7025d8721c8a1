//! Review findings on the userspace writer's family API: ids of another
//! writer. `InstanceId`'s documentation promises "Stale ids (deleted
//! instances, or ids of another segment) are refused, not misapplied", and
//! a `MemberId` is checked only by (value slot, registration id), both of
//! which every writer numbers the same way from 1. A `MemberId` also
//! carries its own family's kind and buckets, which `observe` trusts.

use perfabi::{Buckets, Error, FamilySpec, Kind, Reading, Unit};
use perfabi_shm::writer::{Config, Writer};

fn writer(dir: &tempfile::TempDir, name: &str) -> Writer {
    let cfg = Config {
        auto_heartbeat: false,
        max_instances: 64,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    };
    Writer::create(dir.path().join(name), &cfg).unwrap()
}

fn total(w: &Writer, family: &str) -> Reading {
    let s = w.snapshot().unwrap();
    let f = s.family(family).unwrap();
    s.reading(f, &f.members[0])
}

/// Writer A's histogram member has 32 explicit buckets; writer B has a
/// 2-bucket histogram member at the same value slot and registration id,
/// then a gauge right after it. `B.observe(&a_member, 3)` passes B's check
/// (`live[0] == 2`), takes bucket 2 from A's bounds and adds 1 to value
/// slot 0 + 2 + 2 = 4: B's gauge. (With a larger value it writes slot 33,
/// past B's `instances_used`.)
#[test]
fn a_histogram_member_id_of_another_writer_never_writes_other_members() {
    let dir = tempfile::tempdir().unwrap();
    let a = writer(&dir, "a");
    let b = writer(&dir, "b");
    let bounds: Vec<u64> = (1..=31).collect();
    let fa = a
        .add_family(&FamilySpec::histogram(
            "lat",
            "",
            "",
            Unit::NS,
            Buckets::Explicit(bounds),
        ))
        .unwrap();
    let ma = a.add_member(fa, "", &[]).unwrap();
    let fb = b
        .add_family(&FamilySpec::histogram(
            "lat",
            "",
            "",
            Unit::NS,
            Buckets::Log2 { first: 0, n: 2 },
        ))
        .unwrap();
    let mb = b.add_member(fb, "", &[]).unwrap();
    let g = b
        .add_family(&FamilySpec::new("g", "", "", Kind::Gauge, Unit::COUNT))
        .unwrap();
    let mg = b.add_member(g, "", &[]).unwrap();
    // Same value slot; the registration ids differ, because every writer
    // numbers them from a random start: the foreign id is refused.
    assert_eq!(ma.value_slot(), mb.value_slot());
    assert_ne!(ma.reg_id(), mb.reg_id(), "registration ids are per writer");
    assert_eq!(mg.value_slot(), 4);

    let r = b.observe(&ma, 3);
    assert_eq!(
        total(&b, "g"),
        Reading::Unsigned(0),
        "B's gauge was written"
    );
    assert_eq!(r, Err(Error::UnknownInstance));
}

/// `del_member` / `add_member` of writer B accept writer A's ids when slot
/// and registration id happen to match (they do for two writers that
/// registered the same number of things): B's own instance is deleted.
#[test]
fn a_member_id_of_another_writer_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = writer(&dir, "a");
    let b = writer(&dir, "b");
    let fa = a
        .add_family(&FamilySpec::new("x", "", "dev", Kind::Gauge, Unit::COUNT))
        .unwrap();
    let ma = a.add_member(fa, "sda", &[]).unwrap();
    let fb = b
        .add_family(&FamilySpec::new("y", "", "dev", Kind::Gauge, Unit::COUNT))
        .unwrap();
    let _mb = b.add_member(fb, "vdb", &[]).unwrap();

    let r = b.del_member(&ma);
    let s = b.snapshot().unwrap();
    assert_eq!(
        s.family("y").unwrap().members.len(),
        1,
        "B's instance vdb was deleted through A's id"
    );
    assert_eq!(r, Err(Error::UnknownInstance));
}

/// The same foreign id reaches past the counter array: B has one CPU block
/// whose counter array ends at the block's end, and the family table right
/// after it (the canonical 1.1 placement). `B.observe(&a_member, 1000)`
/// adds 1 at value slot 492 + 2 + 31, which is word 29 of B's family table:
/// the `state` of family 0 becomes 2 and every reader refuses B's segment
/// (`bad-family`, state). In rseq mode the same index goes to
/// `rseq::multi` as a raw offset, whose SAFETY comment assumes "every op
/// indexes a word of the block": on the last CPU of a segment without
/// family tables that is a write past the mapping.
#[test]
fn a_member_id_of_another_writer_cannot_corrupt_the_family_table() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |max_instances| Config {
        auto_heartbeat: false,
        nr_cpus: Some(1),
        max_instances,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    };
    let a = Writer::create(dir.path().join("a"), &cfg(1024)).unwrap();
    let b = Writer::create(dir.path().join("b"), &cfg(496)).unwrap();
    assert_eq!(b.layout().damon_offset, 4096);
    assert_eq!(b.layout().cpu_block_size, 4096);
    for w in [&a, &b] {
        for i in 0..492 {
            w.add(&format!("c{i}"), "", perfabi::Semantics::Counter)
                .unwrap();
        }
    }
    let bounds: Vec<u64> = (1..=31).collect();
    let fa = a
        .add_family(&FamilySpec::histogram(
            "lat",
            "",
            "",
            Unit::NS,
            Buckets::Explicit(bounds),
        ))
        .unwrap();
    let ma = a.add_member(fa, "", &[]).unwrap();
    let fb = b
        .add_family(&FamilySpec::histogram(
            "lat",
            "",
            "",
            Unit::NS,
            Buckets::Log2 { first: 0, n: 2 },
        ))
        .unwrap();
    let mb = b.add_member(fb, "", &[]).unwrap();
    // Same value slot; the registration ids differ, because every writer
    // numbers them from a random start: the foreign id is refused.
    assert_eq!(ma.value_slot(), mb.value_slot());
    assert_ne!(ma.reg_id(), mb.reg_id(), "registration ids are per writer");
    assert_eq!(mb.value_slot(), 492);

    let r = b.observe(&ma, 1000);
    let snap = b.snapshot().map(|_| ());
    assert_eq!(snap, Ok(()), "B's segment no longer validates");
    assert_eq!(r, Err(Error::UnknownInstance));
}

/// Memory safety. Writer B is a 1.0 segment (no family tables) whose last
/// CPU block ends at the segment's end; writer A's histogram member has
/// the same (value slot, registration id) as B's counter `y`. On B's last
/// CPU, `B.observe(&a_member, 1000)` passes B's check and, in rseq mode,
/// hands `rseq::multi` the word offset 16 + 492 + 2 + 31 of a 512-word
/// block: the write lands 232 bytes past B's mapping. mmap put A's mapping
/// right after B's in every run here (PCP-free, 2 CPUs, rseq), so the
/// write lands in A's header: its `family_entry_size` becomes 513 and every
/// reader refuses A (`bad-record-size`). In lock mode the same index
/// panics (`words[block + index]` out of bounds). Run in a child process,
/// as the write may as well hit an unmapped page.
#[test]
fn observe_with_a_foreign_id_never_writes_outside_its_segment() {
    const CHILD: &str = "PERFABI_REVIEW_OOB_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "observe_with_a_foreign_id_never_writes_outside_its_segment",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the child failed ({:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = Writer::create(
        dir.path().join("a"),
        &Config {
            auto_heartbeat: false,
            max_instances: 1024,
            max_families: 4,
            max_members: 8,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let b = Writer::create(
        dir.path().join("b"),
        &Config {
            auto_heartbeat: false,
            max_instances: 496,
            max_families: 0,
            max_members: 0,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    println!("method {:?}", b.method());
    for w in [&a, &b] {
        for i in 0..492 {
            w.add(&format!("c{i}"), "", perfabi::Semantics::Counter)
                .unwrap();
        }
    }
    let fa = a
        .add_family(&FamilySpec::histogram(
            "lat",
            "",
            "",
            Unit::NS,
            Buckets::Explicit((1..=31).collect()),
        ))
        .unwrap();
    let ma = a.add_member(fa, "", &[]).unwrap();
    let x = b.add("x", "", perfabi::Semantics::Counter).unwrap();
    b.del(x).unwrap();
    let y = b.add("y", "", perfabi::Semantics::Counter).unwrap();
    assert_eq!(ma.value_slot(), y.slot());
    assert_ne!(ma.reg_id(), y.reg_id(), "registration ids are per writer");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps
        .lines()
        .filter(|l| l.contains(dir.path().to_str().unwrap()))
    {
        println!("{l}");
    }
    let last = b.layout().nr_cpus - 1;
    let mut set = rustix::thread::CpuSet::new();
    set.set(last);
    rustix::thread::sched_setaffinity(None, &set).unwrap();

    let r = b.observe(&ma, 1000);
    println!("observe on cpu {last}: {r:?}");
    let bytes = std::fs::read(dir.path().join("a")).unwrap();
    assert_eq!(
        perfabi::validate(&bytes).map(|_| ()),
        Ok(()),
        "writer B wrote into writer A's segment"
    );
    assert_eq!(r, Err(Error::UnknownInstance));
}
