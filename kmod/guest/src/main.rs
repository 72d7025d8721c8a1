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
//! * `same-damon SEGMENT_A SEGMENT_B`: both segments show the same latest
//!   aggregation of the same kdamond (the module's probe and the
//!   exporter's tracepoint source saw the same events);
//! * `cost`: prints the self-test module's cost measurements;
//! * `canonical`: the module's header is the one the Rust core lays out
//!   for the same geometry and identity (`Geometry::header`): the C layout
//!   code of `spec/perfabi.h`, as the module runs it, equals Rust's.

use std::time::Duration;

use perfabi_reader::{Options, Segment};

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

fn damon(file: &str, segment: &str, name: &str) -> bool {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let v: Vec<usize> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let [start, end, hot_end, _pid] = v[..] else {
        return verdict(name, false, "no workload address file");
    };
    let (start, end, hot_end) = (start as u64, end as u64, hot_end as u64);
    let mut seg = open_path(segment);
    let aggs = match seg.damon().map(|d| d.aggregations) {
        Ok(a) => a,
        Err(e) => return verdict(name, false, &e.to_string()),
    };
    // The aggregation that covers the workload's range.
    let Some(a) = aggs
        .iter()
        .filter(|a| a.regions.iter().any(|r| r.start < end && r.end > start))
        .max_by_key(|a| a.aggregation)
    else {
        return verdict(
            name,
            false,
            &format!(
                "no aggregation covers the workload ({} aggregations)",
                aggs.len()
            ),
        );
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
    println!("PERFABI-MEASURE {name} hot_fraction={hot_frac:.3} cold_fraction={cold_frac:.3} cold_mean_frequency={cold_mean:.3} aggregation={} regions={}", a.aggregation, a.regions.len());
    verdict(
        name,
        hot_frac >= 0.9 && cold_frac <= 0.1,
        &format!("hot {hot_frac:.3} >= 0.9, cold {cold_frac:.3} <= 0.1"),
    )
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

fn same_damon(a: &str, b: &str) -> bool {
    // The two writers publish each aggregation at slightly different
    // moments: try for a few aggregation intervals.
    let mut last = String::new();
    for _ in 0..100 {
        match (latest(a), latest(b)) {
            (Ok(x), Ok(y)) if !x.is_empty() && x == y => {
                let regions: usize = x.iter().map(|(_, _, r)| r.len()).sum();
                return verdict(
                    "exportd-same-as-kmod",
                    true,
                    &format!("{} aggregation(s), {regions} regions, identical", x.len()),
                );
            }
            (x, y) => last = format!("{x:?} vs {y:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last.truncate(600);
    verdict("exportd-same-as-kmod", false, &last)
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
    verdict("cost-measured", a > 0 && p > 0 && am > 0 && pm > 0, "")
}

/// The header of /dev/perfabi equals `Geometry::header` for its geometry
/// and writer identity, but for the fields that change as it runs (the
/// generations, the instances used, the flags, which must be FLAG_KERNEL).
fn canonical() -> bool {
    let read = || -> Result<(perfabi::layout::Header, perfabi::layout::Header), String> {
        let f = std::fs::File::open(DEV).map_err(|e| e.to_string())?;
        let md = f.metadata().map_err(|e| e.to_string())?;
        let m = perfabi_shm::SegmentMap::new(f, &md, perfabi::trust::Origin::KernelDevice, 1 << 30)
            .map_err(|e| format!("{e:?}"))?;
        let h = m.header().map_err(|e| e.to_string())?;
        let g = perfabi::Geometry {
            page_size: h.page_size,
            nr_cpus: h.nr_cpus,
            max_instances: h.max_instances,
            damon_capacity: h.damon_capacity,
            max_families: 0,
            max_members: 0,
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
        Ok((h, want))
    };
    match read() {
        Ok((h, want)) => verdict(
            "canonical-header",
            bytemuck::bytes_of(&h) == bytemuck::bytes_of(&want),
            &format!(
                "{} CPUs, {} instances, {} DAMON slots, {} bytes{}",
                h.nr_cpus,
                h.max_instances,
                h.damon_capacity,
                h.segment_size,
                if bytemuck::bytes_of(&h) == bytemuck::bytes_of(&want) {
                    String::new()
                } else {
                    format!(": module {h:?}, Rust {want:?}")
                }
            ),
        ),
        Err(e) => verdict("canonical-header", false, &e),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ok = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["readonly"] => readonly(),
        ["rising", name] => rising(name),
        ["workload", file] => workload(file),
        ["damon", file] => damon(file, DEV, "damon-hot-cold"),
        ["damon", file, segment, name] => damon(file, segment, name),
        ["same-damon", a, b] => same_damon(a, b),
        ["cost"] => cost(),
        ["canonical"] => canonical(),
        _ => {
            eprintln!("usage: perfabi-guest-check readonly | rising NAME | workload FILE | damon FILE [SEGMENT NAME] | same-damon SEG SEG | cost | canonical");
            std::process::exit(2)
        }
    };
    std::process::exit(if ok { 0 } else { 1 });
}
