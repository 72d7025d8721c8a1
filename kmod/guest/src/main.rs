//! perfabi-guest-check: the checks of the kernel-module tests, run inside a
//! qemu guest by `kmod/test/init`. Each check prints one line starting with
//! `PERFABI-TEST <name> PASS` or `PERFABI-TEST <name> FAIL`, which the host
//! grades; measurements print `PERFABI-MEASURE`.
//!
//! Subcommands:
//! * `readonly`: writable mmap and mprotect(PROT_WRITE) of /dev/perfabi fail;
//! * `rising NAME`: the counter NAME grows over 300 ms;
//! * `workload FILE`: maps 64 MiB, touches it, then keeps its first 4 MiB hot
//!   forever; writes "START END HOT_END PID" to FILE;
//! * `damon FILE [SEGMENT NAME]`: checks the latest DAMON aggregation of the
//!   workload in SEGMENT (default /dev/perfabi), reported as check NAME;
//! * `same-damon SEGMENT_A SEGMENT_B [NAME]`: both segments show the same
//!   latest aggregation of the same kdamond (the module's probe, or the
//!   eBPF writer's, and the exporter's tracepoint source saw the same
//!   events);
//! * `cost`: prints the self-test module's cost measurements;
//! * `canonical [NAME]`: the module's header is the one the Rust core lays
//!   out for the same geometry and identity (`Geometry::header`, and for
//!   ABI 1.1 `Sizes::families`): the C layout code of `spec/perfabi.h`, as
//!   the module runs it, equals Rust's (check NAME, default
//!   `canonical-header`);
//! * `families`: the self-test module's metric families, read with the
//!   Rust reader while its nesting stress runs (every CPU's copy of every
//!   histogram has count == the sum of its buckets) and then in full: names,
//!   help, units, kinds, instances and their numbers, labels, values,
//!   histogram buckets, peaks, deleted instances and families gone;
//! * `sources`: perfabi_sources.ko's families (README.md's table, the rows
//!   with a kernel source) are all there with the table's kind, unit,
//!   dimension and histogram buckets; `kernel.all.pswitch` and
//!   `kernel.interrupts.count` move; `lo` has its network instances;
//!   every histogram copy is consistent;
//! * `sources-lo`: `lo`'s network counters equal `/proc/net/dev`'s (the
//!   module was loaded before `lo` came up, so both count from zero);
//! * `sources-disk NAME present|absent|proc`: a disk's instances, within
//!   1.5 s: all there, all gone, or (proc) a workload's increments of its
//!   counts equal to /proc/diskstats';
//! * `sources-absent NAME`: no family of perfabi_sources.ko is left (after
//!   its unload), reported as check NAME;
//! * `hotplug MODULES`: loop disks, dummy network devices (drivers from the
//!   folder MODULES) and CPU 1 come and go while a reader snapshots; see
//!   `hotplug.rs`;
//! * `devices SEGMENT DISK TX_MAC RX_MAC`: the module's disk, network and
//!   interrupt totals after a workload equal those of `/proc` (published by
//!   a `perfabi-exportd` at SEGMENT); see `devices.rs`;
//! * `read-cost`: every interrupt and disk counter read through perfabi
//!   against reading and parsing `/proc/interrupts` and `/proc/diskstats`;
//! * `bpf-pin PIN`, `bpf-pswitch PIN`, `bpf-histogram FOLDER auto|raw-tp`,
//!   `bpf-nonroot PIN DISK`, `bpf-stale PIN`, `bpf-closed PIN`,
//!   `bpf-cpu PIN`, `bpf-cost`, `bpf-damon-ring PIN present|absent`: the
//!   eBPF writer (`perfabi-bpfd`) in the guest; see `bpf.rs` (its DAMON
//!   regions are checked by `damon` and `same-damon` on its pin);
//! * `bpf-disk PIN NAME present|absent|proc`: `sources-disk` on the eBPF
//!   writer's pin;
//! * `bpf-hotplug PIN MODULES`: `hotplug` on the eBPF writer's pin;
//! * `bpf-devices PIN SEGMENT DISK TX_MAC RX_MAC`: `devices` on the eBPF
//!   writer's pin (`bpf-equal-proc`).

mod bpf;
mod devices;
mod hotplug;

use std::time::Duration;

use perfabi::family::{Buckets, Family, Reading};
use perfabi::layout::Kind;
use perfabi::{Snapshot, Unit, ValueType};
use perfabi_reader::{Options, Segment};
use perfabi_test_harness::deadline::Deadline;

const DEV: &str = "/dev/perfabi";
const MIB: usize = 1 << 20;

fn verdict(name: &str, ok: bool, detail: &str) -> bool {
    println!(
        "PERFABI-TEST {name} {} {detail}",
        if ok { "PASS" } else { "FAIL" }
    );
    ok
}

fn open() -> Segment {
    open_path(DEV)
}

fn open_path(path: &str) -> Segment {
    Segment::open_with(
        path,
        Options {
            require_live: false,
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| {
        println!("PERFABI-TEST open FAIL {e}");
        std::process::exit(1)
    })
}

fn readonly() -> bool {
    let path = std::ffi::CString::new(DEV).unwrap();
    let len = 4096;
    // SAFETY: plain system calls on descriptors this function owns; the
    // mappings are unmapped before returning and never dereferenced.
    unsafe {
        // Root passes the 0444 mode, so the module itself must refuse.
        let rw = libc::open(path.as_ptr(), libc::O_RDWR);
        let w = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            rw,
            0,
        );
        let w_errno = std::io::Error::last_os_error().raw_os_error();
        let r = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            rw,
            0,
        );
        let mp = if r == libc::MAP_FAILED {
            0
        } else {
            libc::mprotect(r, len, libc::PROT_READ | libc::PROT_WRITE)
        };
        let mp_errno = std::io::Error::last_os_error().raw_os_error();
        let past = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            rw,
            1 << 40,
        );
        if r != libc::MAP_FAILED {
            libc::munmap(r, len);
        }
        libc::close(rw);
        let ok = rw >= 0
            && w == libc::MAP_FAILED
            && w_errno == Some(libc::EPERM)
            && r != libc::MAP_FAILED
            && mp != 0
            && mp_errno == Some(libc::EACCES)
            && past == libc::MAP_FAILED;
        verdict(
            "readonly",
            ok,
            &format!(
                "(writable mmap of an O_RDWR fd: errno {w_errno:?}, want EPERM; mprotect(PROT_WRITE): errno {mp_errno:?}, want EACCES; mmap past the end refused: {})",
                past == libc::MAP_FAILED
            ),
        )
    }
}

