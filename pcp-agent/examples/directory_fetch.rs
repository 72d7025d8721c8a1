//! What serving a segment directory costs pmdaperfabi over the reader
//! library's own read of it. WRITERS segments of FAMILIES counter families
//! each (one member, the same names in every segment) in a directory on
//! tmpfs; in each round, side by side, (a) `Directory::read()` alone and
//! (b) one fetch by the agent of every family's metric, as libpcp_pmda
//! drives it (`prepare_fetch`, which reads the whole directory, then each
//! value). Prints the medians and their ratio, and checks every value.
//!
//! Usage: cargo run --release -p perfabi-pcp-agent --example directory_fetch
//!        [WRITERS [FAMILIES [ROUNDS]]]   (default 100 20 200)

use std::time::{Duration, Instant};

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_pcp_agent::catalog::INDOMS;
use perfabi_pcp_agent::counter_names::CounterNames;
use perfabi_pcp_agent::dir_source::DirSource;
use perfabi_pcp_agent::ffi::daemon::{Callbacks, Tables, Value};
use perfabi_pcp_agent::ffi::{indom, Pcp};
use perfabi_pcp_agent::pmda::Agent;
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::writer::{Config, Writer};

const DOMAIN: u32 = 502;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (writers, families, rounds) = (arg(1, 100), arg(2, 20), arg(3, 200));
    let top = tempfile::tempdir_in("/dev/shm").unwrap();
    let dir = top.path().join("segs");
    let config = Config {
        max_instances: (2 * families as u32).max(64),
        max_families: families.max(1) as u32,
        max_members: families.max(1) as u32,
        damon_capacity: 0,
        ..Config::default()
    };
    let _writers: Vec<Writer> = (0..writers)
        .map(|i| {
            let w = Writer::create_in(&dir, &format!("w{i}"), &config).unwrap();
            for f in 0..families {
                let spec = FamilySpec::new(
                    &format!("bench.f{f:03}"),
                    "A counter",
                    "",
                    Kind::Counter,
                    Unit::COUNT,
                );
                let m = w.add_member(w.add_family(&spec).unwrap(), "", &[]).unwrap();
                w.member_add(&m, (f + 1) as i64).unwrap();
            }
            w
        })
        .collect();

    let pcp: &'static Pcp = Box::leak(Box::new(Pcp::load().unwrap()));
    let mut agent = Agent::new(
        pcp,
        DOMAIN,
        &dir,
        perfabi_reader::Trust::OwnerOrRoot,
        None,
        CounterNames::default(),
        None,
    );
    agent.serve_directory(DirSource::new(&dir, DirectoryOptions::default()));
    let mut tables = Tables::detached(pcp, INDOMS.map(|d| indom(DOMAIN, d as u32)));
    agent.refresh(&mut tables);
    let pmids: Vec<_> = (0..families)
        .map(|f| agent.pmid(&format!("perfabi.bench.f{f:03}")).unwrap())
        .collect();
    let mut library = Directory::open(&dir, DirectoryOptions::default()).unwrap();

    let (mut lib, mut pmda) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let s = library.read().unwrap();
        lib.push(t.elapsed());
        assert_eq!((s.segments, s.families.len()), (writers, families));

        let t = Instant::now();
        agent.refresh(&mut tables);
        agent.prepare_fetch(&pmids, &mut tables);
        let mut sum = 0u64;
        for k in 0..pmids.len() {
            let idx = agent.fetch_metrics()[k].unwrap();
            match agent.fetch_value(k, idx) {
                Ok(Some(Value::U64(v))) => sum += v,
                other => panic!("perfabi.bench.f{k:03}: {:?}", other.map(|v| v.is_some())),
            }
        }
        pmda.push(t.elapsed());
        // Family f is f + 1 in each of the writers.
        let want = (writers * families * (families + 1) / 2) as u64;
        assert_eq!(sum, want);
    }
    let (lib, pmda) = (median(lib), median(pmda));
    println!(
        "DIRECTORY-FETCH {writers} segments x {families} families, {rounds} rounds: \
         Directory::read {:.3} ms, pmdaperfabi fetch {:.3} ms, ratio {:.2}",
        lib.as_secs_f64() * 1e3,
        pmda.as_secs_f64() * 1e3,
        pmda.as_secs_f64() / lib.as_secs_f64()
    );
}
