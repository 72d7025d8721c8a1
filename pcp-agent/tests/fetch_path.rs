//! pmdaperfabi's fetch path without pmcd, as libpcp_pmda drives it for
//! each fetch PDU: the check callback ([`Callbacks::refresh`]), then the
//! fetch entry point ([`Callbacks::prepare_fetch`], the agent's own answer
//! [`FetchResult`] for the metrics without instance domain, and
//! [`Callbacks::value`] per instance for those `pmdaFetch` walks).
//!
//! While the segment's metadata stays the same, none of it allocates: a
//! global allocator counts the test thread's allocations, and the test
//! first shows that it counts (a `Box`), then requires none over a
//! thousand fetches of the bench's 1,000 counters and of a histogram's
//! buckets, a peak's and a gauge's instances, while a writer thread
//! raises every group of 8 counters together (no fetch may see a group
//! torn). A new counter then rebuilds the tables (allocating), and the
//! fetches after it allocate nothing again.

use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit};
use perfabi_pcp_agent::catalog::INDOMS;
use perfabi_pcp_agent::counter_names::CounterNames;
use perfabi_pcp_agent::ffi::daemon::{Callbacks, FetchResult, Tables, Value};
use perfabi_pcp_agent::ffi::*;
use perfabi_pcp_agent::pmda::Agent;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::probe::{self, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

const DOMAIN: u32 = 502;

#[test]
fn fetches_of_unchanged_metadata_allocate_nothing_and_see_no_torn_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Arc::new(Writer::create(&path, &Config::default()).unwrap());
    // The bench's 1,000 counters: 125 groups of 8 raised together.
    let groups: Vec<Vec<_>> = (0..125)
        .map(|g| {
            (0..8)
                .map(|c| {
                    let n = format!("bench.g{g:03}.c{c}");
                    (w.add(&n, "count", Semantics::Counter).unwrap(), 1)
                })
                .collect()
        })
        .collect();
    // Families with instance domains: a histogram's buckets, a peak and
    // a gauge per device.
    let lat = w
        .add_family(&FamilySpec::histogram(
            "disk.latency",
            "latency",
            "device",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 4 },
        ))
        .unwrap();
    let peak = w
        .add_family(&FamilySpec::new(
            "mem.peak",
            "peak",
            "",
            Kind::Peak,
            Unit::NONE,
        ))
        .unwrap();
    let queue = w
        .add_family(&FamilySpec::new(
            "disk.queue",
            "queue",
            "device",
            Kind::Gauge,
            Unit::NONE,
        ))
        .unwrap();
    for d in ["sda", "sdb"] {
        let m = w.add_member(lat, d, &[]).unwrap();
        w.observe(&m, 5000).unwrap();
        let q = w.add_member(queue, d, &[]).unwrap();
        w.member_set(&q, 3).unwrap();
    }
    let p = w.add_member(peak, "", &[]).unwrap();
    w.peak(&p, 77).unwrap();
    // Families without dimension the agent answers for itself: a
    // histogram's count and sum, a signed gauge below zero.
    let size = w
        .add_family(&FamilySpec::histogram(
            "io.size",
            "size",
            "",
            Unit::BYTES,
            Buckets::Log2 { first: 9, n: 3 },
        ))
        .unwrap();
    let s = w.add_member(size, "", &[]).unwrap();
    w.observe(&s, 4096).unwrap();
    let mut debt = FamilySpec::new("app.debt", "debt", "", Kind::Gauge, Unit::NONE);
    debt.value_type = perfabi::ValueType::I64;
    let debt = w.add_family(&debt).unwrap();
    let d = w.add_member(debt, "", &[]).unwrap();
    w.member_set(&d, -5).unwrap();

    let pcp: &'static Pcp = Box::leak(Box::new(Pcp::load().unwrap()));
    let mut agent = Agent::new(
        pcp,
        DOMAIN,
        &path,
        perfabi_reader::Trust::OwnerOrRoot,
        None,
        CounterNames::default(),
        None,
    );
    // The writer's liveness is re-checked (reading /proc) once a second:
    // not during the counted fetches.
    agent.source().set_recheck(Duration::from_secs(3600));
    let mut tables = Tables::detached(pcp, INDOMS.map(|d| indom(DOMAIN, d as u32)));
    agent.refresh(&mut tables);
    let names: Vec<String> = (0..125)
        .flat_map(|g| (0..8).map(move |c| format!("perfabi.bench.g{g:03}.c{c}")))
        .collect();
    let counters: Vec<pmID> = names.iter().map(|n| agent.pmid(n).unwrap()).collect();
    // The metrics with instance domains, and the ids pmdaFetch walks.
    let walked: Vec<(pmID, Vec<c_int>)> = [
        "perfabi.disk.latency.bucket",
        "perfabi.disk.latency.count",
        "perfabi.disk.queue",
        "perfabi.percpu.mem.peak",
    ]
    .iter()
    .map(|n| {
        let pmid = agent.pmid(n).unwrap_or_else(|| panic!("{n}"));
        let i = agent.metric_index(pmid).unwrap();
        let ids = tables.instance_ids(tables.metrics()[i].m_desc.indom);
        assert!(!ids.is_empty(), "{n}");
        (pmid, ids)
    })
    .collect();
    let others: Vec<pmID> = walked.iter().map(|(p, _)| *p).collect();
    // The agent's own answer for the PMIDs without instance domain is
    // value()'s, as pmdaFetch would have asked for it.
    let singular: Vec<pmID> = counters
        .iter()
        .copied()
        .chain(
            [
                "perfabi.mem.peak",
                "perfabi.io.size.count",
                "perfabi.io.size.sum",
                "perfabi.app.debt",
            ]
            .iter()
            .map(|n| agent.pmid(n).unwrap_or_else(|| panic!("{n}"))),
        )
        .collect();
    agent.refresh(&mut tables);
    agent.prepare_fetch(&singular, &mut tables);
    let mut seen = Vec::new();
    for (k, i) in agent.fetch_metrics().iter().enumerate() {
        let i = i.unwrap();
        assert_eq!(
            agent.fetch_value(k, i),
            agent.value(i, PM_IN_NULL as c_uint),
            "{}",
            singular[k]
        );
        seen.push(agent.fetch_value(k, i).unwrap());
    }
    let n = counters.len();
    assert_eq!(
        seen[n..],
        [
            Some(Value::U64(77)),
            Some(Value::U64(1)),
            Some(Value::U64(4096)),
            Some(Value::U64(-5i64 as u64))
        ]
    );

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for g in &groups {
                    w.adjust_group(g).unwrap();
                }
                rounds += 1;
            }
            rounds
        })
    };

    let mut fetch = FetchResult::default();
    let mut got = Vec::with_capacity(counters.len());
    let mut walked_values = 0u64;
    // One fetch of the counters and one of the others, as libpcp_pmda
    // makes them; returns the fetches with a torn group.
    let mut round = |agent: &mut Agent,
                     tables: &mut Tables,
                     fetch: &mut FetchResult,
                     got: &mut Vec<Result<u64, c_int>>| {
        agent.refresh(tables);
        agent.prepare_fetch(&counters, tables);
        assert!(!fetch.build(&counters, agent.fetch_metrics(), agent, tables.metrics()));
        // SAFETY: nothing was left to pmdaFetch.
        fetch.finish_own();
        fetch.sent_values(got);
        let torn = got
            .chunks(8)
            .any(|g| g.iter().any(|v| v != &g[0] || v.is_err()));
        agent.refresh(tables);
        agent.prepare_fetch(&others, tables);
        assert!(fetch.build(&others, agent.fetch_metrics(), agent, tables.metrics()));
        for (k, (_, ids)) in walked.iter().enumerate() {
            let i = agent.fetch_metrics()[k].unwrap();
            for &id in ids {
                match agent.value(i, id as c_uint) {
                    Ok(Some(Value::U64(_))) => walked_values += 1,
                    v => panic!("{:?}: {v:?}", walked[k]),
                }
            }
        }
        torn
    };
    // Warm: the fetch plans and buffers are made.
    for _ in 0..3 {
        round(&mut agent, &mut tables, &mut fetch, &mut got);
    }
    let first = got.clone();

    probe::count_this_thread(true);
    let before = probe::allocations();
    let b = std::hint::black_box(Box::new(7u64));
    let shown = probe::allocations() - before;
    drop(b);
    let a0 = probe::allocations();
    let mut torn = 0;
    for _ in 0..1000 {
        torn += u32::from(round(&mut agent, &mut tables, &mut fetch, &mut got));
    }
    let allocs = probe::allocations() - a0;
    probe::count_this_thread(false);
    // The writer is seen to have moved the values: on busy CPUs it may not
    // have run during the 1000 fetches, so fetching goes on until it has
    // (up to a minute), torn groups still counted.
    let until = Deadline::witness();
    let mut fetches = 1000;
    let moved = |got: &[Result<u64, c_int>]| got.iter().zip(&first).any(|(a, b)| a != b);
    while !moved(&got) && !until.passed() {
        torn += u32::from(round(&mut agent, &mut tables, &mut fetch, &mut got));
        fetches += 1;
        std::thread::yield_now();
    }

    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert_eq!(shown, 1, "the allocation counter does not count");
    println!(
        "{fetches} fetches of 1,000 counters (and {walked_values} walked values) against {rounds} \
         rounds of 125 group updates: {allocs} allocations in the first 1000, {torn} with a torn group"
    );
    assert_eq!(torn, 0);
    until.assert(moved(&got), "the values moved");
    assert_eq!(
        allocs, 0,
        "allocations in 1000 fetches of unchanged metadata"
    );

    // A new counter: the tables are rebuilt (that allocates) and serve it;
    // then fetches allocate nothing again.
    let late = w.add("late.arrival", "count", Semantics::Counter).unwrap();
    w.adjust(late, 5).unwrap();
    agent.refresh(&mut tables);
    let late = [agent
        .pmid("perfabi.late.arrival")
        .expect("a new counter is served")];
    let one = |agent: &mut Agent,
               tables: &mut Tables,
               fetch: &mut FetchResult,
               got: &mut Vec<Result<u64, c_int>>| {
        agent.refresh(tables);
        agent.prepare_fetch(&late, tables);
        fetch.build(&late, agent.fetch_metrics(), agent, tables.metrics());
        // SAFETY: nothing was left to pmdaFetch.
        fetch.finish_own();
        fetch.sent_values(got);
    };
    one(&mut agent, &mut tables, &mut fetch, &mut got);
    assert_eq!(got, [Ok(5)]);
    probe::count_this_thread(true);
    let a0 = probe::allocations();
    for _ in 0..100 {
        one(&mut agent, &mut tables, &mut fetch, &mut got);
    }
    let allocs = probe::allocations() - a0;
    probe::count_this_thread(false);
    assert_eq!(allocs, 0, "allocations after the tables were rebuilt");
}

