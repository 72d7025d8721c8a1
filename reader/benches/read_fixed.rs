//! Every read path beside its floor, in alternating rounds:
//! [`Segment::read`] of one counter (`handle`), [`Segment::read_many`] of
//! the first counters (`many`: 14 in 30-slot blocks, at most 30),
//! [`Segment::read_family`] of a 16-instance family (`family`) and
//! [`Segment::snapshot_into`] of every used slot (`snapshot`), on the
//! geometries of `reader/benches/scaling.rs` (2 CPUs × 30 slots unless
//! `--cpus N --slots M` say otherwise), each beside its floor there: per
//! CPU block the sequence word, the same values by relaxed loads, the
//! sequence word again.
//!
//! ```sh
//! cargo bench -p perfabi-reader --bench read_fixed       # 2 x 30, ns, 11 rounds
//! target/release/deps/read_fixed-* --cpus 1024 --slots 4080   # another geometry
//! reader/benches/alternating.sh                           # every scaling geometry
//! valgrind --tool=callgrind target/release/deps/read_fixed-* --calls 100000 --op many
//! ```
//!
//! Time is the thread's CPU time over rounds of calls (100,000, or as
//! many as read 6,000,000 values, at least 20), each path and its floor
//! alternating round by round (a busy machine slows both alike); the
//! medians are printed, with the path's ratio to its floor and the median
//! of the rounds' own ratios (issue 32: at most 2×). Where the scaling
//! table runs each path and its floor one after the other, load that
//! changes between them moves a row's ratio by up to ±50 %; here it
//! moves both. `--calls N --op NAME` makes only N calls of one path (for
//! callgrind: its instructions per call are its total over N, less the
//! total of `--calls 0`), `--op floor:NAME` N of its floor.
//!
//! Where a loop lands in the binary moves its time by up to 40 % (the
//! floors' more than the paths'). `PERFABI_BENCH_PAD=N` at build time
//! puts N bytes in this bench's code section, which moves the code the
//! linker places after them (the library's, and this bench's but `main`)
//! by N bytes: `reader/benches/placements.sh` builds it at 0, 16, 32 and
//! 48 and runs the four side by side.

use std::hint::black_box;

use perfabi_reader::{FamilyValues, Segment, Snapshot};

mod support;
use support::{loop_floor, loop_many, median, per_call, segment, FAMILY};

/// The default geometry (`--cpus`, `--slots`).
const CPUS: u32 = 2;
const SLOTS: u32 = 30;
/// Handles of `many` at most (scaling.rs's `MANY`).
const MANY: usize = 30;
/// Calls per round: this many values read, within [`ROUND_MIN`, `ROUND_MAX`].
const ROUND_VALUES: usize = 6_000_000;
const ROUND_MIN: usize = 20;
const ROUND_MAX: usize = 100_000;
const ROUNDS: usize = 11;

/// Bytes of [`PLACEMENT_PAD`]: `PERFABI_BENCH_PAD` when built, else 0.
const PAD: usize = match option_env!("PERFABI_BENCH_PAD") {
    Some(n) => decimal(n.as_bytes()),
    None => 0,
};

/// The decimal number `digits` (a build stops at anything else).
const fn decimal(digits: &[u8]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < digits.len() {
        assert!(
            digits[i].is_ascii_digit(),
            "PERFABI_BENCH_PAD: a number of bytes"
        );
        n = n * 10 + (digits[i] - b'0') as usize;
        i += 1;
    }
    n
}

/// [`PAD`] bytes in the code section: what moves the code the linker
/// places after them (a `nop` a byte, never run).
#[used]
#[link_section = ".text.perfabi_bench_pad"]
static PLACEMENT_PAD: [u8; PAD] = [0x90; PAD];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1).cloned()
    };
    let calls = arg("--calls").and_then(|n| n.parse::<u32>().ok());
    let only = arg("--op");
    let number = |name: &str, default: u32| {
        arg(name).map_or(default, |n| n.parse().expect("a number of CPUs or slots"))
    };
    let (cpus, slots) = (number("--cpus", CPUS), number("--slots", SLOTS));
    assert!(
        cpus >= 2 && slots > FAMILY,
        "--cpus 2.. --slots {}..",
        FAMILY + 1
    );
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let path = dir.path().join("seg");
    let _w = segment(&path, cpus, slots);
    let mut seg = Segment::open(&path).unwrap();
    let nr = cpus as usize;

    let h = seg.handle("c0").unwrap();
    let mut one = vec![0u64; nr];
    let counters = ((slots - FAMILY) as usize).min(MANY);
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
    assert_eq!(snap.slots, slots as usize);

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
    let fam_first = (slots - FAMILY) as usize;
    let floors: [Vec<usize>; 4] = [
        vec![0],
        (0..counters).collect(),
        (fam_first..slots as usize).collect(),
        (0..slots as usize).collect(),
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
    println!("{cpus} CPUs x {slots} slots, ns per call (median of {ROUNDS} rounds)");
    for ((name, f), slots) in ops.iter_mut().zip(&floors) {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let mut out = vec![0u64; nr * slots.len()];
        let round = (ROUND_VALUES / out.len()).clamp(ROUND_MIN, ROUND_MAX) as u32;
        let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(per_call(round, || f(&mut seg)));
            b.push(per_call(round, || {
                black_box(floor(name, slots, black_box(&mut out)));
            }));
            r.push(a[a.len() - 1] / b[b.len() - 1]);
        }
        let (a, b, r) = (median(a), median(b), median(r));
        println!(
            "{name:<9} {a:9.1}  floor {b:9.1}  above {:8.1}  x floor {:.2} (round by round {r:.2}; target <= 2)",
            a - b,
            a / b
        );
    }
}
