//! Test helpers: a writer in a child process, small writers and forged
//! segment files, and waiting with a deadline.

#![allow(dead_code)]

pub mod directory;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use perfabi_test_harness::python::{find_openmetrics_parsers, python_with};

/// Environment variable that turns the `child_writer` helper test into a
/// writer process for the segment at its value.
pub const CHILD_ENV: &str = "PERFABI_TEST_CHILD_WRITER";
/// Adjusts per second the child makes on counter `ticks`.
pub const RATE_ENV: &str = "PERFABI_TEST_CHILD_RATE";

/// Umask (octal) the child writer sets before it creates its segment.
pub const UMASK_ENV: &str = "PERFABI_TEST_CHILD_UMASK";

/// Starts this test binary's `child_writer` helper as a writer of `path`
/// adjusting `ticks` `rate` times a second; returns once the segment has
/// its `ticks` counter, so that a reader started then sees it from its
/// first sample.
pub fn spawn_writer(path: &Path, rate: u64) -> Child {
    let child = spawn_writer_with(path, rate, &std::env::current_exe().unwrap(), |_| {});
    wait_for(Duration::from_secs(60), || {
        perfabi_reader::Segment::open(path)
            .ok()?
            .counter("ticks")
            .ok()
            .map(drop)
    })
    .expect("child writer registered its ticks counter");
    child
}

