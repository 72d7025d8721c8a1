//! The userspace writer: concurrency, both update methods, bad input.
#![cfg(not(loom))]

use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::layout::FLAG_CLOSED;
use perfabi::{Error, Semantics, ValueType};
use perfabi_shm::writer::{Config, Counter, Method, MethodChoice, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::hammer::Hammer;

fn small(method: MethodChoice) -> Config {
    Config {
        max_instances: 16,
        damon_capacity: 64,
        method,
        ..Config::default()
    }
}

fn new_writer(method: MethodChoice) -> (tempfile::TempDir, Writer) {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path().join("seg"), &small(method)).unwrap();
    (dir, w)
}

const METHODS: [MethodChoice; 2] = [MethodChoice::Auto, MethodChoice::Lock];

#[test]
fn rseq_is_used_where_available() {
    let (_d, w) = new_writer(MethodChoice::Auto);
    println!("update method chosen: {:?}", w.method());
    if cfg!(all(target_arch = "x86_64", target_env = "gnu"))
        && std::env::var_os("GLIBC_TUNABLES").is_none()
    {
        assert_eq!(w.method(), Method::Rseq);
    } else {
        // tests/run counts this line as a skip (unexpected on x86_64 glibc).
        println!(
            "PERFABI-SKIP rseq_is_used_where_available: rseq is only required on x86_64 with glibc and no GLIBC_TUNABLES (method here: {:?})",
            w.method()
        );
    }
    let (_d, w) = new_writer(MethodChoice::Lock);
    assert_eq!(w.method(), Method::Lock);
}

