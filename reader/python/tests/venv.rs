//! The Python module as its users get it: built from source by pip
//! (through maturin) into a fresh virtual environment, its pytest tests
//! (`reader/python/tests/test_*.py`) run there against live writers —
//! `perfabi-exportd`, and this test binary as a writer of families,
//! histograms and DAMON regions ([`python_test_writer`]) — its type stubs
//! checked against the built module by mypy's stubtest, and the package's
//! Python, the README's example and the tests checked by `mypy --strict`.
//!
//! The venv is made by `python3` on the PATH (`$PERFABI_TEST_PYTHON` names
//! another). Under CI (`CI` set) a missing `python3 -m venv` or a pip that
//! cannot download the test tools fails the test; elsewhere it is reported
//! as a skip (`PERFABI-SKIP`), as is any test pytest skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit, ValueType};
use perfabi_shm::writer::{Config, MemberId, Writer};
use perfabi_test_harness::readme;

const TEST: &str = "python_module_in_a_fresh_venv";

/// The README's example, run by the Python tests against the exporter.
const EXAMPLE: &str = "reader/python/examples/top_counters.py";
/// The writer's example, shown in README.md's "Writing from Python" and
/// run by `test_writer.py`.
const WRITER_EXAMPLE: &str = "reader/python/examples/job_worker.py";

/// The README's directory example, run by `test_directory.py`.
const DIRECTORY_EXAMPLE: &str = "reader/python/examples/read_directory.py";

/// The segment path of a [`python_test_writer`] process.
const WRITER_PATH: &str = "PERFABI_PY_WRITER";
/// What it does: `live` (updates its families until killed), `stuck`
/// (dies mid-update: CPU 0's sequence word left odd) or `scripted` (what
/// the lines of its standard input say: see [`scripted`]).
const WRITER_MODE: &str = "PERFABI_PY_WRITER_MODE";