/// [`spawn_writer`] running the test binary `exe` (a copy, say), with
/// `setup` applied to the command (another uid, an umask).
pub fn spawn_writer_with(
    path: &Path,
    rate: u64,
    exe: &Path,
    setup: impl FnOnce(&mut Command),
) -> Child {
    let _ = std::fs::remove_file(path);
    let mut cmd = Command::new(exe);
    cmd.args([
        "--ignored",
        "--exact",
        "child_writer",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, path)
    .env(RATE_ENV, rate.to_string())
    .stdout(Stdio::null());
    setup(&mut cmd);
    let child = cmd.spawn().expect("spawn child writer");
    wait_for(Duration::from_secs(60), || path.exists().then_some(()))
        .expect("child writer created the segment");
    child
}

/// The writer loop run in the child: heartbeat every 50 ms (promised 100 ms).
pub fn run_child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let rate: u64 = std::env::var(RATE_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1000);
    let cfg = perfabi_shm::writer::Config {
        max_instances: 64,
        damon_capacity: 64,
        heartbeat_interval: Duration::from_millis(100),
        ..Default::default()
    };
    if let Some(mask) = std::env::var(UMASK_ENV)
        .ok()
        .and_then(|m| u32::from_str_radix(&m, 8).ok())
    {
        // This helper process's file mode mask, which only its writer uses.
        rustix::process::umask(rustix::fs::Mode::from_bits_truncate(mask));
    }
    let w = std::sync::Arc::new(
        perfabi_shm::writer::Writer::create(&path, &cfg).expect("child: create segment"),
    );
    let ticks = w
        .add("ticks", "count", perfabi::Semantics::Counter)
        .unwrap();
    if std::env::var_os(LOAD_ENV).is_some() {
        start_load(&w);
    }
    let start = Instant::now();
    let mut done = 0u64;
    loop {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        if due > done {
            w.adjust(ticks, (due - done) as i64).unwrap();
            done = due;
        }
        // No heartbeat call: the writer's own thread sends it.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Set to make the child writer also a normally busy one: three threads
/// updating a group of 8 counters without pause and one publishing DAMON
/// aggregations of 48 regions back to back (the load of the issue that made
/// 4–20 % of one-shot reads fail).
pub const LOAD_ENV: &str = "PERFABI_TEST_CHILD_LOAD";

fn start_load(w: &std::sync::Arc<perfabi_shm::writer::Writer>) {
    let ids: Vec<_> = (0..8)
        .map(|i| {
            w.add(&format!("load.g{i}"), "count", perfabi::Semantics::Counter)
                .unwrap()
        })
        .collect();
    for _ in 0..3 {
        let (w, ids) = (w.clone(), ids.clone());
        std::thread::spawn(move || {
            let group: Vec<_> = ids.iter().map(|&id| (id, 1)).collect();
            loop {
                w.adjust_group(&group).unwrap();
            }
        });
    }
    let w = w.clone();
    std::thread::spawn(move || {
        let iv = perfabi::damon::Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
        };
        let regions: Vec<_> = (0..48u64)
            .map(|i| perfabi::damon::Region {
                start: i << 12,
                end: (i + 1) << 12,
                nr_accesses: (i % 20) as u32,
                age: 1,
            })
            .collect();
        let a = perfabi::damon::Aggregation::new(1, 1, iv, regions);
        loop {
            w.publish_damon(&a).unwrap();
        }
    });
}

/// Polls `f` until it returns `Some` or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A writer at `path` with room for `max_instances` counters and no DAMON
/// ring (other settings default).
pub fn counters_writer(path: &Path, max_instances: u32) -> perfabi_shm::writer::Writer {
    perfabi_shm::writer::Writer::create(
        path,
        &perfabi_shm::writer::Config {
            max_instances,
            damon_capacity: 0,
            ..perfabi_shm::writer::Config::default()
        },
    )
    .unwrap()
}

/// Writes at `path` (mode 0644) a new, empty one-CPU segment whose header
/// claims writer `pid`, started at `start_ns`, with `flags` and no
/// heartbeat promised: what a forger, or a writer long gone, leaves.
pub fn write_claimed_segment(path: &Path, flags: u64, pid: u64, start_ns: u64) {
    use std::os::unix::fs::PermissionsExt;
    let g = perfabi::Geometry {
        page_size: 4096,
        nr_cpus: 1,
        max_instances: 4,
        damon_capacity: 0,
        max_families: 0,
        max_members: 0,
    };
    let mut h = g
        .header(&perfabi::WriterIdentity {
            epoch: 7,
            pid,
            start_ns,
            heartbeat_interval_ns: 0,
            first_heartbeat_ns: perfabi_shm::host::boottime_ns(),
        })
        .unwrap();
    h.flags = flags;
    let mut bytes = vec![0u8; h.segment_size as usize];
    bytes[..std::mem::size_of_val(&h)].copy_from_slice(bytemuck::bytes_of(&h));
    std::fs::write(path, &bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// Opens `path` with the path re-checked before every read (no recheck
/// interval), so that a change to the file is seen at the next look.
pub fn open_checking_every_read(path: &Path) -> perfabi_reader::Segment {
    perfabi_reader::Segment::open_with(
        path,
        perfabi_reader::Options {
            recheck: Duration::ZERO,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Runs the Python program `script` with `input` on its standard input,
/// under `python3` as found on the path.
pub fn python(script: &str, input: &[u8]) -> std::process::Output {
    python_with("python3", script, input)
}

/// Runs `page` through the `prometheus_client` OpenMetrics parser of every
/// interpreter of `openmetrics_parsers` (the harness's): one line per sample (`TYPE NAME
/// CPU VALUE`), or the first parser's complaint. Every parser must accept
/// the page and see the same samples. Fails if there is no parser.
pub fn parse_openmetrics(page: &[u8]) -> Result<String, String> {
    let script = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in f.samples:\n\
        \x20       print(f.type, s.name, s.labels.get('cpu', '-'), repr(s.value))\n";
    let parsers = find_openmetrics_parsers();
    assert!(
        !parsers.is_empty(),
        "no python3 with prometheus_client (apt-get install python3-prometheus-client)"
    );
    let mut first: Option<String> = None;
    for py in parsers {
        let parsed = python_with(&py, script, page);
        if !parsed.status.success() {
            return Err(format!(
                "the OpenMetrics parser of {py} refused the page:\n{}\n{}",
                String::from_utf8_lossy(&parsed.stderr),
                String::from_utf8_lossy(page)
            ));
        }
        let text = String::from_utf8(parsed.stdout).unwrap();
        match &first {
            None => first = Some(text),
            Some(f) => assert_eq!(*f, text, "{py} saw other samples"),
        }
    }
    Ok(first.unwrap())
}

/// Copies the segment at `from` to `to` with its metadata busy for good
/// (`gen1` = `gen2` + 1, `spec/PERFABI.md` §7): what a writer that died in
/// the middle of a metadata change leaves.
pub fn busy_copy(from: &Path, to: &Path) {
    let mut bytes = std::fs::read(from).unwrap();
    let gen2 = u64::from_le_bytes(bytes[136..144].try_into().unwrap());
    bytes[128..136].copy_from_slice(&(gen2 + 1).to_le_bytes());
    std::fs::write(to, &bytes).unwrap();
}