#[test]
fn concurrent_adjusts_lose_nothing() {
    for m in METHODS {
        let (_d, w) = new_writer(m);
        let w = Arc::new(w);
        let a = w.add("a", "count", Semantics::Counter).unwrap();
        let b = w.add("b", "count", Semantics::Counter).unwrap();
        // Many more threads than CPUs: preemption inside sections is certain.
        let threads = 16;
        let per = 200_000;
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let w = w.clone();
                thread::spawn(move || {
                    for i in 0..per {
                        w.adjust(a, 1).unwrap();
                        if i % 4 == 0 {
                            w.adjust_group(&[(a, 2), (b, -1)]).unwrap();
                        }
                        if t == 0 && i % 1000 == 0 {
                            thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let s = w.snapshot().unwrap();
        let groups = threads * per / 4;
        assert_eq!(
            s.total(s.find("a").unwrap()),
            (threads * per + 2 * groups) as u64,
            "{m:?}"
        );
        assert_eq!(
            s.total(s.find("b").unwrap()) as i64,
            -(groups as i64),
            "{m:?}"
        );
    }
}

#[test]
fn readers_never_see_half_a_group() {
    for m in METHODS {
        let (_d, w) = new_writer(m);
        let w = Arc::new(w);
        let ids: Vec<_> = (0..4)
            .map(|i| w.add(&format!("g{i}"), "", Semantics::Counter).unwrap())
            .collect();
        let g: Vec<_> = ids.iter().map(|&i| (i, 1)).collect();
        let writers = {
            let w = w.clone();
            Hammer::start(3, move || w.adjust_group(&g).unwrap())
        };
        let view = w.view();
        let (insts, _) = view.instances(1024).unwrap();
        let mut buf = vec![0u64; 4];
        // The writers are seen writing before the reads are counted: on
        // busy CPUs the reads could otherwise all end before they start.
        let until = Deadline::witness();
        let written = |buf: &mut Vec<u64>| {
            (0..view.layout().nr_cpus)
                .any(|cpu| view.read_cpu_counters(cpu, buf, 64).is_ok() && buf[0] > 0)
        };
        let mut seen = false;
        while !seen && !until.passed() {
            seen = written(&mut buf);
            thread::yield_now();
        }
        until.assert(seen, format_args!("the writers' first group ({m:?})"));
        let (mut ok, mut busy) = (0u64, 0u64);
        for _ in 0..200_000 {
            for cpu in 0..view.layout().nr_cpus {
                match view.read_cpu_counters(cpu, &mut buf, 64) {
                    Ok(()) => {
                        ok += 1;
                        assert!(
                            buf.iter().all(|&v| v == buf[0]),
                            "torn group on cpu {cpu}: {buf:?} ({m:?})"
                        );
                    }
                    Err(Error::BusyCpu(_)) => busy += 1,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        writers.stop();
        println!(
            "{m:?}: {ok} consistent per-CPU reads, {busy} busy, 0 torn; instances {}",
            insts.len()
        );
        assert!(ok > 0);
    }
}

#[test]
fn instants_and_signed_values() {
    let (_d, w) = new_writer(MethodChoice::Auto);
    let q = w
        .add_typed("queue.depth", "", Semantics::Instant, ValueType::I64)
        .unwrap();
    let c = w.add("c", "", Semantics::Counter).unwrap();
    w.adjust(q, 5).unwrap();
    w.set(q, -3).unwrap();
    let s = w.snapshot().unwrap();
    let inst = s.find("queue.depth").unwrap();
    assert_eq!(inst.value_type, ValueType::I64);
    assert_eq!(s.total(inst) as i64, -3);
    assert_eq!(w.set(c, 1), Err(Error::NotInstant), "set is for instants");
}

#[test]
fn bad_input_is_refused_and_the_segment_stays_valid() {
    let (dir, w) = new_writer(MethodChoice::Auto);
    assert_eq!(w.add("", "", Semantics::Counter), Err(Error::BadName));
    assert_eq!(
        w.add(&"x".repeat(64), "", Semantics::Counter),
        Err(Error::BadName)
    );
    assert_eq!(w.add("a b", "", Semantics::Counter), Err(Error::BadName));
    assert_eq!(
        w.add("ok", "a unit with spaces", Semantics::Counter),
        Err(Error::BadUnit)
    );
    let first = w.add("ok", "", Semantics::Counter).unwrap();
    assert_eq!(
        w.add("ok", "", Semantics::Counter),
        Err(Error::DuplicateName)
    );
    for i in 1..16 {
        w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
    }
    assert_eq!(
        w.add("one.too.many", "", Semantics::Counter),
        Err(Error::TableFull)
    );
    w.adjust(first, 7).unwrap();
    w.del(first).unwrap();
    assert_eq!(w.adjust(first, 1), Err(Error::UnknownInstance));
    assert_eq!(w.del(first), Err(Error::UnknownInstance));
    let again = w.add("ok", "", Semantics::Counter).unwrap();
    assert_eq!(again.slot(), first.slot(), "freed slot is reused");
    assert_ne!(again.reg_id(), first.reg_id(), "with a new registration id");
    let groups: Vec<_> = (0..9).map(|_| (again, 1)).collect();
    assert_eq!(w.adjust_group(&groups), Err(Error::GroupTooLarge));
    let iv = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };
    let r = |s, e| Region {
        start: s,
        end: e,
        nr_accesses: 1,
        age: 0,
    };
    assert_eq!(
        w.publish_damon(&Aggregation::new(1, 1, iv, vec![])),
        Err(Error::BadAggregation)
    );
    assert_eq!(
        w.publish_damon(&Aggregation::new(1, 1, iv, vec![r(0, 10), r(5, 20)])),
        Err(Error::BadAggregation)
    );
    assert_eq!(
        w.publish_damon(&Aggregation::new(1, 1, iv, vec![r(0, 1); 65])),
        Err(Error::BadAggregation)
    );
    let per_cpu: Vec<u64> = (0..w.layout().nr_cpus)
        .map(|c| w.view().damon_dropped(c))
        .collect();
    assert_eq!(
        per_cpu.iter().sum::<u64>(),
        65,
        "an aggregation larger than a ring is counted as dropped once: {per_cpu:?} {:?}",
        w.update_stats()
    );

    let s = w.snapshot().unwrap();
    assert_eq!(
        s.total(s.find("ok").unwrap()),
        0,
        "a reused slot starts at zero"
    );
    assert_eq!(s.instances.len(), 16);
    let bytes = std::fs::read(dir.path().join("seg")).unwrap();
    perfabi::validate(&bytes).expect("segment still valid");
}

#[test]
fn damon_aggregations_are_rebuilt() {
    let (_d, w) = new_writer(MethodChoice::Auto);
    let iv = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };
    for round in 0..5u64 {
        let regions: Vec<_> = (0..20u64)
            .map(|i| Region {
                start: i * 4096,
                end: (i + 1) * 4096,
                nr_accesses: (i + round) as u32 % 21,
                age: round as u32,
            })
            .collect();
        assert_eq!(
            w.publish_damon(&Aggregation::new(42, 7, iv, regions.to_vec()))
                .unwrap(),
            round + 1
        );
        w.publish_damon(&Aggregation::new(42, 8, iv, regions[..3].to_vec()))
            .unwrap();
    }
    let aggs = w.view().damon(64).aggregations;
    assert_eq!(aggs.len(), 2);
    assert_eq!(
        (aggs[0].monitor_id, aggs[0].target_id, aggs[0].aggregation),
        (42, 7, 5)
    );
    assert_eq!(aggs[0].regions.len(), 20);
    assert_eq!(aggs[0].regions[3].nr_accesses, 7);
    assert_eq!(aggs[0].intervals, iv);
    assert_eq!(aggs[1].regions.len(), 3);
}

#[test]
fn memfd_segments_and_close() {
    let w = Writer::create_memfd("perfabi-test", &small(MethodChoice::Auto)).unwrap();
    let id = w.add("x", "", Semantics::Counter).unwrap();
    w.adjust(id, 3).unwrap();
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&w.fd()));
    let view_bytes = std::fs::read(&path).unwrap();
    assert!(perfabi::validate(&view_bytes).is_ok());
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    assert!(f.set_len(4096).is_err(), "a sealed memfd cannot shrink");
    w.close();
    // The descriptor went with the writer (its number may already name a
    // file another test opened meanwhile, but not our memfd).
    let target = std::fs::read_link(&path)
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        !target.contains("memfd:perfabi-test"),
        "fd closed with the writer: {target}"
    );

    let (dir, w) = new_writer(MethodChoice::Auto);
    w.close();
    let bytes = std::fs::read(dir.path().join("seg")).unwrap();
    let h: perfabi::layout::Header =
        bytemuck::pod_read_unaligned(&bytes[..perfabi::layout::HEADER_SIZE_V1_0]);
    assert_eq!(h.flags & FLAG_CLOSED, FLAG_CLOSED);
}

#[test]
fn recreating_replaces_the_file_with_a_new_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("seg");
    let w1 = Writer::create(&p, &small(MethodChoice::Auto)).unwrap();
    let w2 = Writer::create(&p, &small(MethodChoice::Auto)).unwrap();
    assert_ne!(w1.epoch(), w2.epoch());
    let l = perfabi::validate(&std::fs::read(&p).unwrap()).unwrap();
    assert_eq!(l.epoch, w2.epoch());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    let err = Writer::create(
        dir.path().join("no/such/dir/seg"),
        &small(MethodChoice::Auto),
    );
    assert!(err.is_err());
    let bad = Writer::create(
        &p,
        &Config {
            max_instances: 0,
            ..Config::default()
        },
    );
    assert!(matches!(
        bad,
        Err(perfabi_shm::writer::CreateError::Abi(Error::BadCapacity))
    ));
}

extern "C" fn on_signal(_: libc::c_int) {}

/// Signals abort rseq sections at arbitrary instructions; with a storm of
/// them, aborted multi-word updates (odd sequence) must be undone, and
/// totals must still be exact.
#[test]
fn signal_storm_aborts_and_undoes_without_losing_updates() {
    // SAFETY: installs a handler that does nothing, for a signal no other
    // test uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let (_d, w) = new_writer(MethodChoice::Auto);
    let w = Arc::new(w);
    let a = w.add("a", "", Semantics::Counter).unwrap();
    let g: Vec<_> = (0..8)
        .map(|i| (w.add(&format!("g{i}"), "", Semantics::Counter).unwrap(), 1))
        .collect();
    let iv = Intervals {
        sample_us: 1,
        aggr_us: 10,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (w, g, stop) = (w.clone(), g.clone(), stop.clone());
            thread::spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                let me = unsafe { libc::pthread_self() };
                let mut n = 0u64;
                let region = [Region {
                    start: 0,
                    end: 4096,
                    nr_accesses: 1,
                    age: 0,
                }];
                while !stop.load(Ordering::Relaxed) {
                    w.adjust(a, 1).unwrap();
                    w.adjust_group(&g).unwrap();
                    if n.is_multiple_of(64) {
                        w.publish_damon(&Aggregation::new(me as u64, 0, iv, region.to_vec()))
                            .unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let handles: Vec<libc::pthread_t> = workers
        .iter()
        .map(|h| h.as_pthread_t() as libc::pthread_t)
        .collect();
    let signaller = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for &t in &handles {
                    // SAFETY: the workers run until `stop`, and are joined after
                    // this thread, so every handle names a live thread.
                    if unsafe { libc::pthread_kill(t, libc::SIGUSR1) } == 0 {
                        sent += 1;
                    }
                }
            }
            sent
        })
    };
    // 400 ms of storm; on a machine busy with other work a signal may
    // rarely land inside a section, so with rseq it goes on until one has
    // (up to a minute, then the assertion below fails).
    let until = Deadline::witness();
    thread::sleep(std::time::Duration::from_millis(400));
    while w.method() == Method::Rseq && w.update_stats().aborts == 0 && !until.passed() {
        thread::sleep(std::time::Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let sent = signaller.join().unwrap();
    let total: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
    let s = w.snapshot().unwrap();
    assert_eq!(s.total(s.find("a").unwrap()), total);
    for i in 0..8 {
        assert_eq!(s.total(s.find(&format!("g{i}")).unwrap()), total);
    }
    let st = w.update_stats();
    println!(
        "signals sent: {sent}; method {:?}; rseq aborts: {}; undo passes: {}; repairs: {}",
        w.method(),
        st.aborts,
        st.undos,
        st.repairs
    );
    if w.method() == Method::Rseq {
        until.assert(
            st.aborts > 0,
            format_args!("a section aborted by the storm ({sent} signals)"),
        );
    }
    // The rings hold the newest 128 records: every aggregation rebuilt from
    // them is whole (one region each) and belongs to one of the 3 monitors.
    let aggs = w.view().damon(64).aggregations;
    assert!((1..=3).contains(&aggs.len()), "{aggs:?}");
    assert!(aggs.iter().all(|a| a.regions
        == [Region {
            start: 0,
            end: 4096,
            nr_accesses: 1,
            age: 0
        }]));
}

extern "C" fn on_signal2(_: libc::c_int) {}

/// The regions of publication `p` of the DAMON storm test: 40 to 100 of
/// them (2 to 4 batches of the rseq method, wrapping the ring at varying
/// slots), each field telling which publication and region it belongs to.
fn storm_regions(p: u64) -> Vec<Region> {
    let mut v = Vec::new();
    fill_storm_regions(p, &mut v);
    v
}

fn fill_storm_regions(p: u64, v: &mut Vec<Region>) {
    v.clear();
    v.extend((0..40 + p % 61).map(|i| Region {
        start: i << 12,
        end: (i << 12) + 1 + p % 4000,
        nr_accesses: p as u32,
        age: i as u32,
    }));
}

/// Many-record DAMON publications while a signal storm aborts the
/// writer's rseq sections anywhere (undone from the journal, retried, the
/// ring's `damon_next` possibly advanced by an aborted batch), and a
/// reader rebuilds aggregations all along: every aggregation it rebuilds
/// is exactly the publication of that number, never a mix.
#[test]
fn damon_publications_stay_whole_under_a_signal_storm() {
    // SAFETY: installs a handler that does nothing, for a signal no other
    // test uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal2 as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let iv = Intervals {
        sample_us: 5,
        aggr_us: 100,
    };
    for method in METHODS {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config {
            damon_capacity: 256,
            ..small(method)
        };
        let w = Arc::new(Writer::create(dir.path().join("seg"), &cfg).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writer = {
            let (w, stop, progress) = (w.clone(), stop.clone(), progress.clone());
            thread::spawn(move || {
                let (mut p, mut a) = (0, Aggregation::new(7, 3, iv, Vec::new()));
                while !stop.load(Ordering::Relaxed) {
                    p += 1;
                    fill_storm_regions(p, &mut a.regions);
                    assert_eq!(w.publish_damon(&a).unwrap(), p);
                    progress.store(p, Ordering::Relaxed);
                }
                p
            })
        };
        let target = writer.as_pthread_t() as libc::pthread_t;
        let signaller = {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: the writer thread runs until `stop` and is
                    // joined after this thread, so the handle names a live
                    // thread.
                    if unsafe { libc::pthread_kill(target, libc::SIGUSR2) } == 0 {
                        sent += 1;
                    }
                }
                sent
            })
        };
        let (mut checked, mut last) = (0u64, 0u64);
        let until = Deadline::witness();
        // 400 ms, and longer (up to a minute) until the writer made some
        // progress and the reader saw it, however slow the build or
        // loaded the machine (the storm leaves the writer little time).
        while until.elapsed() < std::time::Duration::from_millis(400)
            || ((progress.load(Ordering::Relaxed) < 20 || checked == 0) && !until.passed())
        {
            for a in w.view().damon(64).aggregations {
                assert_eq!((a.monitor_id, a.target_id), (7, 3));
                assert_eq!(a.intervals, iv);
                assert_eq!(a.regions, storm_regions(a.aggregation), "{method:?}");
                checked += 1;
                last = last.max(a.aggregation);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let sent = signaller.join().unwrap();
        let published = writer.join().unwrap();
        let st = w.update_stats();
        println!(
            "{:?}: {published} publications, {checked} rebuilt aggregations checked (last {last}), \
             {sent} signals, {} aborts, {} undos, {} repairs",
            w.method(),
            st.aborts,
            st.undos,
            st.repairs
        );
        until.assert(
            checked > 0 && published > 0,
            format_args!(
                "publications ({published}) rebuilt by the reader ({checked}), {method:?}"
            ),
        );
        let a = &w.view().damon(64).aggregations;
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].aggregation, published);
        assert_eq!(a[0].regions, storm_regions(published));
    }
}

