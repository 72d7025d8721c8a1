//! A dead writer's block left busy (its writer killed inside a histogram
//! observation, `spec/PERFABI.md` §15.5) is read settled by a directory
//! reader as by the fold: its counts neither vanish from the merged view
//! until the next fold nor change when it is folded.
//!
//! The block is made as a kill leaves it, deterministically: a closed
//! writer's file whose CPU 0 `seq` is made odd and whose histogram count
//! has the interrupted observation while its bucket has not.

use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicU64;

use perfabi::{Buckets, FamilySpec, Reading, SegmentView, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::writer::fold::fold;
use perfabi_shm::writer::{Config, Writer};

mod support;
use support::directory::count_requests;

/// (requests, observation count, segments read).
fn totals(dir: &std::path::Path) -> (u64, u64, usize) {
    let s = Directory::open(dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let mut t = (0, 0, s.segments);
    for f in &s.families {
        for r in &f.readings {
            match (f.family.name.as_str(), r) {
                ("app.requests", Reading::Unsigned(n)) => t.0 += n,
                ("app.latency", Reading::Histogram(h)) => {
                    assert_eq!(h.count, h.buckets.iter().sum::<u64>(), "consistent");
                    t.1 += h.count;
                }
                _ => {}
            }
        }
    }
    t
}

#[test]
fn a_dead_writers_busy_block_is_read_settled_by_readers_and_the_fold_alike() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let config = Config {
        nr_cpus: Some(2),
        max_instances: 32,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create_in(&dir, "w", &config).unwrap();
    count_requests(&w, "Requests", 5);
    let h = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 2, n: 4 },
        ))
        .unwrap();
    let hm = w.add_member(h, "", &[]).unwrap();
    for v in 0..5 {
        w.observe(&hm, v).unwrap();
    }
    let path = w.path().unwrap().to_path_buf();
    w.close();
    assert_eq!(totals(&dir), (5, 5, 1));
    // As a kill inside the next observation on CPU 0 leaves it.
    let bytes = std::fs::read(&path).unwrap();
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect();
    let view = SegmentView::new(&words).unwrap();
    let layout = *view.layout();
    let snap = view.snapshot(16).unwrap();
    let fam = snap.family("app.latency").unwrap();
    let slot = fam.members[0].value_slot as usize;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let put = |word: usize, v: u64| {
        file.write_all_at(&v.to_ne_bytes(), word as u64 * 8)
            .unwrap()
    };
    let seq = layout.cpu_block_word(0) + perfabi::layout::CPU_SEQ_WORD;
    put(
        seq,
        u64::from_ne_bytes(bytes[seq * 8..seq * 8 + 8].try_into().unwrap()) | 1,
    );
    let count = layout.counter_word(0, slot);
    let c0 = u64::from_ne_bytes(bytes[count * 8..count * 8 + 8].try_into().unwrap());
    put(count, c0 + 1);
    // Read settled: no problem, nothing lost, the histogram consistent.
    assert_eq!(totals(&dir), (5, 5, 1));
    // The fold keeps the same.
    let r = fold(&dir).unwrap();
    assert_eq!((r.folded, r.left.len()), (1, 0), "{r:?}");
    assert_eq!(totals(&dir), (5, 5, 0));
}
