//! `Segment::read_many` at every shape of its output: few and many
//! handles, CPU counts that are and are not multiples of its window of 8
//! CPUs or a power of two (each window reads a slot's values on up to 8
//! CPUs and writes them as one run; kept handles of a segment of up to 8
//! CPUs are read first in one window of every CPU), and a group update
//! seen whole through windows of 8 CPUs, and through one of 4, under a
//! writer running at full speed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use perfabi::Semantics;
use perfabi_reader::{Error, Segment};
use perfabi_shm::writer::{Config, Writer};
use perfabi_shm::SegmentMap;
use perfabi_test_harness::deadline::Deadline;

/// A segment of `cpus` blocks with `slots` counters `c0..`, counter `i`
/// holding `i << 20 | cpu` on each CPU.
fn segment(path: &std::path::Path, cpus: u32, slots: u32) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(cpus),
            max_instances: slots,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for i in 0..slots {
        let id = w
            .add_external(
                &format!("c{i}"),
                "",
                Semantics::Counter,
                perfabi::ValueType::U64,
            )
            .unwrap();
        let v: Vec<u64> = (0..u64::from(cpus))
            .map(|c| u64::from(i) << 20 | c)
            .collect();
        w.publish_per_cpu(id, &v).unwrap();
    }
    w
}

#[test]
fn read_many_returns_every_value_in_place_at_every_shape() {
    let dir = tempfile::tempdir().unwrap();
    for cpus in [1u32, 2, 3, 4, 5, 6, 7, 8, 9, 64, 68, 130, 512, 1025] {
        let path = dir.path().join(format!("seg{cpus}"));
        let slots = 600;
        let _w = segment(&path, cpus, slots);
        let mut seg = Segment::open(&path).unwrap();
        let n = seg.nr_cpus();
        assert_eq!(n, cpus as usize);
        for count in [1usize, 8, 9, 30, 64, 65, 512, 513, 600] {
            // Handles in an order other than the slots', with a repeat.
            let picks: Vec<usize> = (0..count)
                .map(|i| (i * 7 + 3) % slots as usize)
                .chain([5])
                .collect();
            let hs: Vec<_> = picks
                .iter()
                .map(|i| seg.handle(&format!("c{i}")).unwrap())
                .collect();
            // The first read checks the entries; the second takes them as
            // found live (at up to 8 CPUs, in one window of every CPU).
            for read in ["first", "kept"] {
                let mut out = vec![u64::MAX; hs.len() * n];
                seg.read_many(&hs, &mut out).unwrap();
                for (k, (row, &i)) in out.chunks_exact(n).zip(&picks).enumerate() {
                    for (cpu, &v) in row.iter().enumerate() {
                        assert_eq!(
                            v,
                            (i as u64) << 20 | cpu as u64,
                            "{cpus} CPUs, {} handles, {read} read: handle {k} (c{i}) on CPU {cpu}",
                            hs.len()
                        );
                    }
                }
            }
            // A buffer of the wrong size is refused, not written past.
            let mut short = vec![0u64; hs.len() * n - 1];
            assert!(seg.read_many(&hs, &mut short).is_err());
        }
    }
}

/// Every group update adds 1 to each of 8 counters (a group's most), read
/// with 4 more (12 handles) from a segment of 256 CPU blocks (so windows
/// of 8 CPUs), and of 4 (every CPU in one window): on every CPU the 8 are
/// equal in a read, or the read was torn.
#[test]
fn a_group_update_is_seen_whole_through_windows_of_cpus() {
    for cpus in [256, 4] {
        group_update_seen_whole(cpus);
    }
}

