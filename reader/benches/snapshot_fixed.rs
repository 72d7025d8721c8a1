//! The fixed cost of one snapshot: [`Segment::snapshot_into`] of a
//! segment of 2 CPU blocks × 30 counters (the smallest a directory
//! reader meets, once per segment), beside the floor of the same words
//! (per block the sequence word, the 30 values by relaxed loads, the
//! sequence word again). What the snapshot costs above the floor is its
//! fixed part: the checks of the header, the writer and the mapping, the
//! metadata generation, the buffers.
//!
//! ```sh
//! cargo bench -p perfabi-reader --bench snapshot_fixed            # ns, 9 rounds
//! valgrind --tool=callgrind target/release/deps/snapshot_fixed-* --calls 100000
//! ```
//!
//! Time is the thread's CPU time over rounds of 200,000 calls, snapshot
//! and floor alternating round by round (a busy machine slows both alike);
//! the medians are printed. `--calls N` runs only N snapshots (for
//! callgrind: instructions per snapshot are its total over N).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use perfabi::layout::CPU_SEQ_WORD;
use perfabi::{Layout, Semantics};
use perfabi_reader::{Segment, Snapshot};
use perfabi_shm::writer::{Config, Writer};

mod support;
use support::{median, per_call};

const CPUS: u32 = 2;
const SLOTS: u32 = 30;
const ROUND: u32 = 200_000;

/// Per block: the sequence word, the values, the sequence word again.
fn floor(words: &[AtomicU64], l: &Layout, out: &mut [u64]) -> u64 {
    let mut seqs = 0u64;
    for (cpu, row) in out.chunks_exact_mut(SLOTS as usize).enumerate() {
        let seq = &words[l.cpu_block_word(cpu) + CPU_SEQ_WORD];
        let s1 = seq.load(Ordering::Relaxed);
        for (o, s) in row.iter_mut().zip(&words[l.counter_word(cpu, 0)..]) {
            *o = s.load(Ordering::Relaxed);
        }
        seqs = seqs.wrapping_add(s1 ^ seq.load(Ordering::Relaxed));
    }
    seqs
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls = args
        .iter()
        .position(|a| a == "--calls")
        .and_then(|i| args.get(i + 1)?.parse::<u32>().ok());
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(CPUS),
            max_instances: SLOTS,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for i in 0..SLOTS {
        let id = w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
        w.adjust(id, i64::from(i) + 1).unwrap();
    }
    let mut seg = Segment::open(&path).unwrap();
    let mut snap = Snapshot::default();
    seg.snapshot_into(&mut snap).unwrap();
    assert_eq!(snap.slots, SLOTS as usize);
    if let Some(n) = calls {
        for _ in 0..n {
            seg.snapshot_into(black_box(&mut snap)).unwrap();
        }
        println!("{n} snapshots");
        return;
    }
    // Bench harness arguments (`--bench`) are accepted and ignored.
    let file = std::fs::File::open(&path).unwrap();
    let md = file.metadata().unwrap();
    let map =
        perfabi_shm::SegmentMap::new(file, &md, perfabi::trust::Origin::File, u64::MAX).unwrap();
    let layout = *perfabi::view::SegmentView::new(map.words())
        .unwrap()
        .layout();
    let mut out = vec![0u64; (CPUS * SLOTS) as usize];
    let (mut snaps, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        snaps.push(per_call(ROUND, || {
            seg.snapshot_into(black_box(&mut snap)).unwrap();
        }));
        floors.push(per_call(ROUND, || {
            black_box(floor(map.words(), &layout, black_box(&mut out)));
        }));
    }
    let (s, f) = (median(snaps), median(floors));
    println!(
        "snapshot of {SLOTS} counters x {CPUS} CPUs: {s:.1} ns; floor (loads of the same words) {f:.1} ns; fixed cost {:.1} ns (target <= 30 ns)",
        s - f
    );
}