fn rising(name: &str) -> bool {
    let mut seg = open();
    let a = seg.counter(name).map(|c| c.total);
    std::thread::sleep(Duration::from_millis(300));
    let b = seg.counter(name).map(|c| c.total);
    match (a, b) {
        (Ok(a), Ok(b)) => verdict("rising", b > a, &format!("{name}: {a} -> {b}")),
        (a, b) => verdict("rising", false, &format!("{name}: {a:?} {b:?}")),
    }
}

fn workload(file: &str) -> ! {
    let len = 64 * MIB;
    // SAFETY: a private anonymous mapping owned by this process for its life.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    } as *mut u8;
    assert!(p as *mut libc::c_void != libc::MAP_FAILED, "mmap 64 MiB");
    // SAFETY: `p` points at `len` writable bytes mapped above.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
    for i in (0..len).step_by(4096) {
        mem[i] = 1;
    }
    let start = p as usize;
    std::fs::write(
        file,
        format!(
            "{} {} {} {}\n",
            start,
            start + len,
            start + 4 * MIB,
            std::process::id()
        ),
    )
    .unwrap();
    let mut x = 0u8;
    loop {
        for i in (0..4 * MIB).step_by(64) {
            mem[i] = mem[i].wrapping_add(x);
        }
        x = x.wrapping_add(1);
        std::hint::black_box(&mem[0]);
        // DAMON sees an access when the CPU sets a page's accessed bit again
        // after DAMON cleared it, which the CPU does on a page-table walk:
        // a TLB miss. A loop spinning alone on its CPU keeps its TLB entries
        // (qemu's soft TLB too), so its accesses can go unseen. Taking write
        // access away and back flushes the range from the TLB, as the
        // context switches and TLB pressure of a busy machine would.
        // SAFETY: the first 4 MiB of our own mapping; no reference to it is
        // used while it is read-only.
        unsafe {
            libc::mprotect(p.cast(), 4 * MIB, libc::PROT_READ);
            libc::mprotect(p.cast(), 4 * MIB, libc::PROT_READ | libc::PROT_WRITE);
        }
    }
}

/// How long a check waits for DAMON to show what it checks: the monitor
/// converges in a few aggregations, but a guest under TCG on a busy host
/// runs few instructions per second of its clock.
const DAMON_WAIT: Duration = Duration::from_secs(60);