fn group_update_seen_whole(cpus: u32) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Arc::new(
        Writer::create(
            &path,
            &Config {
                nr_cpus: Some(cpus),
                max_instances: 16,
                damon_capacity: 0,
                ..Config::default()
            },
        )
        .unwrap(),
    );
    let ids: Vec<_> = (0..12)
        .map(|i| w.add(&format!("g{i}"), "", Semantics::Counter).unwrap())
        .collect();
    let ids = ids[..8].to_vec();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        let group: Vec<_> = ids.iter().map(|&id| (id, 1)).collect();
        thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                w.adjust_group(&group).unwrap();
                n += 1;
            }
            n
        })
    };
    let mut seg = Segment::open(&path).unwrap();
    let hs: Vec<_> = (0..12)
        .map(|i| seg.handle(&format!("g{i}")).unwrap())
        .collect();
    let n = seg.nr_cpus();
    let mut out = vec![0u64; hs.len() * n];
    let (mut reads, mut changes, mut bad) = (0u64, 0u64, 0u64);
    let mut last = 0u64;
    let until = Deadline::witness();
    while reads < 100_000 || (changes < 100 && !until.passed()) {
        match seg.read_many(&hs, &mut out) {
            Ok(_) => {
                for cpu in 0..n {
                    let first = out[cpu];
                    if out.chunks_exact(n).take(8).any(|row| row[cpu] != first) {
                        bad += 1;
                    }
                }
                let total: u64 = out[..n].iter().sum();
                changes += u64::from(total != last);
                last = total;
                reads += 1;
            }
            Err(Error::Busy(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let updates = writer.join().unwrap();
    println!("read_many at {cpus} CPUs: {reads} reads, {changes} changes seen, {bad} torn, {updates} group updates");
    assert_eq!(bad, 0);
    until.assert(
        changes >= 100,
        format_args!("100 changes seen ({changes} in {reads} reads)"),
    );
}

/// A slot beyond the instance table is refused with `OutOfBounds`, never
/// a panic, on every path of the core's `Values::read_slots_at`: entries
/// checked (a first read), entries taken as verified at the current
/// generation (where only the value loop's own index check sees the
/// slot), one slot (`read_slot_at`), a few and more than 8 (windows of 8,
/// 4, 2 and 1 CPUs at 130 CPUs); through a `SegmentView` and a
/// `SegmentMap`'s values alike. The slot just past the table is tried as
/// well as `u32::MAX`, and a run of `read_ranges` that ends past it: its
/// index is still inside the mapping (the block's
/// next words), so only the bound check refuses it. A `Segment`'s handles
/// cannot name such a slot: they are made only by looking a counter up,
/// and what they name is private.
#[test]
fn a_slot_beyond_the_table_is_refused_on_every_path() {
    use perfabi::error::Section;
    let dir = tempfile::tempdir().unwrap();
    for cpus in [2u32, 130] {
        let path = dir.path().join(format!("seg{cpus}"));
        let slots = 20u32;
        let _w = segment(&path, cpus, slots);
        let mut seg = Segment::open(&path).unwrap();
        let n = seg.nr_cpus();
        let good = seg.handle("c3").unwrap();
        let key = (good.instance().slot, good.instance().reg_id);
        let file = std::fs::File::open(&path).unwrap();
        let md = file.metadata().unwrap();
        let map = perfabi_shm::SegmentMap::new(file, &md, perfabi::trust::Origin::File, u64::MAX)
            .unwrap();
        assert_eq!(map.layout().max_instances, slots as usize);
        let (view, values) = (map.view(), map.values());
        for count in [1usize, 3, 12] {
            for bad in [slots, u32::MAX] {
                let mut keys = vec![key; count];
                let mut out = vec![0u64; n * count];
                let g = view.read_slots_at(&keys, None, &mut out, 100).unwrap();
                assert_eq!(out[n - 1], 3 << 20 | u64::from(cpus - 1));
                *keys.last_mut().unwrap() = (bad, key.1);
                for verified in [None, Some(g)] {
                    for e in [
                        view.read_slots_at(&keys, verified, &mut out, 100),
                        values.read_slots_at(&keys, verified, &mut out, 100),
                    ] {
                        assert_eq!(
                            e,
                            Err(perfabi::Error::OutOfBounds(Section::Counters)),
                            "{cpus} CPUs, {count} keys, slot {bad}, verified {verified:?}"
                        );
                    }
                }
            }
        }
        // read_ranges: a run ending past the table, alone (the one-run
        // path) or after another run, and one starting there.
        let last = slots as usize - 1;
        for runs in [
            vec![(last, 2)],
            vec![(slots as usize, 1)],
            vec![(0, 1), (last, 2)],
        ] {
            let stride: usize = runs.iter().map(|r| r.1).sum();
            let mut out = vec![0u64; n * stride];
            assert_eq!(
                values.read_ranges(&runs, &mut out, 100),
                Err(perfabi::Error::OutOfBounds(Section::Counters)),
                "{cpus} CPUs, runs {runs:?}"
            );
        }
        let mut out = vec![0u64; n * 2];
        values.read_ranges(&[(last - 1, 2)], &mut out, 100).unwrap();
    }
}

/// A CPU left busy (its sequence odd, as a writer that died mid-update
/// leaves it) fails a read of a few slots with `BusyCpu` naming that CPU,
/// wherever it falls in the reader's windows of CPUs (the first, a middle
/// and the last of a window of 8, one of 4, the last CPU alone, at 13
/// CPUs; any of 5 CPUs read in one window), with the entries checked and
/// taken as verified; once it is even again the read succeeds. The window
/// of several CPUs that found it busy falls back to a window per CPU,
/// which is what names it.
#[test]
fn a_busy_cpu_is_named_wherever_it_is_in_a_window() {
    // 13 CPUs: windows of 8, 4 and 1; 5: every CPU in one window.
    for cpus in [13u32, 5] {
        busy_cpu_named(cpus);
    }
}

/// The keys (slot, registration) of counters c1, c3 and c7 of the
/// segment at `path`, and the segment mapped (by a file opened for
/// writing too, which is returned, so a test can make a CPU busy).
fn keys_and_map(path: &std::path::Path) -> (Vec<(u32, u64)>, std::fs::File, SegmentMap) {
    let mut seg = Segment::open(path).unwrap();
    let keys = ["c1", "c3", "c7"]
        .iter()
        .map(|c| {
            let h = seg.handle(c).unwrap();
            (h.instance().slot, h.instance().reg_id)
        })
        .collect();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let md = file.metadata().unwrap();
    let map = SegmentMap::new(
        file.try_clone().unwrap(),
        &md,
        perfabi::trust::Origin::File,
        u64::MAX,
    )
    .unwrap();
    (keys, file, map)
}

fn busy_cpu_named(cpus: u32) {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = segment(&path, cpus, 20);
    let (keys, file, map) = keys_and_map(&path);
    let n = map.layout().nr_cpus;
    let values = map.values();
    let mut out = vec![0u64; n * keys.len()];
    let g = values.read_slots_at(&keys, None, &mut out, 100).unwrap();
    for busy in [0usize, 3, 4, 7, 8, 11, 12].into_iter().filter(|&c| c < n) {
        let at = 8 * (map.layout().cpu_block_word(busy) + perfabi::layout::CPU_SEQ_WORD) as u64;
        let mut seq = [0u8; 8];
        file.read_exact_at(&mut seq, at).unwrap();
        let even = u64::from_ne_bytes(seq);
        assert_eq!(even % 2, 0);
        file.write_all_at(&(even + 1).to_ne_bytes(), at).unwrap();
        for verified in [None, Some(g)] {
            assert_eq!(
                values.read_slots_at(&keys, verified, &mut out, 100),
                Err(perfabi::Error::BusyCpu(busy as u32)),
                "CPU {busy} busy, verified {verified:?}"
            );
        }
        file.write_all_at(&even.to_ne_bytes(), at).unwrap();
        assert_eq!(values.read_slots_at(&keys, Some(g), &mut out, 100), Ok(g));
        assert_eq!(out[n - 1], 1 << 20 | u64::from(cpus - 1));
    }
}

/// No attempt allowed (`retries` 0) is no read: `BusyMetadata`, never
/// values, with the entries checked or taken as verified, at a CPU count
/// read in one window (whose one attempt is made only when one is
/// allowed) and at one read in several.
#[test]
fn no_attempt_allowed_is_no_read() {
    let dir = tempfile::tempdir().unwrap();
    for cpus in [4u32, 13] {
        let path = dir.path().join(format!("seg{cpus}"));
        let _w = segment(&path, cpus, 20);
        let (keys, _file, map) = keys_and_map(&path);
        let values = map.values();
        let mut out = vec![u64::MAX; cpus as usize * keys.len()];
        let g = values.read_slots_at(&keys, None, &mut out, 100).unwrap();
        for verified in [None, Some(g)] {
            out.fill(u64::MAX);
            assert_eq!(
                values.read_slots_at(&keys, verified, &mut out, 0),
                Err(perfabi::Error::BusyMetadata),
                "{cpus} CPUs, verified {verified:?}"
            );
            assert!(out.iter().all(|&v| v == u64::MAX), "nothing read");
        }
    }
}
