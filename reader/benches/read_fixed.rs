//! The fixed cost of every read path at 2 CPUs, where it weighs most:
//! [`Segment::read`] of one counter (`handle`), [`Segment::read_many`] of
//! 14 (`many`), [`Segment::read_family`] of a 16-instance family
//! (`family`) and [`Segment::snapshot_into`] of all 30 value slots
//! (`snapshot`), on the geometry of `reader/benches/scaling.rs` at 2
//! CPUs × 30 slots, each beside its floor there: per CPU block the
//! sequence word, the same values by relaxed loads, the sequence word
//! again.
//!
//! ```sh
//! cargo bench -p perfabi-reader --bench read_fixed       # ns, 11 rounds
//! valgrind --tool=callgrind target/release/deps/read_fixed-* --calls 100000 --op many
//! ```
//!
//! Time is the thread's CPU time over rounds of 100,000 calls, each path
//! and its floor alternating round by round (a busy machine slows both
//! alike); the medians are printed, with the path's ratio to its floor
//! (issue 32: at most 2×). `--calls N --op NAME` makes only N calls of
//! one path (for callgrind: its instructions per call are its total over
//! N, less the total of `--calls 0`), `--op floor:NAME` N of its floor.

use std::hint::black_box;

use perfabi_reader::{FamilyValues, Segment, Snapshot};

mod support;
use support::{loop_floor, loop_many, median, per_call, segment, FAMILY};

const CPUS: u32 = 2;
const SLOTS: u32 = 30;
const ROUND: u32 = 100_000;
const ROUNDS: usize = 11;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1).cloned()
    };
    let calls = arg("--calls").and_then(|n| n.parse::<u32>().ok());
    let only = arg("--op");
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let path = dir.path().join("seg");
    let _w = segment(&path, CPUS, SLOTS);
    let mut seg = Segment::open(&path).unwrap();
    let nr = CPUS as usize;

    let h = seg.handle("c0").unwrap();
    let mut one = vec![0u64; nr];
    let counters = (SLOTS - FAMILY) as usize;
    let hs: Vec<_> = (0..counters)
        .map(|s| seg.handle(&format!("c{s}")).unwrap())
        .collect();
    let mut many = vec![0u64; nr * counters];
    let mut fh = seg.family_handle("bench.fam").unwrap();
    let mut fv = FamilyValues::default();
    let mut snap = Snapshot::default();
    seg.read(&h, &mut one).unwrap();
    seg.read_many(&hs, &mut many).unwrap();
    seg.read_family(&mut fh, &mut fv).unwrap();
    seg.snapshot_into(&mut snap).unwrap();
    assert_eq!(
        (one[1], many[nr * 13 + 1], fv.len()),
        (1, (13 << 20) + 1, 16)
    );
    assert_eq!(snap.slots, SLOTS as usize);

    type Op<'a> = (&'a str, Box<dyn FnMut(&mut Segment) + 'a>);
    let mut ops: Vec<Op<'_>> = vec![
        (
            "handle",
            Box::new(|s: &mut Segment| {
                s.read(black_box(&h), &mut one).unwrap();
            }),
        ),
        (
            "many",
            Box::new(|s: &mut Segment| {
                s.read_many(black_box(&hs), black_box(&mut many)).unwrap();
            }),
        ),
        (
            "family",
            Box::new(|s: &mut Segment| {
                s.read_family(black_box(&mut fh), black_box(&mut fv))
                    .unwrap();
            }),
        ),
        (
            "snapshot",
            Box::new(|s: &mut Segment| s.snapshot_into(black_box(&mut snap)).unwrap()),
        ),
    ];
    let file = std::fs::File::open(&path).unwrap();
    let md = file.metadata().unwrap();
    let map =
        perfabi_shm::SegmentMap::new(file, &md, perfabi::trust::Origin::File, u64::MAX).unwrap();
    let layout = *map.layout();
    let fam_first = (SLOTS - FAMILY) as usize;
    let floors: [Vec<usize>; 4] = [
        vec![0],
        (0..counters).collect(),
        (fam_first..SLOTS as usize).collect(),
        (0..SLOTS as usize).collect(),
    ];
    // The floor of path `name` over `slots`.
    let floor = |name: &str, slots: &[usize], out: &mut [u64]| {
        if name == "many" {
            loop_many(map.words(), &layout, slots, out)
        } else {
            loop_floor(map.words(), &layout, slots[0], out)
        }
    };
    if let Some(n) = calls {
        let name = only.as_deref().unwrap_or("snapshot");
        // `floor:NAME`: the floor of path NAME, for its instructions.
        if let Some(name) = name.strip_prefix("floor:") {
            let k = ops
                .iter()
                .position(|(o, _)| *o == name)
                .expect("--op floor:handle|many|family|snapshot");
            let slots = &floors[k];
            let mut out = vec![0u64; nr * slots.len()];
            for _ in 0..n {
                black_box(floor(name, slots, black_box(&mut out)));
            }
            println!("{n} calls of the floor of {name}");
            return;
        }
        let (_, f) = ops
            .iter_mut()
            .find(|(o, _)| *o == name)
            .expect("--op handle|many|family|snapshot|floor:NAME");
        for _ in 0..n {
            f(&mut seg);
        }
        println!("{n} calls of {name}");
        return;
    }

    // Bench harness arguments (`--bench`) are accepted and ignored.
    println!("2 CPUs x 30 slots, ns per call (median of {ROUNDS} rounds of {ROUND} calls)");
    for ((name, f), slots) in ops.iter_mut().zip(&floors) {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let mut out = vec![0u64; nr * slots.len()];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(per_call(ROUND, || f(&mut seg)));
            b.push(per_call(ROUND, || {
                black_box(floor(name, slots, black_box(&mut out)));
            }));
        }
        let (a, b) = (median(a), median(b));
        println!(
            "{name:<9} {a:6.1}  floor {b:5.1}  above {:5.1}  x floor {:.2} (target <= 2)",
            a - b,
            a / b
        );
    }
}
