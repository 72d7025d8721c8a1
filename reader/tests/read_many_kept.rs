//! `Segment::read_many` loads its handles' instance entries only when the
//! metadata generation moved since a read found them live
//! (`SegmentView::read_slots_at`): a handle whose counter was deleted, or
//! whose slot was reused by another registration, is still refused at the
//! very next read, however many reads before it kept the entries.

use perfabi::Semantics;
use perfabi_reader::{Error, Segment};
use perfabi_shm::writer::{Config, Writer};

#[test]
fn a_deleted_or_reused_slot_is_refused_after_reads_that_kept_its_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(4),
            max_instances: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let ids: Vec<_> = (0..3)
        .map(|i| {
            let id = w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
            w.adjust(id, i64::from(i) + 1).unwrap();
            id
        })
        .collect();
    let mut seg = Segment::open(&path).unwrap();
    let hs: Vec<_> = (0..3)
        .map(|i| seg.handle(&format!("c{i}")).unwrap())
        .collect();
    let n = seg.nr_cpus();
    let mut out = vec![0; 3 * n];
    let total = |out: &[u64], k: usize| out[k * n..(k + 1) * n].iter().sum::<u64>();
    for round in 0..3 {
        seg.read_many(&hs, &mut out).unwrap();
        // Values move without the generation moving: still read.
        assert_eq!(total(&out, 1), 2 + round);
        w.adjust(ids[1], 1).unwrap();
    }
    // Another set of handles (a subset) is checked afresh; the whole set
    // again, then kept.
    seg.read_many(&hs[..2], &mut out[..2 * n]).unwrap();
    seg.read_many(&hs, &mut out).unwrap();
    seg.read_many(&hs, &mut out).unwrap();

    // Deleted: refused at the next read of the handles kept.
    w.del(ids[1]).unwrap();
    assert!(matches!(
        seg.read_many(&hs, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    // The handles of a new registration of the same name in the same slot
    // read it, and are kept.
    let again = w.add("c1", "", Semantics::Counter).unwrap();
    w.adjust(again, 40).unwrap();
    let fresh = seg.handle("c1").unwrap();
    assert_eq!(
        fresh.instance().slot,
        hs[1].instance().slot,
        "the slot was reused"
    );
    let hs2 = [hs[0].clone(), fresh, hs[2].clone()];
    seg.read_many(&hs2, &mut out).unwrap();
    assert_eq!((total(&out, 0), total(&out, 1), total(&out, 2)), (1, 40, 3));
    seg.read_many(&hs2, &mut out).unwrap();
    // That slot deleted and reused again by another registration: the
    // kept handles are refused, not misread as the new one.
    w.del(again).unwrap();
    let third = w.add("c1", "", Semantics::Counter).unwrap();
    w.adjust(third, 7).unwrap();
    assert_eq!(
        seg.handle("c1").unwrap().instance().slot,
        hs[1].instance().slot
    );
    assert!(matches!(
        seg.read_many(&hs2, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
}

/// `Segment::read` keeps the entry of the last handle it found live by
/// the same rule: reads of one handle, and of another in between (and a
/// `read_many`), keep nothing past a generation that moved, so a deleted
/// or reused slot is refused at the very next read.
#[test]
fn read_of_one_handle_refuses_a_deleted_or_reused_slot_after_kept_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(3),
            max_instances: 8,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let a = w.add("a", "", Semantics::Counter).unwrap();
    let b = w.add("b", "", Semantics::Counter).unwrap();
    w.adjust(a, 5).unwrap();
    w.adjust(b, 9).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    let (ha, hb) = (seg.handle("a").unwrap(), seg.handle("b").unwrap());
    let mut out = vec![0; seg.nr_cpus()];
    let mut both = vec![0; 2 * seg.nr_cpus()];
    for round in 0..3u64 {
        assert_eq!(
            seg.read(&ha, &mut out).unwrap(),
            seg.read(&ha, &mut out).unwrap()
        );
        assert_eq!(out.iter().sum::<u64>(), 5 + round);
        seg.read(&hb, &mut out).unwrap();
        seg.read_many(&[ha.clone(), hb.clone()], &mut both).unwrap();
        w.adjust(a, 1).unwrap();
    }
    // Deleted: refused at once, though the last reads kept its entry.
    seg.read(&ha, &mut out).unwrap();
    w.del(a).unwrap();
    assert!(matches!(
        seg.read(&ha, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    // Its slot reused by another registration: the old handle is refused,
    // the new one reads the new counter.
    let again = w.add("a", "", Semantics::Counter).unwrap();
    w.adjust(again, 70).unwrap();
    let fresh = seg.handle("a").unwrap();
    assert_eq!(
        fresh.instance().slot,
        ha.instance().slot,
        "the slot was reused"
    );
    seg.read(&fresh, &mut out).unwrap();
    assert_eq!(out.iter().sum::<u64>(), 70);
    assert!(matches!(
        seg.read(&ha, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    // Kept again, then the slot reused once more: refused again.
    seg.read(&fresh, &mut out).unwrap();
    w.del(again).unwrap();
    let third = w.add("a", "", Semantics::Counter).unwrap();
    w.adjust(third, 1).unwrap();
    assert!(matches!(
        seg.read(&fresh, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
}