/// The generation protocol with real threads: a writer keeps re-registering
/// one slot under new names (g1, g2, …) and sets each to its own number; a
/// reader must never pair a name with another registration's value.
#[test]
fn snapshots_never_pair_a_name_with_another_registrations_value() {
    let (_d, w) = new_writer(MethodChoice::Auto);
    let w = Arc::new(w);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        thread::spawn(move || {
            let mut k = 1i64;
            while !stop.load(Ordering::Relaxed) {
                let id = w.add(&format!("g{k}"), "", Semantics::Counter).unwrap();
                w.adjust(id, k).unwrap();
                w.del(id).unwrap();
                k += 1;
            }
            k
        })
    };
    let view = w.view();
    let (mut seen, mut paired, mut busy) = (0u64, 0u64, 0u64);
    // 500 ms, and on (up to a minute) until some snapshot caught a
    // registration with its value: busy CPUs may keep the writer off them.
    let until = Deadline::witness();
    while until.elapsed() < std::time::Duration::from_millis(500)
        || (paired == 0 && !until.passed())
    {
        match view.snapshot(64) {
            Ok(s) => {
                for i in &s.instances {
                    let k: u64 = i.name[1..].parse().unwrap();
                    let v = s.total(i);
                    assert!(v == 0 || v == k, "{} paired with value {v}", i.name);
                    seen += 1;
                    paired += u64::from(v == k);
                }
            }
            Err(Error::BusyMetadata) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let registrations = writer.join().unwrap();
    println!("{registrations} registrations; {seen} instances checked in snapshots, {paired} with their value, {busy} busy, 0 mismatched");
    until.assert(
        paired > 0,
        format_args!("a registration seen with its value ({seen} instances seen)"),
    );
}

#[test]
fn external_instances_take_per_cpu_values_whole() {
    let (_d, w) = new_writer(MethodChoice::Auto);
    let n = w.layout().nr_cpus;
    let e = w
        .add_external("cpu.user", "us", Semantics::Counter, ValueType::U64)
        .unwrap();
    let values: Vec<u64> = (0..n as u64).map(|c| 1000 + c).collect();
    w.publish_per_cpu(e, &values).unwrap();
    let s = w.snapshot().unwrap();
    let i = s.find("cpu.user").unwrap();
    assert_eq!(s.per_cpu(i).collect::<Vec<_>>(), values);
    // Fewer values than CPUs: the rest are 0.
    w.publish_per_cpu(e, &[7]).unwrap();
    let s = w.snapshot().unwrap();
    assert_eq!(s.total(s.find("cpu.user").unwrap()), 7);
    w.del_external(e).unwrap();
    assert_eq!(w.publish_per_cpu(e, &[1]), Err(Error::UnknownInstance));
    assert_eq!(w.del_external(e), Err(Error::UnknownInstance));
    assert!(w.snapshot().unwrap().find("cpu.user").is_none());
}

#[test]
fn an_instance_table_is_decoded_again_only_when_the_generation_moves() {
    let (_d, w) = new_writer(MethodChoice::Lock);
    w.add("a", "", Semantics::Counter).unwrap();
    let view = w.view();
    let mut t = perfabi::InstanceTable::default();
    let g1 = view.instances_into(&mut t, 64).unwrap();
    assert_eq!(t.generation(), Some(g1));
    let names = |t: &perfabi::InstanceTable| -> Vec<String> {
        t.instances.iter().map(|i| i.name.clone()).collect()
    };
    assert_eq!(names(&t), ["a"]);
    // The generation stands: the cached table is kept (a mark put in it
    // survives), not decoded again.
    t.instances[0].name = "kept".into();
    assert_eq!(view.instances_into(&mut t, 64).unwrap(), g1);
    assert_eq!(names(&t), ["kept"]);
    // It moves: decoded afresh.
    w.add("b", "", Semantics::Counter).unwrap();
    let g2 = view.instances_into(&mut t, 64).unwrap();
    assert!(g2 > g1);
    assert_eq!(names(&t), ["a", "b"]);
    t.clear();
    assert_eq!((t.generation(), t.instances.len()), (None, 0));
}

/// A `Counter` handle adjusts its own instance, with either method, from
/// any number of threads at once (it is `Copy`, `Send` and `Sync`), and
/// its updates add up with those of `Writer::adjust` on the same id.
#[test]
fn a_counter_handle_adjusts_its_instance() {
    fn copy_send_sync<T: Copy + Send + Sync>(_: &T) {}
    for m in METHODS {
        let (_d, w) = new_writer(m);
        if m == MethodChoice::Lock {
            assert_eq!(w.method(), Method::Lock);
        }
        let a = w.add("a", "", Semantics::Counter).unwrap();
        let b = w.add("b", "", Semantics::Instant).unwrap();
        let ca = w.counter(a).unwrap();
        let cb = w.counter(b).unwrap();
        copy_send_sync(&ca);
        assert_eq!((ca.id(), cb.id()), (a, b));
        ca.adjust(5).unwrap();
        cb.adjust(-2).unwrap();
        w.adjust(a, 1).unwrap();
        let (threads, per) = (4, 20_000u64);
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(move || {
                    for _ in 0..per {
                        ca.adjust(1).unwrap();
                        cb.adjust(-1).unwrap();
                    }
                });
            }
        });
        let s = w.snapshot().unwrap();
        assert_eq!(s.total(s.find("a").unwrap()), 6 + threads * per, "{m:?}");
        assert_eq!(
            s.total(s.find("b").unwrap()) as i64,
            -2 - (threads * per) as i64,
            "{m:?}"
        );
    }
}