/// The hot range of the workload `file` found in `segment`'s latest
/// aggregation (see [`hot_and_cold`]), tried again every half second until
/// it is or [`DAMON_WAIT`] passes: the measure and verdict of the last try.
fn damon(file: &str, segment: &str, name: &str) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        let (ok, measure, detail) = match hot_and_cold(file, segment) {
            Ok((ok, measure, detail)) => (ok, Some(measure), detail),
            Err(e) => (false, None, e),
        };
        if ok || t0.elapsed() >= DAMON_WAIT {
            if let Some(m) = measure {
                println!("PERFABI-MEASURE {name} {m}");
            }
            let waited = t0.elapsed().as_secs_f64();
            return verdict(name, ok, &format!("{detail} (after {waited:.1} s)"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Whether the latest aggregation of `segment` that covers the workload of
/// `file` finds its hot range well above the cold one, with its measure and
/// the verdict's detail; `Err` if there is no such aggregation.
fn hot_and_cold(file: &str, segment: &str) -> Result<(bool, String, String), String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let v: Vec<usize> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let [start, end, hot_end, _pid] = v[..] else {
        return Err("no workload address file".into());
    };
    let (start, end, hot_end) = (start as u64, end as u64, hot_end as u64);
    let mut seg = open_path(segment);
    let aggs = seg.damon().map_err(|e| e.to_string())?.aggregations;
    // The aggregation that covers the workload's range.
    let Some(a) = aggs
        .iter()
        .filter(|a| a.regions.iter().any(|r| r.start < end && r.end > start))
        .max_by_key(|a| a.aggregation)
    else {
        return Err(format!(
            "no aggregation covers the workload ({} aggregations)",
            aggs.len()
        ));
    };
    let overlap = |r: &perfabi_reader::Region, lo: u64, hi: u64| {
        r.end.min(hi).saturating_sub(r.start.max(lo))
    };
    // Frequency of the cold range: byte-weighted mean over it.
    let cold_bytes = (end - hot_end) as f64;
    let cold_mean: f64 = a
        .regions
        .iter()
        .map(|r| a.frequency(r) * overlap(r, hot_end, end) as f64)
        .sum::<f64>()
        / cold_bytes;
    // "Well above" the cold range's frequency.
    let threshold = (cold_mean * 2.0).max(cold_mean + 0.1);
    let hot_in_hot: u64 = a
        .regions
        .iter()
        .filter(|r| a.frequency(r) > threshold)
        .map(|r| overlap(r, start, hot_end))
        .sum();
    let cold_in_hot: u64 = a
        .regions
        .iter()
        .filter(|r| a.frequency(r) > threshold)
        .map(|r| overlap(r, hot_end, end))
        .sum();
    let hot_frac = hot_in_hot as f64 / (hot_end - start) as f64;
    let cold_frac = cold_in_hot as f64 / cold_bytes;
    let measure = format!("hot_fraction={hot_frac:.3} cold_fraction={cold_frac:.3} cold_mean_frequency={cold_mean:.3} aggregation={} regions={}", a.aggregation, a.regions.len());
    let detail = format!("hot {hot_frac:.3} >= 0.9, cold {cold_frac:.3} <= 0.1");
    Ok((hot_frac >= 0.9 && cold_frac <= 0.1, measure, detail))
}

/// The latest aggregation of each (monitor, target) in `path`.
fn latest(path: &str) -> Result<Vec<(u64, u64, Vec<perfabi_reader::Region>)>, String> {
    let mut seg = open_path(path);
    let aggs = seg
        .damon()
        .map_err(|e| format!("{path}: {e}"))?
        .aggregations;
    let mut out: Vec<_> = aggs
        .into_iter()
        .map(|a| (a.monitor_id, a.target_id, a.regions))
        .collect();
    out.sort_by_key(|(m, t, _)| (*m, *t));
    Ok(out)
}

/// `same-damon A B [NAME]`: both segments show the same latest
/// aggregation of each (monitor, target), reported as NAME (default
/// `exportd-same-as-kmod`).
fn same_damon(a: &str, b: &str, name: &str) -> bool {
    // The two writers publish each aggregation at slightly different
    // moments: try for some aggregation intervals, by time (a guest on a
    // busy host may publish few in a second).
    let mut last = String::new();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < DAMON_WAIT {
        match (latest(a), latest(b)) {
            (Ok(x), Ok(y)) if !x.is_empty() && x == y => {
                let regions: usize = x.iter().map(|(_, _, r)| r.len()).sum();
                return verdict(
                    name,
                    true,
                    &format!("{} aggregation(s), {regions} regions, identical", x.len()),
                );
            }
            (x, y) => last = format!("{x:?} vs {y:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last.truncate(600);
    verdict(name, false, &last)
}

fn cost() -> bool {
    let mut seg = open();
    let get = |seg: &mut Segment, n: &str| seg.counter(n).map(|c| c.total as i64).unwrap_or(-1);
    let a = get(&mut seg, "selftest.adjust_ps");
    let p = get(&mut seg, "selftest.this_cpu_ps");
    let am = get(&mut seg, "selftest.adjust_mem_ps");
    let pm = get(&mut seg, "selftest.this_cpu_mem_ps");
    let pns = get(&mut seg, "selftest.damon_probe_ns");
    let pev = get(&mut seg, "selftest.damon_probe_events");
    let ratio = |x: i64, y: i64| x as f64 / y.max(1) as f64;
    println!(
        "PERFABI-MEASURE adjust_ps={a} this_cpu_add_ps={p} ratio={:.2} (target <= 2; plain this_cpu_add on the same counter, handles in registers)",
        ratio(a, p)
    );
    println!(
        "PERFABI-MEASURE adjust_mem_ps={am} this_cpu_add_mem_ps={pm} ratio={:.2} (each handle loaded from memory at every call)",
        ratio(am, pm)
    );
    if pev > 0 {
        println!(
            "PERFABI-MEASURE damon_probe ns_per_region={:.0} events={pev}",
            pns as f64 / pev as f64
        );
    }
    // The family hot path (ABI 1.1): selftest.cost, by op, against a plain
    // this_cpu_add() on a member's own word in the same loops.
    let costs = seg
        .snapshot()
        .map(|s| {
            s.family("selftest.cost").map(|f| {
                f.members
                    .iter()
                    .map(|m| match s.reading(f, m) {
                        Reading::Unsigned(v) => (m.instance.clone(), v as i64),
                        _ => (m.instance.clone(), -1),
                    })
                    .collect::<Vec<_>>()
            })
        })
        .ok()
        .flatten()
        .unwrap_or_default();
    let ps = |op: &str| costs.iter().find(|(o, _)| o == op).map_or(-1, |(_, v)| *v);
    let base = ps("this_cpu_add");
    for op in [
        "member_add",
        "observe_log2",
        "observe_explicit",
        "peak_fast",
        "peak_new",
    ] {
        println!(
            "PERFABI-MEASURE {op}_ps={} this_cpu_add_ps={base} ratio={:.2} ({op}/this_cpu_add, target <= 2; same loop, handles in registers)",
            ps(op),
            ratio(ps(op), base)
        );
    }
    let families_ok = costs.len() == 6 && costs.iter().all(|(_, v)| *v > 0);
    verdict(
        "cost-measured",
        a > 0 && p > 0 && am > 0 && pm > 0 && families_ok,
        if families_ok {
            ""
        } else {
            "(selftest.cost incomplete)"
        },
    )
}

/// The header of /dev/perfabi equals `Geometry::header` (with the family
/// header fields, `Sizes::families`, for ABI 1.1) for its geometry and
/// writer identity, but for the fields that change as it runs (the
/// generations, the instances, families and members used, the flags,
/// which must be FLAG_KERNEL).
fn canonical(name: &str) -> bool {
    type Pair<T> = (T, T);
    type Headers = (
        Pair<perfabi::layout::Header>,
        Pair<perfabi::layout::FamilyHeader>,
    );
    let read = || -> Result<Headers, String> {
        let f = std::fs::File::open(DEV).map_err(|e| e.to_string())?;
        let md = f.metadata().map_err(|e| e.to_string())?;
        let m = perfabi_shm::SegmentMap::new(f, &md, perfabi::trust::Origin::KernelDevice, 1 << 30)
            .map_err(|e| format!("{e:?}"))?;
        let h = m.header().map_err(|e| e.to_string())?;
        let fh = m.family_header().map_err(|e| e.to_string())?;
        let g = perfabi::Geometry {
            page_size: h.page_size,
            nr_cpus: h.nr_cpus,
            max_instances: h.max_instances,
            damon_capacity: h.damon_capacity,
            max_families: fh.max_families,
            max_members: fh.max_members,
        };
        let mut want = g
            .header(&perfabi::WriterIdentity {
                epoch: h.epoch,
                pid: h.writer_pid,
                start_ns: h.writer_start_ns,
                heartbeat_interval_ns: h.heartbeat_interval_ns,
                first_heartbeat_ns: h.heartbeat_ns,
            })
            .map_err(|e| e.to_string())?;
        want.gen1 = h.gen1;
        want.gen2 = h.gen2;
        want.instances_used = h.instances_used;
        want.flags = perfabi::layout::FLAG_KERNEL;
        let mut fwant = g.sizes().map_err(|e| e.to_string())?.families;
        fwant.families_used = fh.families_used;
        fwant.members_used = fh.members_used;
        Ok(((h, want), (fh, fwant)))
    };
    match read() {
        Ok(((h, want), (fh, fwant))) => {
            let same = bytemuck::bytes_of(&h) == bytemuck::bytes_of(&want)
                && bytemuck::bytes_of(&fh) == bytemuck::bytes_of(&fwant);
            verdict(
                name,
                same,
                &format!(
                    "ABI {}.{}, {} CPUs, {} instances, {} DAMON slots, {} families, {} members, {} bytes{}",
                    h.abi_major,
                    h.abi_minor,
                    h.nr_cpus,
                    h.max_instances,
                    h.damon_capacity,
                    fh.max_families,
                    fh.max_members,
                    h.segment_size,
                    if same {
                        String::new()
                    } else {
                        format!(": module {h:?} {fh:?}, Rust {want:?} {fwant:?}")
                    }
                ),
            )
        }
        Err(e) => verdict(name, false, &e),
    }
}

/// What the self-test module observed into `selftest.lat_log2` and
/// `selftest.size_explicit` (its `lat_read`, `lat_write`, `size_obs`).
const LAT_READ: [u64; 15] = [
    0,
    1,
    7,
    8,
    9,
    16,
    17,
    100,
    512,
    513,
    1000,
    1024,
    1025,
    1 << 40,
    u64::MAX,
];
const LAT_WRITE: [u64; 3] = [3, 300, 300];
const SIZE_OBS: [u64; 11] = [5, 10, 11, 100, 101, 999, 1000, 1001, 10000, 10001, 1 << 63];
const STRESS: &str = "/sys/module/perfabi_selftest/parameters/stress_ms";

/// The histogram the Rust reader's bucket rule (`Buckets::index`) makes of
/// `values`: what the module's C bucket code must have stored.
fn expected_histogram(b: &Buckets, values: &[u64]) -> perfabi::Histogram {
    let mut h = perfabi::Histogram {
        count: values.len() as u64,
        sum: values.iter().fold(0u64, |a, &v| a.wrapping_add(v)),
        buckets: vec![0; b.count()],
    };
    for &v in values {
        h.buckets[b.index(v)] += 1;
    }
    h
}

/// Every CPU's copy of every histogram member in `snap` has count == the
/// sum of its buckets (one observation is one multi-word update). Returns
/// the copies checked, or the first that is not.
fn histograms_consistent(snap: &Snapshot) -> Result<usize, String> {
    let mut copies = 0;
    for f in snap.families.iter().filter(|f| f.kind == Kind::Histogram) {
        for m in &f.members {
            for cpu in 0..snap.nr_cpus {
                match snap.reading_on(cpu, f, m) {
                    Reading::Histogram(h) if h.consistent() => copies += 1,
                    r => {
                        return Err(format!(
                            "{} [{}] on CPU {cpu}: {r:?} (generation {})",
                            f.name, m.instance, snap.generation
                        ))
                    }
                }
            }
        }
    }
    Ok(copies)
}

/// Checks the final state of the self-test module's families (see the
/// top of `kmod/perfabi_selftest.c`); every problem found is listed.
fn check_families(snap: &Snapshot) -> Vec<String> {
    let mut bad = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            bad.push(what);
        }
    };
    let fam = |name: &str| snap.family(name);
    let total = |f: &Family, inst: &str| f.member(inst).map(|m| snap.reading(f, m));
    let kind_unit = |f: &Family, kind: Kind, unit: Unit, dim: &str| {
        f.kind == kind && f.unit == unit && f.dimension == dim
    };

    // A counter by device: instances added, deleted, and one added again.
    match fam("selftest.disk_ops") {
        None => expect(false, "no family selftest.disk_ops".into()),
        Some(f) => {
            expect(
                kind_unit(f, Kind::Counter, Unit::COUNT, "device")
                    && f.help == "Operations per device (self-test)",
                format!(
                    "disk_ops: {:?} {:?} {:?} {:?}",
                    f.kind, f.unit, f.dimension, f.help
                ),
            );
            let mut names: Vec<&str> = f.members.iter().map(|m| m.instance.as_str()).collect();
            names.sort_unstable();
            expect(
                names == ["sda", "sdb", "sdd"],
                format!("disk_ops instances {names:?}, want sda sdb sdd (sdc deleted)"),
            );
            let id = |i: &str| f.member(i).map(|m| (m.instance_id, m.reg_id));
            let (sda, sdb, sdd) = (id("sda"), id("sdb"), id("sdd"));
            expect(
                matches!((sda, sdb, sdd), (Some((0, _)), Some((1, b)), Some((3, d))) if b > d),
                format!(
                    "disk_ops (instance number, reg_id): sda {sda:?} sdb {sdb:?} sdd {sdd:?}; \
                     want 0, 1 (kept, a reg_id newer than sdd's), 3"
                ),
            );
            let labels = |i: &str| f.member(i).map(|m| m.labels.clone()).unwrap_or_default();
            let kv = |v: &[(&str, &str)]| -> Vec<(String, String)> {
                v.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            };
            expect(
                labels("sda") == kv(&[("model", "virtio disk"), ("bus", "pci")])
                    && labels("sdb") == kv(&[("rack", "r1")])
                    && labels("sdd").is_empty(),
                format!(
                    "disk_ops labels: sda {:?} sdb {:?} sdd {:?}",
                    labels("sda"),
                    labels("sdb"),
                    labels("sdd")
                ),
            );
            let v = |i: &str| total(f, i);
            expect(
                v("sda") == Some(Reading::Unsigned(5))
                    && v("sdb") == Some(Reading::Unsigned(17))
                    && v("sdd") == Some(Reading::Unsigned(13)),
                format!(
                    "disk_ops values: sda {:?} sdb {:?} sdd {:?}, want 5 17 (from 0 again) 13",
                    v("sda"),
                    v("sdb"),
                    v("sdd")
                ),
            );
        }
    }
    // A signed gauge of one instance.
    match fam("selftest.queue_depth") {
        Some(f) => expect(
            kind_unit(f, Kind::Gauge, Unit::NONE, "")
                && f.value_type == ValueType::I64
                && f.members.len() == 1
                && total(f, "") == Some(Reading::Signed(-5)),
            format!(
                "queue_depth: {:?} {:?} {} members, value {:?}, want gauge i64 -5",
                f.kind,
                f.value_type,
                f.members.len(),
                total(f, "")
            ),
        ),
        None => expect(false, "no family selftest.queue_depth".into()),
    }
    // Histograms: the buckets the module's C code chose are Rust's.
    for (name, unit, dim, buckets, members) in [
        (
            "selftest.lat_log2",
            Unit::NS,
            "op",
            Buckets::Log2 { first: 3, n: 8 },
            vec![("read", &LAT_READ[..]), ("write", &LAT_WRITE[..])],
        ),
        (
            "selftest.size_explicit",
            Unit::BYTES,
            "",
            Buckets::Explicit(vec![10, 100, 1000, 10000]),
            vec![("", &SIZE_OBS[..])],
        ),
    ] {
        let Some(f) = fam(name) else {
            expect(false, format!("no family {name}"));
            continue;
        };
        expect(
            kind_unit(f, Kind::Histogram, unit, dim)
                && f.buckets.as_ref() == Some(&buckets)
                && f.members.len() == members.len(),
            format!(
                "{name}: {:?} {:?} {:?} {} members",
                f.kind,
                f.unit,
                f.buckets,
                f.members.len()
            ),
        );
        for (inst, values) in members {
            let want = Reading::Histogram(expected_histogram(&buckets, values));
            let got = total(f, inst);
            expect(
                got.as_ref() == Some(&want),
                format!("{name} [{inst}]: {got:?}, want {want:?}"),
            );
        }
    }
    // A peak: the maximum over CPUs, after a reset.
    match fam("selftest.max_latency") {
        Some(f) => match f.member("q0") {
            Some(m) => {
                let per_cpu: Vec<u64> = (0..snap.nr_cpus)
                    .map(|c| match snap.reading_on(c, f, m) {
                        Reading::Unsigned(v) => v,
                        _ => u64::MAX,
                    })
                    .collect();
                let max = per_cpu.iter().copied().max().unwrap_or(0);
                expect(
                    kind_unit(f, Kind::Peak, Unit::US, "queue")
                        && max > 0
                        && per_cpu
                            .iter()
                            .enumerate()
                            .all(|(c, &v)| v == 0 || v == 100 * (c as u64 + 1))
                        && snap.reading(f, m) == Reading::Unsigned(max),
                    format!(
                        "max_latency q0: per CPU {per_cpu:?}, total {:?}; want 100 * (cpu + 1) \
                         or 0 (reset from 1000000), total the maximum",
                        snap.reading(f, m)
                    ),
                );
            }
            None => expect(false, "max_latency has no q0".into()),
        },
        None => expect(false, "no family selftest.max_latency".into()),
    }
    // Deleted: a family with its instances; the fill-ups of the bad-input test.
    for f in &snap.families {
        expect(
            f.name != "selftest.gone" && !f.name.starts_with("selftest.fill"),
            format!("deleted family {} still there", f.name),
        );
    }
    // The nesting stress: no observation lost, from the thread or the IRQ.
    if let Some(f) = fam("selftest.nest") {
        for (inst, calls) in [
            ("thread", "selftest.nest_thread_calls"),
            ("irq", "selftest.nest_irq_calls"),
        ] {
            let n = snap.find(calls).map(|i| snap.total(i));
            let count = match total(f, inst) {
                Some(Reading::Histogram(h)) => Some(h.count),
                _ => None,
            };
            expect(
                n.is_some_and(|n| n > 0) && count == n,
                format!("nest [{inst}]: count {count:?}, calls {n:?}"),
            );
        }
    } else {
        expect(false, "no family selftest.nest".into());
    }
    // 1.0 entries read as families of one instance, next to the families.
    expect(
        snap.family("selftest.hot_path")
            .is_some_and(|f| f.kind == Kind::Counter && f.members.len() == 1),
        "the 1.0 entry selftest.hot_path is not a family of one counter".into(),
    );
    bad
}

/// The self-test module's families, read with the Rust reader: first in a
/// loop while its nesting stress runs (a thread and a hard IRQ timer
/// observing at once), every snapshot decoding and every CPU's copy of
/// every histogram consistent; then, the stress over, every value.
fn families() -> bool {
    let mut seg = open();
    if let Err(e) = std::fs::write(STRESS, "2000") {
        return verdict("families-consistent", false, &format!("{STRESS}: {e}"));
    }
    let t0 = std::time::Instant::now();
    let (mut snaps, mut copies, mut moved) = (0usize, 0usize, 0u64);
    let mut first_count = None;
    let mut problem = None;
    while t0.elapsed() < Duration::from_secs(10) {
        let busy = std::fs::read_to_string(STRESS).is_ok_and(|v| v.trim() != "0");
        match seg.snapshot() {
            Ok(snap) => {
                snaps += 1;
                match histograms_consistent(&snap) {
                    Ok(n) => copies += n,
                    Err(e) => {
                        problem = Some(e);
                        break;
                    }
                }
                let count = snap.family("selftest.nest").and_then(|f| {
                    f.member("thread").map(|m| match snap.reading(f, m) {
                        Reading::Histogram(h) => h.count,
                        _ => 0,
                    })
                });
                if let (Some(c), Some(first)) = (count, *first_count.get_or_insert(count)) {
                    moved = c.saturating_sub(first);
                }
            }
            Err(e) => {
                problem = Some(format!("snapshot: {e}"));
                break;
            }
        }
        if !busy && snaps > 10 {
            break;
        }
    }
    let consistent = verdict(
        "families-consistent",
        problem.is_none() && moved > 0,
        &format!(
            "({snaps} snapshots during the stress, {copies} per-CPU histogram copies with \
             count == sum(buckets), thread observations seen {moved}){}",
            problem
                .as_deref()
                .map(|p| format!(": {p}"))
                .unwrap_or_default()
        ),
    );
    // The stress is over: the thread wrote its call count; let the timer's
    // last tick finish.
    std::thread::sleep(Duration::from_millis(100));
    let snap = match seg.snapshot() {
        Ok(s) => s,
        Err(e) => {
            verdict("families-reader", false, &format!("snapshot: {e}"));
            return false;
        }
    };
    let mut bad = check_families(&snap);
    if let Err(e) = histograms_consistent(&snap) {
        bad.push(e);
    }
    let families = snap
        .families
        .iter()
        .filter(|f| matches!(f.origin, perfabi::family::Origin::Family(_)))
        .count();
    let members: usize = snap
        .families
        .iter()
        .filter(|f| matches!(f.origin, perfabi::family::Origin::Family(_)))
        .map(|f| f.members.len())
        .sum();
    let reader = verdict(
        "families-reader",
        bad.is_empty(),
        &format!(
            "({families} families, {members} instances, {} 1.0 entries, generation {}){}",
            snap.instances.len(),
            snap.generation,
            if bad.is_empty() {
                String::new()
            } else {
                format!(": {}", bad.join("; "))
            }
        ),
    );
    consistent && reader
}

/// The families perfabi_sources.ko publishes: the definition's
/// (`perfabi_families::table`, from which the module's descriptors are
/// generated and against which README.md's table is checked).
fn sources_defined() -> impl Iterator<Item = &'static perfabi_families::Family> {
    perfabi_families::table::published_by(perfabi_families::Writer::Module)
}

/// The names of the definition's families of `group`, in table order.
fn group_names(group: perfabi_families::Group) -> Vec<&'static str> {
    sources_defined()
        .filter(|f| f.group == group)
        .map(|f| f.name)
        .collect()
}

/// The family's total over its instances: counters' values, histograms'
/// counts.
fn family_total(snap: &Snapshot, name: &str) -> Option<u64> {
    let f = snap.family(name)?;
    Some(
        f.members
            .iter()
            .map(|m| match snap.reading(f, m) {
                Reading::Unsigned(v) => v,
                Reading::Histogram(h) => h.count,
                Reading::Signed(v) => v as u64,
            })
            .sum(),
    )
}

fn member_value(snap: &Snapshot, family: &str, inst: &str) -> Option<u64> {
    let f = snap.family(family)?;
    match snap.reading(f, f.member(inst)?) {
        Reading::Unsigned(v) => Some(v),
        Reading::Histogram(h) => Some(h.count),
        Reading::Signed(v) => Some(v as u64),
    }
}

fn sources() -> bool {
    let mut seg = open();
    let snap = match seg.snapshot() {
        Ok(s) => s,
        Err(e) => return verdict("sources-families", false, &format!("snapshot: {e}")),
    };
    let mut bad = perfabi_families::readme::check(&perfabi_families::readme::rows());
    let mut defined = 0;
    for d in sources_defined() {
        defined += 1;
        match snap.family(d.name) {
            None => bad.push(format!("{} missing", d.name)),
            Some(f) => {
                if !d.describes(f) {
                    bad.push(format!(
                        "{}: {:?} {:?} {:?} {:?} {:?}",
                        d.name, f.kind, f.unit_text, f.dimension, f.help, f.buckets
                    ));
                }
            }
        }
    }
    let names = |fam: &str| -> Vec<String> {
        snap.family(fam)
            .map(|f| f.members.iter().map(|m| m.instance.clone()).collect())
            .unwrap_or_default()
    };
    let irqs = names("kernel.interrupts.count");
    let ok = verdict(
        "sources-families",
        bad.is_empty(),
        &format!(
            "({defined} families, as defined in kmod/families and README's table; disks {:?}; interfaces {:?}; irqs {:?}){}",
            names("disk.dev.read"),
            names("network.interface.in.packets"),
            irqs,
            if bad.is_empty() {
                String::new()
            } else {
                format!(": {}", bad.join("; "))
            }
        ),
    );
    let lo = group_names(perfabi_families::Group::Net)
        .iter()
        .all(|f| snap.family(f).is_some_and(|f| f.member("lo").is_some()));
    let lo_ok = verdict(
        "sources-lo-instance",
        lo,
        "(lo in every network.interface family)",
    );
    let irq_names_ok = verdict(
        "sources-irq-names",
        !irqs.is_empty()
            && irqs.iter().all(|i| {
                i.split_once(':').is_some_and(|(n, a)| {
                    n.parse::<u32>().is_ok() && !a.is_empty() && i.len() <= 63
                })
            }),
        &format!("({} IRQs named N:actions)", irqs.len()),
    );
    // Moving counters: the console's own output raises serial interrupts;
    // sleeping switches tasks.
    let t0 = std::time::Instant::now();
    let first = (
        family_total(&snap, "kernel.all.pswitch"),
        family_total(&snap, "kernel.interrupts.count"),
        family_total(&snap, "kernel.interrupts.handler_time"),
        family_total(&snap, "kernel.sched.wakeups"),
        family_total(&snap, "kernel.sched.wakeup_latency"),
    );
    let mut last = first;
    while t0.elapsed() < Duration::from_secs(5) {
        println!("sources: waiting for counters to move ({:?})", t0.elapsed());
        std::thread::sleep(Duration::from_millis(200));
        if let Ok(s) = seg.snapshot() {
            last = (
                family_total(&s, "kernel.all.pswitch"),
                family_total(&s, "kernel.interrupts.count"),
                family_total(&s, "kernel.interrupts.handler_time"),
                family_total(&s, "kernel.sched.wakeups"),
                family_total(&s, "kernel.sched.wakeup_latency"),
            );
            if last.0 > first.0 && last.1 > first.1 && last.2 > first.2 && last.4 > first.4 {
                break;
            }
        }
    }
    let pswitch = verdict(
        "sources-pswitch-moves",
        last.0 > first.0 && last.3 > first.3 && last.4 > first.4,
        &format!(
            "(pswitch {:?} -> {:?}, wakeups {:?} -> {:?}, wakeup_latency count {:?} -> {:?})",
            first.0, last.0, first.3, last.3, first.4, last.4
        ),
    );
    let irq = verdict(
        "sources-interrupts-move",
        last.1 > first.1 && last.2 > first.2,
        &format!(
            "(count {:?} -> {:?}, handler_time count {:?} -> {:?})",
            first.1, last.1, first.2, last.2
        ),
    );
    let consistent = match seg.snapshot() {
        Ok(s) => match histograms_consistent(&s) {
            Ok(n) => verdict(
                "sources-histograms-consistent",
                true,
                &format!("({n} per-CPU copies)"),
            ),
            Err(e) => verdict("sources-histograms-consistent", false, &e),
        },
        Err(e) => verdict("sources-histograms-consistent", false, &e.to_string()),
    };
    ok && lo_ok && irq_names_ok && pswitch && irq && consistent
}

/// `lo`'s receive and transmit packets and bytes in /proc/net/dev.
fn proc_net_dev_lo() -> Option<[u64; 4]> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("lo:"))?;
    let v: Vec<u64> = line
        .split_once(':')?
        .1
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // rx: bytes packets ... (8 fields), then tx: bytes packets ...
    Some([*v.get(1)?, *v.first()?, *v.get(9)?, *v.get(8)?])
}

