//! The writer of `reader/prometheus/benches/hostile-clients`: a segment
//! whose page has COUNTERS labelled counter series (about 65 bytes of page
//! each) and HISTOGRAMS histogram series of 20 buckets (about 1.3 KB
//! each), every value moved once a second, until the process is killed.
//! Prints `ready` on standard output once every series is registered.
//! With CPUS, the segment is laid out for that many CPUs (a simulated
//! geometry): served with `perfabi-prometheus --cpu`, each series is one
//! per CPU, for a page CPUS times as large.
//!
//! Usage: page_writer PATH COUNTERS HISTOGRAMS [CPUS]

use std::io::Write;
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(counters), Some(histograms)) = (
        args.next(),
        args.next().and_then(|s| s.parse::<u32>().ok()),
        args.next().and_then(|s| s.parse::<u32>().ok()),
    ) else {
        eprintln!("usage: page_writer PATH COUNTERS HISTOGRAMS [CPUS]");
        std::process::exit(2);
    };
    let cpus = match args.next().map(|s| s.parse::<u32>()) {
        None => None,
        Some(Ok(n)) if (1..=1024).contains(&n) => Some(n),
        Some(_) => {
            eprintln!("page_writer: CPUS must be 1 to 1024");
            std::process::exit(2);
        }
    };
    // A histogram member's slots: its 20 buckets, +Inf, sum and count.
    let slots = u64::from(counters) + u64::from(histograms) * 24 + 8;
    let members = counters + histograms + 8;
    if slots > u64::from(perfabi::layout::MAX_INSTANCES) || members > perfabi::layout::MAX_MEMBERS {
        eprintln!(
            "page_writer: at most {} slots: COUNTERS + 24 x HISTOGRAMS",
            perfabi::layout::MAX_INSTANCES
        );
        std::process::exit(2);
    }
    let w = Writer::create(
        &path,
        &Config {
            max_instances: slots as u32,
            max_families: 4,
            max_members: members,
            damon_capacity: 0,
            heartbeat_interval: Duration::from_secs(1),
            nr_cpus: cpus,
            ..Config::default()
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("page_writer: {path}: {e}");
        std::process::exit(1)
    });
    let rx = w
        .add_family(&FamilySpec::new(
            "net.rx_bytes",
            "Bytes received",
            "device",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "handler",
            Unit::NS,
            Buckets::Explicit((0..20).map(|b| 1u64 << b).collect()),
        ))
        .unwrap();
    let rx: Vec<_> = (0..counters)
        .map(|i| {
            w.add_member(rx, &format!("dev{i:06}"), &[("driver", "virtio_net")])
                .unwrap()
        })
        .collect();
    let lat: Vec<_> = (0..histograms)
        .map(|i| w.add_member(lat, &format!("h{i:05}"), &[]).unwrap())
        .collect();
    println!("ready");
    let _ = std::io::stdout().flush();
    for tick in 1u64.. {
        for (i, m) in rx.iter().enumerate() {
            w.member_add(m, i as i64 + 1).unwrap();
        }
        for (i, m) in lat.iter().enumerate() {
            w.observe(m, (tick + i as u64) % (1 << 21)).unwrap();
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