/// A handle of a deleted instance is refused, never misapplied: once the
/// slot is reused under a new registration id, the old handle's adjusts
/// return `UnknownInstance` and leave the new registration's value alone,
/// with either method; a handle of a stale id cannot be made at all.
#[test]
fn a_handle_of_a_deleted_id_does_not_touch_the_slots_new_registration() {
    for m in METHODS {
        let (_d, w) = new_writer(m);
        let old = w.add("old", "", Semantics::Counter).unwrap();
        let c: Counter<'_> = w.counter(old).unwrap();
        c.adjust(3).unwrap();
        w.del(old).unwrap();
        assert_eq!(c.adjust(1), Err(Error::UnknownInstance), "{m:?}");
        let new = w.add("new", "", Semantics::Counter).unwrap();
        assert_eq!(new.slot(), old.slot(), "the freed slot is reused");
        assert_ne!(new.reg_id(), old.reg_id());
        for _ in 0..1000 {
            assert_eq!(c.adjust(1), Err(Error::UnknownInstance), "{m:?}");
        }
        assert_eq!(w.counter(old).err(), Some(Error::UnknownInstance));
        let s = w.snapshot().unwrap();
        assert_eq!(s.total(s.find("new").unwrap()), 0, "{m:?}");
        assert!(s.find("old").is_none());
        // The new registration's own handle works.
        w.counter(new).unwrap().adjust(2).unwrap();
        let s = w.snapshot().unwrap();
        assert_eq!(s.total(s.find("new").unwrap()), 2, "{m:?}");
    }
}