fn sources_lo() -> bool {
    let mut seg = open();
    let mut last = String::new();
    // Equal once no packet is in flight: a few tries.
    for _ in 0..10 {
        let proc_ = proc_net_dev_lo();
        let snap = match seg.snapshot() {
            Ok(s) => s,
            Err(e) => return verdict("sources-lo-proc", false, &format!("snapshot: {e}")),
        };
        let ours: Option<Vec<u64>> = group_names(perfabi_families::Group::Net)
            .iter()
            .map(|f| member_value(&snap, f, "lo"))
            .collect();
        if let (Some(p), Some(o)) = (proc_, &ours) {
            if p[..] == o[..] && p[0] > 0 && p[2] > 0 {
                return verdict(
                    "sources-lo-proc",
                    true,
                    &format!("(lo in packets, bytes, out packets, bytes: {o:?}, as /proc/net/dev)"),
                );
            }
        }
        last = format!("perfabi {ours:?} vs /proc/net/dev {proc_:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    verdict("sources-lo-proc", false, &format!("({last})"))
}

fn sources_absent(name: &str) -> bool {
    let mut seg = open();
    match seg.snapshot() {
        Ok(s) => {
            let left: Vec<&str> = sources_defined()
                .map(|f| f.name)
                .chain(["perfabi_sources.dropped"])
                .filter(|n| s.family(n).is_some())
                .collect();
            verdict(name, left.is_empty(), &format!("(families left: {left:?})"))
        }
        Err(e) => verdict(name, false, &format!("snapshot: {e}")),
    }
}

/// NAME's /proc/diskstats fields 4, 8, 15, 19 (reads, writes, discards,
/// flushes completed) and 6, 10, 17 (sectors read, written, discarded) × 512.
fn proc_diskstats(name: &str) -> Option<[u64; 7]> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    let f: Vec<u64> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.get(2) == Some(&name))?
        .iter()
        .skip(3)
        .map(|w| w.parse().unwrap_or(0))
        .collect();
    // f[0] is field 4.
    let at = |field: usize| f.get(field - 4).copied().unwrap_or(0);
    Some([
        at(4),
        at(8),
        at(15),
        at(19),
        at(6) * 512,
        at(10) * 512,
        at(17) * 512,
    ])
}