/// The agent's own answer is the one `pmdaFetch` would give: a 32-bit
/// value in place, 64-bit values and strings in value blocks, no value
/// (no segment) as `PM_ERR_AGAIN`, an unknown PMID as `PM_ERR_PMID`.
#[test]
fn the_agent_s_own_answer_has_pmda_fetch_s_formats_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let pcp: &'static Pcp = Box::leak(Box::new(Pcp::load().unwrap()));
    let agent_for = |path: &std::path::Path| {
        Agent::new(
            pcp,
            DOMAIN,
            path,
            perfabi_reader::Trust::OwnerOrRoot,
            None,
            CounterNames::default(),
            None,
        )
    };
    let mut tables = Tables::detached(pcp, INDOMS.map(|d| indom(DOMAIN, d as u32)));
    // No segment yet.
    let mut agent = agent_for(&path);
    agent.refresh(&mut tables);
    let pmids: Vec<pmID> = [
        "perfabi.segment.available",
        "perfabi.segment.path",
        "perfabi.segment.epoch",
    ]
    .iter()
    .map(|n| agent.pmid(n).unwrap())
    .chain([pmid(DOMAIN, 4000, 1)])
    .collect();
    let mut fetch = FetchResult::default();
    agent.prepare_fetch(&pmids, &mut tables);
    assert!(!fetch.build(&pmids, agent.fetch_metrics(), &agent, tables.metrics()));
    let sets: Vec<pmValueSet> = fetch.own_sets().map(|s| *s.unwrap()).collect();
    let head = |s: &pmValueSet| (s.pmid, s.numval, s.valfmt);
    assert_eq!(head(&sets[0]), (pmids[0], 1, PM_VAL_INSITU));
    assert_eq!(fetch.insitu_of(0), Some(0));
    assert_eq!(sets[0].vlist[0].inst, PM_IN_NULL);
    assert_eq!(head(&sets[1]), (pmids[1], 1, PM_VAL_DPTR));
    let path_text = format!("{}\0", path.display());
    let block = fetch.block_of(1).unwrap();
    assert_eq!(
        u32::from_ne_bytes(block[..4].try_into().unwrap()),
        value_block_header(4 + path_text.len(), PM_TYPE_STRING)
    );
    assert_eq!(&block[4..], path_text.as_bytes());
    assert_eq!(head(&sets[2]), (pmids[2], PM_ERR_AGAIN, PM_VAL_INSITU));
    assert_eq!(head(&sets[3]), (pmids[3], PM_ERR_PMID, PM_VAL_INSITU));

    // A segment: its epoch, a 64-bit value in a block of 12 bytes.
    let w = Writer::create(&path, &Config::default()).unwrap();
    agent.refresh(&mut tables);
    agent.prepare_fetch(&pmids, &mut tables);
    fetch.build(&pmids, agent.fetch_metrics(), &agent, tables.metrics());
    let block = fetch.block_of(2).unwrap();
    assert_eq!(block.len(), 12);
    assert_eq!(
        u64::from_ne_bytes(block[4..].try_into().unwrap()),
        w.layout().epoch
    );
    let mut got = Vec::new();
    // SAFETY: nothing was left to pmdaFetch.
    fetch.finish_own();
    fetch.sent_values(&mut got);
    assert_eq!(got[2], Ok(w.layout().epoch));
    assert_eq!(got[3], Err(PM_ERR_PMID));
}