#[test]
fn python_module_in_a_fresh_venv() {
    let started = Instant::now();
    let root = readme::repo_root();
    // The README shows the example as it is in the file the tests run.
    readme::example(EXAMPLE);
    readme::example(WRITER_EXAMPLE);
    readme::example(DIRECTORY_EXAMPLE);
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let python3 = std::env::var("PERFABI_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&python3)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return unavailable(&format!(
                "{python3} -m venv failed (Debian: apt-get install python3-venv): {}",
                last_line(&out.stderr)
            ))
        }
        Err(e) => return unavailable(&format!("no {python3}: {e}")),
    }
    // The venv's commands run as in an activated venv: maturin's build
    // hook runs `maturin` from the PATH.
    let bin = venv.join("bin");
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let in_venv = |program: &str| {
        let mut c = Command::new(bin.join(program));
        c.env("PATH", &path).env("VIRTUAL_ENV", &venv);
        c
    };
    let pip = |args: &[&str]| {
        let mut c = in_venv("python");
        c.args(["-m", "pip", "--disable-pip-version-check", "--retries", "2"])
            .args(["--timeout", "30"])
            .args(args);
        c
    };
    let requirements = root.join("reader/python/tests/requirements.txt");
    let tools = timed(
        "pip install -r reader/python/tests/requirements.txt",
        pip(&["install", "-q", "-r"]).arg(&requirements),
    );
    if !tools.status.success() {
        return unavailable(&format!(
            "pip could not install the test tools (no network?): {}",
            last_line(&tools.stderr)
        ));
    }
    // The module: pip builds the wheel from source through maturin (the
    // venv's, pinned above) and installs it.
    let built = timed(
        "pip install reader/python",
        pip(&["install", "-q", "--no-build-isolation"]).arg(root.join("reader/python")),
    );
    succeeded("pip install reader/python", &built);

    let exportd = perfabi_test_harness::workspace::workspace_bin(
        &perfabi_test_harness::workspace::profile_dir(),
        "perfabi-exportd",
        "perfabi-exportd",
    );
    let me = std::env::current_exe().unwrap();
    let writer = [
        me.to_str().unwrap(),
        "--ignored",
        "--exact",
        "python_test_writer",
        "--test-threads=1",
    ];
    let pytest = timed(
        "pytest",
        in_venv("python")
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-v", "-rs"])
            .arg(root.join("reader/python/tests"))
            .current_dir(tmp.path())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PERFABI_TEST_EXPORTD", &exportd)
            .env(
                "PERFABI_TEST_WRITER",
                serde_json::to_string(&writer).unwrap(),
            )
            .env("PERFABI_TEST_WRITER_PATH_ENV", WRITER_PATH)
            .env("PERFABI_TEST_WRITER_MODE_ENV", WRITER_MODE)
            .env(
                "PERFABI_TEST_RECORD",
                root.join("exportd/records/guest-6.12-vaddr-hot4of64.trace"),
            )
            .env("PERFABI_TEST_EXAMPLE", root.join(EXAMPLE)),
    );
    print!("{}", String::from_utf8_lossy(&pytest.stdout));
    eprint!("{}", String::from_utf8_lossy(&pytest.stderr));
    let summary = pytest_summary(&String::from_utf8_lossy(&pytest.stdout));
    println!("pytest: {summary}");
    assert!(pytest.status.success(), "pytest failed: {summary}");
    let count = |what: &str| {
        summary
            .split(", ")
            .filter_map(|part| part.split_once(' '))
            .find(|(_, w)| w.starts_with(what))
            .map_or(0, |(n, _)| n.parse::<u32>().unwrap_or(0))
    };
    assert!(count("passed") > 0, "pytest ran no test: {summary}");
    for line in String::from_utf8_lossy(&pytest.stdout).lines() {
        // -rs: "SKIPPED [1] test_x.py:12: reason"
        if let Some(why) = line.strip_prefix("SKIPPED ") {
            perfabi_test_harness::skip(TEST, &format!("pytest skipped {why}"));
        }
    }

    // The stubs against the built module (names, signatures, kinds).
    let stubtest = timed(
        "stubtest perfabi",
        in_venv("python")
            .args(["-m", "mypy.stubtest", "perfabi", "--allowlist"])
            .arg(root.join("reader/python/tests/stubtest-allowlist.txt"))
            .current_dir(tmp.path()),
    );
    succeeded("mypy.stubtest perfabi", &stubtest);
    // The package's Python, and the stubs as users meet them: the
    // example and the tests, strictly.
    let mypy = timed(
        "mypy --strict",
        in_venv("python")
            .args(["-m", "mypy", "--strict", "--cache-dir"])
            .arg(tmp.path().join("mypy-cache"))
            .arg(root.join("reader/python/python/perfabi"))
            .arg(root.join(EXAMPLE))
            .arg(root.join(WRITER_EXAMPLE))
            .arg(root.join(DIRECTORY_EXAMPLE))
            .arg(root.join("reader/python/tests"))
            .current_dir(tmp.path()),
    );
    succeeded("mypy --strict", &mypy);
    println!(
        "{TEST}: built, installed, tested and type-checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A tool the test needs is missing: a failure under CI, else a skip.
fn unavailable(reason: &str) {
    assert!(std::env::var_os("CI").is_none(), "{TEST}: {reason}");
    perfabi_test_harness::skip(TEST, reason);
}

/// Runs `cmd` to its end, printing how long `what` took.
fn timed(what: &str, cmd: &mut Command) -> Output {
    let t = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    println!("{what}: {:.1} s", t.elapsed().as_secs_f64());
    out
}

fn succeeded(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines().last().unwrap_or("").trim().to_string()
}

/// pytest's closing line, `=== 20 passed, 1 skipped in 9.87s ===`, as
/// `20 passed, 1 skipped in 9.87s`.
fn pytest_summary(stdout: &str) -> String {
    stdout
        .lines()
        .rev()
        .map(|l| l.trim().trim_matches('=').trim())
        .find(|l| l.contains(" in ") && !l.is_empty())
        .unwrap_or("no summary line")
        .to_string()
}

/// Run by the Python tests as a writer process (see `conftest.py`): the
/// segment at `$PERFABI_PY_WRITER`, doing what `$PERFABI_PY_WRITER_MODE`
/// says. Nothing without them.
#[test]
#[ignore = "helper: the writer process the Python tests start"]
fn python_test_writer() {
    let Some(path) = std::env::var_os(WRITER_PATH) else {
        return;
    };
    let path = PathBuf::from(path);
    match std::env::var(WRITER_MODE).as_deref() {
        Ok("live") => live(&path),
        Ok("stuck") => stuck(&path),
        Ok("scripted") => scripted(&path),
        other => panic!("{WRITER_MODE}: {other:?} is not live, stuck or scripted"),
    }
}

/// What the writer registers; `conftest.py` states the same for the tests.
struct Registered {
    ticks: perfabi_shm::writer::InstanceId,
    requests: [MemberId; 2],
    temperature: [MemberId; 2],
    queue_depth: MemberId,
    latency: [MemberId; 2],
    size: MemberId,
}

/// The aggregation the writer publishes (its index aside).
fn aggregation() -> Aggregation {
    Aggregation::new(
        7,
        1,
        Intervals {
            sample_us: 5_000,
            aggr_us: 100_000,
        },
        vec![
            Region {
                start: 0x10_0000,
                end: 0x30_0000,
                nr_accesses: 20,
                age: 3,
            },
            Region {
                start: 0x30_0000,
                end: 0x80_0000,
                nr_accesses: 5,
                age: 1,
            },
        ],
    )
}

fn register(path: &Path, auto_heartbeat: bool) -> (Writer, Registered) {
    let w = Writer::create(
        path,
        &Config {
            max_instances: 256,
            max_families: 16,
            max_members: 64,
            damon_capacity: 64,
            heartbeat_interval: Duration::from_millis(100),
            auto_heartbeat,
            ..Config::default()
        },
    )
    .unwrap();
    let ticks = w.add("app.ticks", "count", Semantics::Counter).unwrap();
    let fam = |spec: FamilySpec| w.add_family(&spec).unwrap();
    let requests = fam(FamilySpec::new(
        "app.requests",
        "Requests served",
        "route",
        Kind::Counter,
        Unit::COUNT,
    ));
    let temperature = fam(FamilySpec {
        value_type: ValueType::I64,
        ..FamilySpec::new(
            "app.temperature",
            "Temperature offset",
            "sensor",
            Kind::Gauge,
            Unit::NONE,
        )
    });
    let queue_depth = fam(FamilySpec::new(
        "app.queue_depth",
        "Deepest queue",
        "",
        Kind::Peak,
        Unit::COUNT,
    ));
    let latency = fam(FamilySpec::histogram(
        "app.latency",
        "Request latency",
        "route",
        Unit::NS,
        Buckets::Explicit(vec![1_000, 10_000, 100_000]),
    ));
    let size = fam(FamilySpec::histogram(
        "app.size",
        "Request size",
        "",
        Unit::KIB,
        Buckets::Log2 { first: 10, n: 4 },
    ));
    let member = |f, name, labels: &[(&str, &str)]| w.add_member(f, name, labels).unwrap();
    let r = Registered {
        ticks,
        requests: [
            member(requests, "get", &[("method", "GET")]),
            member(requests, "put", &[("method", "PUT"), ("idempotent", "yes")]),
        ],
        temperature: [
            member(temperature, "cpu", &[]),
            member(temperature, "gpu", &[]),
        ],
        queue_depth: member(queue_depth, "", &[]),
        latency: [member(latency, "get", &[]), member(latency, "put", &[])],
        size: member(size, "", &[]),
    };
    w.member_set(&r.temperature[0], -5).unwrap();
    w.publish_damon(&aggregation()).unwrap();
    (w, r)
}

/// Updates every family from two threads (so values spread over CPUs)
/// and publishes the aggregation every 100 ms, until killed.
fn live(path: &Path) {
    let (w, r) = register(path, true);
    let (w, r) = (Arc::new(w), Arc::new(r));
    for t in 0..2u64 {
        let (w, r) = (w.clone(), r.clone());
        std::thread::spawn(move || {
            for n in 0u64.. {
                w.adjust(r.ticks, 1).unwrap();
                w.member_add(&r.requests[(n % 2) as usize], 1).unwrap();
                // Up and down: per-CPU values of both signs, summing to 0 or 1.
                let step = if n % 2 == 0 { 1 } else { -1 };
                w.member_add(&r.temperature[1], step).unwrap();
                w.peak(&r.queue_depth, n % 1000 + t).unwrap();
                w.observe(&r.latency[(n % 2) as usize], (n * 997) % 200_000)
                    .unwrap();
                w.observe(&r.size, (n * 131) % 8192).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    loop {
        std::thread::sleep(Duration::from_millis(100));
        w.publish_damon(&aggregation()).unwrap();
    }
}

/// Registers and publishes, then dies as a writer that was killed
/// mid-update leaves its segment: CPU 0's sequence word odd, not closed.
fn stuck(path: &Path) {
    let (w, r) = register(path, false);
    w.adjust(r.ticks, 1).unwrap();
    perfabi_test_harness::forge::set_cpu_sequence(path, 0, None);
    // Neither closed nor repaired: the process ends without the writer's
    // drop.
    std::mem::forget(w);
    std::process::exit(0);
}

/// What a [`scripted`] writer puts before each of its answers (libtest
/// prints its own lines on the same standard output).
const ANSWER: &str = "perfabi-writer> ";

/// A writer that does what each line of its standard input says, and
/// answers each (and its start) with a line `ANSWER ok` or `ANSWER
/// error: why` (`support.ScriptedWriter` drives it):
///
/// - `add NAME`, `del NAME`: registers a counter family of one instance
///   (labelled `pid=1`), or deletes it;
/// - `add-counter NAME`, `del-counter NAME`: the same for a flat (ABI
///   1.0) counter;
/// - `busy`, `idle`: makes CPU 0's block busy (its sequence word odd, as a
///   writer that died mid-update leaves it), or quiet again.
///
/// Its values never move, and it refreshes no heartbeat (which would
/// repair a busy block): the heartbeat interval is long enough for a test.
/// It stops at the end of its input.
fn scripted(path: &Path) {
    use std::collections::HashMap;
    use std::io::{BufRead, Write};

    let w = Writer::create(
        path,
        &Config {
            max_instances: 64,
            max_families: 64,
            max_members: 64,
            damon_capacity: 0,
            heartbeat_interval: Duration::from_secs(60),
            auto_heartbeat: false,
            ..Config::default()
        },
    )
    .unwrap();
    let mut families = HashMap::new();
    let mut counters = HashMap::new();
    let mut quiet = None;
    let answer = |r: Result<(), String>| {
        let line = match r {
            Ok(()) => format!("{ANSWER}ok\n"),
            Err(e) => format!("{ANSWER}error: {e}\n"),
        };
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes()).unwrap();
        out.flush().unwrap();
    };
    answer(Ok(()));
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let r = match line.split_once(' ').unwrap_or((line.as_str(), "")) {
            ("add", name) => {
                let spec = FamilySpec::new(name, "", "", Kind::Counter, Unit::COUNT);
                w.add_family(&spec).and_then(|f| {
                    w.add_member(f, "", &[("pid", "1")])?;
                    families.insert(name.to_string(), f);
                    Ok(())
                })
            }
            ("del", name) => match families.remove(name) {
                Some(f) => w.del_family(f),
                None => Err(perfabi::Error::UnknownInstance),
            },
            ("add-counter", name) => w.add(name, "count", Semantics::Counter).map(|c| {
                counters.insert(name.to_string(), c);
            }),
            ("del-counter", name) => match counters.remove(name) {
                Some(c) => w.del(c),
                None => Err(perfabi::Error::UnknownInstance),
            },
            ("busy", "") => {
                quiet = Some(perfabi_test_harness::forge::set_cpu_sequence(path, 0, None));
                Ok(())
            }
            ("idle", "") => {
                if let Some(seq) = quiet.take() {
                    perfabi_test_harness::forge::set_cpu_sequence(path, 0, Some(seq));
                }
                Ok(())
            }
            _ => {
                answer(Err(format!("what is {line:?}?")));
                continue;
            }
        };
        answer(r.map_err(|e| e.to_string()));
    }
}