/// The disk's 8 values in perfabi (counts, bytes, the latency count).
fn disk_values(seg: &mut Segment, name: &str) -> Result<Vec<Option<u64>>, String> {
    let snap = seg.snapshot().map_err(|e| format!("snapshot: {e}"))?;
    Ok(group_names(perfabi_families::Group::Block)
        .iter()
        .map(|f| member_value(&snap, f, name))
        .collect())
}

/// Reads 4 MiB of /dev/NAME and writes 1 MiB to it, synced.
fn disk_workload(name: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let path = format!("/dev/{name}");
    let mut buf = vec![0u8; 64 << 10];
    let mut f = std::fs::File::open(&path)?;
    for _ in 0..64 {
        f.read_exact(&mut buf)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).open(&path)?;
    buf.fill(0);
    for _ in 0..16 {
        f.write_all(&buf)?;
    }
    f.sync_all()
}

/// `sources-disk NAME present|absent|proc` (the module's segment) and
/// `bpf-disk PIN NAME present|absent|proc` (the eBPF writer's), reported as
/// `{prefix}-{what}`: the disk's instances in `segment` are all there, or
/// all gone, within 1.5 s; or (proc) a workload's increments of its counts
/// equal /proc/diskstats' and every request completed has a latency.
/// Increments, not totals: a kernel writer counts a disk from the scan
/// that finds it (I/O before, such as the partition scan of a new disk,
/// is not in its instance).
/// How long a disk's instances may take to appear or go, and its counts
/// to settle.
const DISK_WITHIN: Duration = Duration::from_millis(1500);