/// The adjust fast path's one bounds check: an id of another writer whose
/// slot lies past this writer's table is refused, with either method.
#[test]
fn an_id_past_the_table_is_refused() {
    for m in METHODS {
        let dir = tempfile::tempdir().unwrap();
        let big = Config {
            max_instances: 64,
            ..small(m)
        };
        let big = Writer::create(dir.path().join("big"), &big).unwrap();
        let (_d, w) = new_writer(m);
        let ids: Vec<_> = (0..40)
            .map(|i| big.add(&format!("c{i}"), "", Semantics::Counter).unwrap())
            .collect();
        let far = ids[39];
        assert!(far.slot() as usize >= w.layout().max_instances);
        assert_eq!(w.adjust(far, 1), Err(Error::UnknownInstance));
        assert_eq!(w.counter(far).err(), Some(Error::UnknownInstance));
        big.adjust(far, 1).unwrap();
    }
}

/// A thread whose rseq area the kernel no longer serves (unregistered,
/// `cpu_id` -1) gets `NoRseq` from adjust: the section's bound check sends
/// it to the out-of-line path without a write, and nothing else changes.
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
#[test]
fn a_thread_without_rseq_is_refused_not_misapplied() {
    #[allow(non_upper_case_globals)]
    extern "C" {
        static __rseq_offset: isize;
        static __rseq_size: u32;
    }
    let (_d, w) = new_writer(MethodChoice::Auto);
    if w.method() != Method::Rseq {
        println!(
            "PERFABI-SKIP a_thread_without_rseq_is_refused_not_misapplied: method {:?}",
            w.method()
        );
        return;
    }
    let a = w.add("a", "", Semantics::Counter).unwrap();
    w.adjust(a, 1).unwrap();
    let w = Arc::new(w);
    let r = thread::spawn({
        let w = w.clone();
        move || {
            let tp: usize;
            // SAFETY: on x86_64 Linux %fs:0 holds the thread pointer; a load.
            unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp) };
            // SAFETY: glibc sets both before main; plain loads.
            let (offset, size) = unsafe { (__rseq_offset, __rseq_size) };
            let area = tp.wrapping_add_signed(offset);
            // The kernel wants the length glibc registered: try the sizes
            // glibc versions use (a wrong one fails with EINVAL, harmless).
            let unregistered = [32, size as usize, (size as usize).next_multiple_of(32)]
                .into_iter()
                .any(|len| {
                    // SAFETY: unregisters this thread's own rseq area (flag
                    // 1, glibc's signature); nothing in this thread uses it
                    // afterwards but the writer under test.
                    unsafe { libc::syscall(libc::SYS_rseq, area, len as u32, 1, 0x5305_3053) == 0 }
                });
            assert!(unregistered, "{}", std::io::Error::last_os_error());
            (w.adjust(a, 1), w.counter(a).unwrap().adjust(1))
        }
    })
    .join()
    .unwrap();
    assert_eq!(r, (Err(Error::NoRseq), Err(Error::NoRseq)));
    let s = w.snapshot().unwrap();
    assert_eq!(s.total(s.find("a").unwrap()), 1);
    w.adjust(a, 1).unwrap();
}