fn sources_disk(segment: &str, prefix: &str, name: &str, what: &str) -> bool {
    let mut seg = open_path(segment);
    let check = format!("{prefix}-{what}");
    if what == "proc" {
        let (o0, p0) = match (disk_values(&mut seg, name), proc_diskstats(name)) {
            (Ok(o), Some(p)) if o.iter().all(Option::is_some) => (o, p),
            (o, p) => return verdict(&check, false, &format!("(before: {o:?} {p:?})")),
        };
        if let Err(e) = disk_workload(name) {
            return verdict(&check, false, &format!("(workload on /dev/{name}: {e})"));
        }
        let mut last = String::new();
        // The workload's requests have all completed: both sides settle.
        let settled = Deadline::after(DISK_WITHIN);
        while !settled.passed() {
            if let (Ok(o), Some(p)) = (disk_values(&mut seg, name), proc_diskstats(name)) {
                let d_o: Vec<u64> = o
                    .iter()
                    .zip(&o0)
                    .map(|(a, b)| a.unwrap_or(0).wrapping_sub(b.unwrap_or(0)))
                    .collect();
                let d_p: Vec<u64> = p.iter().zip(&p0).map(|(a, b)| a - b).collect();
                last = format!(
                    "increments of read write discard flush read_bytes write_bytes \
                     discard_bytes latency_count: perfabi {d_o:?}, /proc/diskstats {d_p:?}"
                );
                if d_p[..] == d_o[..7]
                    && d_p[0] > 0
                    && d_p[1] > 0
                    && d_o[7] == d_o[..4].iter().sum::<u64>()
                {
                    return verdict(&check, true, &format!("({last})"));
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        return verdict(&check, false, &format!("({last})"));
    }
    let mut last = Vec::new();
    let within = Deadline::after(DISK_WITHIN);
    while !within.passed() {
        match disk_values(&mut seg, name) {
            Ok(v) => {
                let ok = if what == "present" {
                    v.iter().all(Option::is_some)
                } else {
                    v.iter().all(Option::is_none)
                };
                if ok {
                    return verdict(&check, true, &format!("({name}: {v:?})"));
                }
                last = v;
            }
            Err(e) => return verdict(&check, false, &e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    verdict(&check, false, &format!("({name}: {last:?})"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ok = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["readonly"] => readonly(),
        ["rising", name] => rising(name),
        ["workload", file] => workload(file),
        ["damon", file] => damon(file, DEV, "damon-hot-cold"),
        ["damon", file, segment, name] => damon(file, segment, name),
        ["same-damon", a, b] => same_damon(a, b, "exportd-same-as-kmod"),
        ["same-damon", a, b, name] => same_damon(a, b, name),
        ["cost"] => cost(),
        ["canonical"] => canonical("canonical-header"),
        ["canonical", name] => canonical(name),
        ["families"] => families(),
        ["sources"] => sources(),
        ["sources-lo"] => sources_lo(),
        ["sources-absent", name] => sources_absent(name),
        ["sources-disk", name, what] => sources_disk(DEV, "sources-disk", name, what),
        ["bpf-disk", pin, name, what] => sources_disk(pin, "bpf-disk", name, what),
        ["hotplug", modules] => hotplug::hotplug(DEV, "sources-hotplug", modules),
        ["bpf-hotplug", pin, modules] => hotplug::hotplug(pin, "bpf-hotplug", modules),
        ["devices", exported, disk, tx, rx] => {
            devices::devices(DEV, "sources-equal-proc", exported, disk, tx, rx)
        }
        ["bpf-devices", pin, exported, disk, tx, rx] => {
            devices::devices(pin, "bpf-equal-proc", exported, disk, tx, rx)
        }
        ["read-cost"] => devices::read_cost(),
        ["bpf-pin", pin] => bpf::pin(pin),
        ["bpf-pswitch", pin] => bpf::pswitch(pin),
        ["bpf-histogram", folder, how @ ("auto" | "raw-tp")] => bpf::histogram(folder, how),
        ["bpf-nonroot", pin, disk] => bpf::nonroot(pin, disk),
        ["bpf-stale", pin] => bpf::stale(pin),
        ["bpf-closed", pin] => bpf::closed(pin),
        ["bpf-cpu", pin] => bpf::cpu(pin),
        ["bpf-cost"] => bpf::cost(),
        ["bpf-damon-ring", pin, want @ ("present" | "absent")] => bpf::damon_ring(pin, want),
        _ => {
            eprintln!("usage: perfabi-guest-check readonly | rising NAME | workload FILE | damon FILE [SEGMENT NAME] | same-damon SEG SEG [NAME] | cost | canonical [NAME] | families | sources | sources-lo | sources-absent NAME | sources-disk NAME present|absent|proc | hotplug MODULES | bpf-hotplug PIN MODULES | bpf-disk PIN NAME present|absent|proc | devices SEGMENT DISK TX_MAC RX_MAC | bpf-devices PIN SEGMENT DISK TX_MAC RX_MAC | read-cost | bpf-pin PIN | bpf-pswitch PIN | bpf-histogram FOLDER auto|raw-tp | bpf-nonroot PIN DISK | bpf-stale PIN | bpf-closed PIN | bpf-cpu PIN | bpf-cost | bpf-damon-ring PIN present|absent");
            std::process::exit(2)
        }
    };
    std::process::exit(if ok { 0 } else { 1 });
}
