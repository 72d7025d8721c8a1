//! libperfabi from C, as its users get it: `make install` into a private
//! prefix, C programs compiled against the installed library through
//! pkg-config (shared, static, and under AddressSanitizer and
//! UndefinedBehaviorSanitizer), run on real segments — a running
//! `perfabi-exportd`'s and ones this test writes — with what they print
//! compared to what the Rust reader reads from the same segment.
//!
//! Needs `cc`, `pkg-config` and `make` (tests/setup installs them): where
//! one is missing a test prints `PERFABI-SKIP`, or fails under CI.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Reading, Semantics, Unit, ValueType};
use perfabi_c::perfabi_error::{self, *};
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::forge::add_to_value;
use perfabi_test_harness::{readme, run_limited, workspace, Finished, KillOnDrop};

const CRATE: &str = env!("CARGO_MANIFEST_DIR");
const LIMIT: Duration = Duration::from_secs(60);

/// Whether the C toolchain is here; else a skip (a failure under CI).
fn have_tools(test: &str) -> bool {
    for tool in ["cc", "pkg-config", "make", "readelf"] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let reason = format!("{tool} is missing (tests/setup installs it)");
            assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
            perfabi_test_harness::skip(test, &reason);
            return false;
        }
    }
    true
}

/// `make -C reader/capi ARGS`, Cargo's target folder `target`.
fn make(args: &[String], target: &Path) -> Finished {
    run_limited(
        Command::new("make")
            .args(["-C", CRATE])
            .args(args)
            .env("CARGO_TARGET_DIR", target),
        Duration::from_secs(900),
    )
}

/// [`make`], which must succeed.
fn make_ok(args: &[String], target: &Path) {
    let f = make(args, target);
    assert_eq!(
        f.code(),
        Some(0),
        "make {args:?}:\n{}\n{}",
        f.stdout,
        f.stderr
    );
}

/// The prefix libperfabi was installed into, once per run, as its users
/// do: `make`, then `make install PREFIX=...`. The prefix has a blank and
/// an `&` in it: each C program is compiled through its perfabi.pc. It is
/// a folder of the target directory, made afresh by each run (a static is
/// never dropped: a temporary folder in /tmp was left behind by every
/// run).
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let target = workspace::target_dir();
        let dir = target.join("perfabi capi&prefix");
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                panic!("cannot remove {}: {e}", dir.display())
            }
            _ => {}
        }
        make_ok(&[], &target);
        let install = ["install".into(), format!("PREFIX={}", dir.display())];
        make_ok(&install, &target);
        dir
    })
}

/// pkg-config's output as arguments: split at blanks, `\x` being `x`
/// (pkg-config escapes so a blank or a shell character of a path).
fn shell_words(s: &str) -> Vec<String> {
    let (mut words, mut word) = (Vec::new(), None::<String>);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// `pkg-config ARGS perfabi` against the installed library.
fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("perfabi")
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pkg-config {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    shell_words(&String::from_utf8(out.stdout).unwrap())
}

/// How a C program is linked.
#[derive(Clone, Copy, PartialEq)]
enum Link {
    /// `pkg-config --cflags --libs perfabi`: the shared library.
    Shared,
    /// `pkg-config --static`, with the archive taken for `-lperfabi`.
    Static,
    /// The shared library, the program under ASan and UBSan.
    Sanitized,
}

/// Compiles C source `src` (named `name`) into `dir`, warnings as errors.
fn compile(dir: &Path, name: &str, src: &str, link: Link) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let mut cmd = Command::new("cc");
    cmd.args([
        "-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-pthread", "-o",
    ])
    .arg(&exe)
    .arg(&c)
    .args(pkg_config(&["--cflags"]));
    match link {
        Link::Shared => cmd.args(pkg_config(&["--libs"])),
        Link::Sanitized => cmd
            .args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"])
            .arg("-fno-omit-frame-pointer")
            .args(pkg_config(&["--libs"])),
        Link::Static => cmd.args(pkg_config(&["--static", "--libs"]).into_iter().map(|a| {
            if a == "-lperfabi" {
                "-l:libperfabi.a".to_string()
            } else {
                a
            }
        })),
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// A compiled C program to run with the installed library on its path.
fn c_program(exe: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", prefix().join("lib"))
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1");
    cmd
}

/// Compiles the crate's C file `rel` (`examples/agent.c`) into `dir`, as
/// [`compile`] does, the program named after the file.
fn compile_file(dir: &Path, rel: &str, link: Link) -> PathBuf {
    let src = std::fs::read_to_string(Path::new(CRATE).join(rel)).unwrap();
    let name = Path::new(rel).file_stem().unwrap().to_str().unwrap();
    compile(dir, name, &src, link)
}

/// Runs a compiled C program with the installed library on its path.
fn run(exe: &Path, args: &[&str]) -> Finished {
    run_limited(&mut c_program(exe, args), LIMIT)
}

/// A C program that prints `ready` and waits for a line on stdin at each
/// step (`checks truncate`, `checks reread`), so that the test changes the
/// segment in between.
struct Stepped {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    stdin: std::process::ChildStdin,
}

impl Stepped {
    fn start(exe: &Path, args: &[&str]) -> Self {
        let mut child = c_program(exe, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self {
            out: BufReader::new(child.stdout.take().unwrap()),
            stdin: child.stdin.take().unwrap(),
            child,
        }
    }

    /// What it printed up to its next `ready` (left out).
    fn until_ready(&mut self) -> String {
        let mut seen = String::new();
        while !seen.ends_with("ready\n") {
            assert!(
                self.out.read_line(&mut seen).unwrap() > 0,
                "it ended early: {seen}"
            );
        }
        seen.truncate(seen.len() - "ready\n".len());
        seen
    }

    /// Lets it go on from its `ready`.
    fn go(&mut self) {
        self.stdin.write_all(b"go\n").unwrap();
    }

    /// Ends its stdin and waits for its end: what it printed since its
    /// last `ready`; fails unless it succeeded with the sanitizers quiet.
    fn finish(self) -> String {
        let Self {
            mut child,
            mut out,
            stdin,
        } = self;
        drop(stdin);
        let mut f = Finished {
            status: None,
            max_rss_kib: 0,
            elapsed: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
        };
        out.read_to_string(&mut f.stdout).unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut f.stderr)
            .unwrap();
        f.status = Some(child.wait().unwrap());
        assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
        assert_sanitizers_quiet(&f);
        f.stdout
    }
}

/// Fails if a sanitizer reported anything.
fn assert_sanitizers_quiet(f: &Finished) {
    for report in [
        "AddressSanitizer",
        "LeakSanitizer",
        "runtime error:",
        "UndefinedBehaviorSanitizer",
    ] {
        assert!(
            !f.stderr.contains(report),
            "sanitizer report:\n{}",
            f.stderr
        );
    }
}

/// A running perfabi-exportd writing a segment in `dir`.
fn exportd(dir: &Path) -> (KillOnDrop, PathBuf) {
    let bin = workspace::workspace_bin(
        &workspace::profile_dir(),
        "perfabi-exportd",
        "perfabi-exportd",
    );
    let path = dir.join("perfabi.seg");
    let child = Command::new(bin)
        .arg("--path")
        .arg(&path)
        .args(["--interval", "0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    // The segment appears before the exporter's first refresh has added
    // its families: wait for the ones the tests read.
    let end = Instant::now() + Duration::from_secs(60);
    let ready = |path: &Path| {
        let mut seg = Segment::open(path)?;
        seg.family("kernel.all.pswitch")?;
        seg.family("exportd.refreshes")
    };
    while ready(&path).is_err() {
        assert!(
            Instant::now() < end,
            "perfabi-exportd published no kernel.all.pswitch at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (guard, path)
}

/// The agent's line for each family, as the Rust reader sees the segment:
/// `family NAME kind=KIND unit=UNIT instances=N INSTANCE...`.
fn family_lines(snap: &perfabi_reader::Snapshot) -> Vec<String> {
    snap.families
        .iter()
        .map(|f| {
            let mut l = format!(
                "family {} kind={} unit={} instances={}",
                f.name,
                f.kind.as_str(),
                f.unit_text,
                f.members.len()
            );
            for m in f.members.iter().filter(|m| !m.instance.is_empty()) {
                l.push(' ');
                l.push_str(&m.instance);
            }
            l
        })
        .collect()
}

/// Runs the agent on `path` reading `counter`; checks its family list
/// against the Rust reader's (at the same generation) and that the
/// counter's total moved up at every read.
fn check_agent(agent: &Path, path: &Path, counter: &str) -> Finished {
    let mut last = None;
    for _ in 0..5 {
        let f = run(agent, &[path.to_str().unwrap(), counter]);
        assert_eq!(f.code(), Some(0), "agent:\n{}\n{}", f.stdout, f.stderr);
        let snap = Segment::open(path).unwrap().snapshot().unwrap();
        let shown: Vec<&str> = f
            .stdout
            .lines()
            .filter(|l| l.starts_with("family "))
            .collect();
        let header = format!(
            "families {} generation {}",
            snap.families.len(),
            snap.generation
        );
        if !f.stdout.lines().any(|l| l == header) {
            // The writer's devices changed between the two reads: again.
            last = Some(f);
            continue;
        }
        assert_eq!(
            shown,
            family_lines(&snap),
            "the agent's families are the Rust reader's"
        );
        let totals: Vec<u64> = f
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("read {counter} total=")))
            .map(|l| l.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(totals.len(), 4, "{}", f.stdout);
        assert!(
            totals.windows(2).all(|w| w[0] < w[1]),
            "{counter} moves: {totals:?}"
        );
        return f;
    }
    panic!(
        "the segment's generation kept moving: {:?}",
        last.map(|f| f.stdout)
    );
}

#[test]
fn readme_agent_against_the_installed_library_reads_what_rust_reads() {
    if !have_tools("readme_agent_against_the_installed_library_reads_what_rust_reads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = readme::example("reader/capi/examples/agent.c");
    let agent = compile(dir.path(), "agent", &src, Link::Shared);
    let (_daemon, path) = exportd(dir.path());
    // A family's member (a family of one instance) and a 1.0 counter.
    let f = check_agent(&agent, &path, "kernel.all.pswitch");
    println!("{}", f.stdout);
    check_agent(&agent, &path, "exportd.refreshes");
    // A missing segment: the reader's message, with the path, and exit 1.
    let missing = dir.path().join("missing.seg");
    let f = run(&agent, &[missing.to_str().unwrap()]);
    assert_eq!(f.code(), Some(1));
    assert_eq!(
        f.stderr.trim(),
        format!(
            "agent: open: no segment at {}: is the exporter running? [not-found]",
            missing.display()
        )
    );
}

#[test]
fn agent_linked_statically_needs_no_libperfabi_at_run_time() {
    if !have_tools("agent_linked_statically_needs_no_libperfabi_at_run_time") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let agent = compile_file(dir.path(), "examples/agent.c", Link::Static);
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&agent)
        .output()
        .unwrap();
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(!dynamic.contains("libperfabi"), "{dynamic}");
    let (_daemon, path) = exportd(dir.path());
    let f = run_limited(
        Command::new(&agent).arg(&path).arg("exportd.refreshes"),
        LIMIT,
    );
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_eq!(
        f.stdout
            .lines()
            .filter(|l| l.starts_with("read exportd.refreshes"))
            .count(),
        4
    );
}

#[test]
fn agent_under_address_and_undefined_sanitizers_runs_clean() {
    if !have_tools("agent_under_address_and_undefined_sanitizers_runs_clean") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let agent = compile_file(dir.path(), "examples/agent.c", Link::Sanitized);
    let (_daemon, path) = exportd(dir.path());
    let f = check_agent(&agent, &path, "kernel.all.pswitch");
    assert_sanitizers_quiet(&f);
    let f = run(&agent, &[dir.path().join("missing").to_str().unwrap()]);
    assert_eq!(f.code(), Some(1), "{}", f.stderr);
    assert_sanitizers_quiet(&f);
}

/// A segment of two CPUs with one of each: a 1.0 counter, a counter family
/// of two devices with labels, a signed gauge, a histogram of two
/// members, and a DAMON aggregation. Nothing changes after this.
fn test_segment(path: &Path, heartbeat: bool) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(2),
            max_instances: 64,
            max_families: 8,
            max_members: 16,
            damon_capacity: 16,
            heartbeat_interval: if heartbeat {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            },
            auto_heartbeat: heartbeat,
            ..Config::default()
        },
    )
    .unwrap();
    let c = w.add("capi.test", "count", Semantics::Counter).unwrap();
    w.adjust(c, 5).unwrap();
    let bytes = w
        .add_family(&FamilySpec::new(
            "capi.bytes",
            "Bytes read",
            "device",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    let sda = w
        .add_member(bytes, "sda", &[("model", "virtio"), ("bus", "pci")])
        .unwrap();
    let sdb = w.add_member(bytes, "sdb", &[]).unwrap();
    w.member_add(&sda, 4096).unwrap();
    w.member_add(&sdb, 512).unwrap();
    let level = w
        .add_family(&FamilySpec {
            value_type: ValueType::I64,
            ..FamilySpec::new("capi.level", "A signed level", "", Kind::Gauge, Unit::NONE)
        })
        .unwrap();
    let l = w.add_member(level, "", &[]).unwrap();
    w.member_add(&l, -7).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "capi.latency",
            "Request latency",
            "method",
            Unit::NS,
            Buckets::Explicit(vec![1000, 10_000, 100_000, 1_000_000]),
        ))
        .unwrap();
    let get = w.add_member(lat, "get", &[]).unwrap();
    let put = w.add_member(lat, "put", &[]).unwrap();
    for v in [10, 5000, 5000, 70_000, 9_000_000] {
        w.observe(&get, v).unwrap();
    }
    w.observe(&put, 1).unwrap();
    let region = |start, end, nr_accesses, age| Region {
        start,
        end,
        nr_accesses,
        age,
    };
    w.publish_damon(&Aggregation::new(
        7,
        1,
        Intervals {
            sample_us: 5_000,
            aggr_us: 100_000,
        },
        vec![region(0x1000, 0x5000, 3, 2), region(0x5000, 0x9000, 20, 0)],
    ))
    .unwrap();
    w
}

/// A member's value as checks.c prints it.
fn value(r: &Reading) -> String {
    match r {
        Reading::Unsigned(v) => v.to_string(),
        Reading::Signed(v) => v.to_string(),
        Reading::Histogram(h) => {
            let b: Vec<String> = h.buckets.iter().map(u64::to_string).collect();
            format!("count={} sum={} buckets={}", h.count, h.sum, b.join(","))
        }
    }
}

/// What `checks dump` prints, from the Rust reader.
fn rust_dump(path: &Path) -> String {
    let mut seg = Segment::open(path).unwrap();
    let s = seg.snapshot().unwrap();
    let mut o = format!("cpus {}\n", s.nr_cpus);
    for f in &s.families {
        let u = f.unit;
        o +=
            &format!(
            "family {} kind={} type={} unit={} units={},{},{},{},{},{},{} dimension={} help={}\n",
            f.name,
            f.kind as u32,
            if f.value_type == ValueType::I64 { "i64" } else { "u64" },
            f.unit_text,
            u.dim_space,
            u.dim_time,
            u.dim_count,
            u.scale_space,
            u.scale_time,
            u.scale_count,
            u.quantity,
            f.dimension,
            f.help
        );
        if let Some(b) = &f.buckets {
            o += " buckets";
            for k in 0..b.count() {
                o += &b.bound(k).map_or(" inf".to_string(), |v| format!(" {v}"));
            }
            o += "\n";
        }
        for m in &f.members {
            let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            o += &format!(
                " member {} id={} labels={}\n",
                m.instance,
                m.instance_id,
                labels.join(",")
            );
            o += &format!("  total={}", value(&s.reading(f, m)));
            for c in 0..s.nr_cpus {
                o += &format!(" cpu{c}={}", value(&s.reading_on(c, f, m)));
            }
            o += "\n";
        }
    }
    for f in &s.families {
        for m in &f.members {
            o += &format!(
                "handle {} {} total={}\n",
                f.name,
                m.instance,
                value(&s.reading(f, m))
            );
            if f.kind != Kind::Histogram {
                o += &format!("counter {} {}", f.name, m.instance);
                for c in 0..s.nr_cpus {
                    o += &format!(" {}", s.words(c, m)[0]);
                }
                o += "\n";
            }
        }
    }
    let d = seg.damon().unwrap();
    for a in &d.aggregations {
        o += &format!(
            "damon monitor={} target={} aggregation={} sample_us={} aggr_us={} regions={}\n",
            a.monitor_id,
            a.target_id,
            a.aggregation,
            a.intervals.sample_us,
            a.intervals.aggr_us,
            a.regions.len()
        );
        for r in &a.regions {
            o += &format!(
                " region {:x}-{:x} accesses={} age={} frequency={:.3}\n",
                r.start,
                r.end,
                r.nr_accesses,
                r.age,
                a.frequency(r)
            );
        }
    }
    o += &format!("busy cpus {}\n", d.busy_cpus.len());
    o
}

/// What the tests of checks.c start from: checks.c compiled against the
/// installed library under the sanitizers, and the segment of
/// [`test_segment`] (with or without a heartbeat) beside it.
struct Checks {
    dir: tempfile::TempDir,
    checks: PathBuf,
    seg: PathBuf,
    _writer: Writer,
}

impl Checks {
    /// `None` (a skip) where the C tools are missing.
    fn new(test: &str, heartbeat: bool) -> Option<Self> {
        if !have_tools(test) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let checks = compile_file(dir.path(), "tests/c/checks.c", Link::Sanitized);
        let seg = dir.path().join("seg");
        let _writer = test_segment(&seg, heartbeat);
        Some(Self {
            dir,
            checks,
            seg,
            _writer,
        })
    }
}

#[test]
fn every_accessor_reads_what_the_rust_reader_reads() {
    let Some(c) = Checks::new("every_accessor_reads_what_the_rust_reader_reads", true) else {
        return;
    };
    let (checks, path) = (&c.checks, &c.seg);
    let f = run(checks, &["dump", path.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let expected = rust_dump(path);
    assert_eq!(f.stdout, expected);
    // The segment holds what the test wrote, so the comparison compared
    // something: every kind, signed values, labels, buckets, regions.
    for needle in [
        "family capi.test kind=1 type=u64 unit=count",
        " member sda id=0 labels=model=virtio,bus=pci",
        "family capi.level kind=2 type=i64",
        "  total=-7 ",
        " buckets 1000 10000 100000 1000000 inf",
        "total=count=5 sum=9080010 buckets=1,2,1,0,1",
        " region 1000-5000 accesses=3 age=2 frequency=0.150",
    ] {
        assert!(expected.contains(needle), "{needle:?} in\n{expected}");
    }
}

/// `CALL code=N name=X message=M` lines of checks.c, by call.
fn calls(out: &str) -> HashMap<String, (i32, String, String)> {
    out.lines()
        .filter_map(|l| {
            let (call, rest) = l.split_once(" code=")?;
            let (code, rest) = rest.split_once(" name=")?;
            let (name, message) = rest.split_once(" message=")?;
            Some((
                call.to_string(),
                (code.parse().ok()?, name.to_string(), message.to_string()),
            ))
        })
        .collect()
}

fn code(e: perfabi_error) -> i32 {
    e as i32
}

#[test]
fn misuse_from_c_is_a_typed_error_never_a_crash() {
    let Some(c) = Checks::new("misuse_from_c_is_a_typed_error_never_a_crash", true) else {
        return;
    };
    let (checks, path) = (&c.checks, &c.seg);
    let f = run(checks, &["misuse", path.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let got = calls(&f.stdout);
    let expect = |call: &str, e: perfabi_error, name: &str, says: &str| {
        let (c, n, m) = got
            .get(call)
            .unwrap_or_else(|| panic!("{call} not in\n{}", f.stdout));
        assert_eq!((*c, n.as_str()), (code(e), name), "{call}: {m}");
        assert!(m.contains(says), "{call}: {m:?} should say {says:?}");
    };
    let invalid = PERFABI_E_INVALID_ARGUMENT;
    for (call, says) in [
        (
            "perfabi_open(NULL, NULL, &seg)",
            "perfabi_open: path is NULL",
        ),
        (
            "perfabi_open(path, NULL, NULL)",
            "perfabi_open: out is NULL",
        ),
        (
            "perfabi_open(\"\\xff\\xfe\", NULL, &seg)",
            "path is not UTF-8",
        ),
        ("perfabi_open(path, &bad, &seg)", "options->trust is 7"),
        ("perfabi_info(NULL, &info)", "perfabi_info: seg is NULL"),
        ("perfabi_refresh(NULL)", "seg is NULL"),
        ("perfabi_snapshot_take(NULL, &snap)", "seg is NULL"),
        (
            "perfabi_counter_lookup(NULL, \"capi.test\", NULL, &h)",
            "seg is NULL",
        ),
        (
            "perfabi_read(NULL, NULL, v, 256, NULL)",
            "perfabi_read: seg is NULL",
        ),
        (
            "perfabi_family_handle_lookup(NULL, \"capi.bytes\", &fh)",
            "seg is NULL",
        ),
        ("perfabi_family_read(NULL, NULL, NULL)", "seg is NULL"),
        ("perfabi_damon_read(NULL, &d)", "seg is NULL"),
        (
            "perfabi_snapshot_u64(NULL, NULL, 0, 0, v)",
            "snapshot is NULL",
        ),
        ("perfabi_family_bucket_bound(NULL, 0, v)", "family is NULL"),
        (
            "perfabi_family_member_label(NULL, 0, 0, &key, &value)",
            "family is NULL",
        ),
        ("perfabi_family_handle_u64(NULL, 0, 0, v)", "h is NULL"),
        ("perfabi_damon_aggregation(NULL, 0, NULL)", "d is NULL"),
        (
            "perfabi_family_name(NULL)",
            "perfabi_family_name: family is NULL",
        ),
        ("perfabi_nr_cpus(NULL)", "perfabi_nr_cpus: seg is NULL"),
        ("perfabi_snapshot_family(NULL, 0)", "snapshot is NULL"),
        (
            "perfabi_read(seg, h, NULL, 256, NULL)",
            "per_cpu_out is NULL",
        ),
        ("perfabi_read(seg, NULL, v, 256, NULL)", "h is NULL"),
        (
            "perfabi_snapshot_u64(snap, bytes, 99, PERFABI_TOTAL, v)",
            "member 99 of family capi.bytes, which has 2",
        ),
        (
            "perfabi_snapshot_u64(snap, bytes, 0, 4096, v)",
            "cpu 4096 of 2",
        ),
        (
            "perfabi_family_bucket_bound(bytes, 0, v)",
            "family capi.bytes has no bucket 0",
        ),
        (
            "perfabi_family_member_instance_id(bytes, 99, &id)",
            "member 99",
        ),
        (
            "perfabi_read(other, h, v, 256, NULL)",
            "looked up on another segment",
        ),
        (
            "perfabi_family_read(other, fh, NULL)",
            "looked up on another segment",
        ),
    ] {
        expect(call, invalid, "invalid-argument", says);
    }
    let nothing = "no metric family named \"capi.nothing\"";
    expect(
        "perfabi_counter_lookup(seg, \"capi.nothing\", NULL, &h)",
        PERFABI_E_NO_SUCH_FAMILY,
        "no-such-family",
        nothing,
    );
    expect(
        "perfabi_family_handle_lookup(seg, \"capi.nothing\", &fh)",
        PERFABI_E_NO_SUCH_FAMILY,
        "no-such-family",
        nothing,
    );
    expect(
        "perfabi_snapshot_find_family(capi.nothing)",
        PERFABI_E_NO_SUCH_FAMILY,
        "no-such-family",
        nothing,
    );
    expect(
        "perfabi_counter_lookup(seg, \"capi.bytes\", \"sdz\", &h)",
        PERFABI_E_NO_SUCH_COUNTER,
        "no-such-counter",
        "capi.bytes{device=sdz}",
    );
    expect(
        "perfabi_family_find_member(bytes, \"sdz\", &k)",
        PERFABI_E_NO_SUCH_COUNTER,
        "no-such-counter",
        "sdz",
    );
    expect(
        "perfabi_counter_lookup(seg, \"capi.latency\", \"get\", &h)",
        PERFABI_E_WRONG_TYPE,
        "wrong-type",
        "perfabi_family_handle_lookup",
    );
    expect(
        "perfabi_snapshot_i64(snap, bytes, 0, PERFABI_TOTAL, &i64)",
        PERFABI_E_WRONG_TYPE,
        "wrong-type",
        "read it as u64",
    );
    expect(
        "perfabi_snapshot_u64(snap, lat, 0, PERFABI_TOTAL, v)",
        PERFABI_E_WRONG_TYPE,
        "wrong-type",
        "histogram",
    );
    expect(
        "perfabi_family_handle_u64(fh, 0, PERFABI_TOTAL, v)",
        PERFABI_E_NOT_READ,
        "not-read",
        "not read yet",
    );
    expect(
        "perfabi_read(seg, h, v, 0, NULL)",
        PERFABI_E_BUFFER_TOO_SMALL,
        "buffer-too-small",
        "per_cpu_out holds 0 values; 2 are needed",
    );
    expect(
        "perfabi_snapshot_histogram(snap, lat, 0, PERFABI_TOTAL, &hist, v, 2)",
        PERFABI_E_BUFFER_TOO_SMALL,
        "buffer-too-small",
        "buckets holds 2 values; 5 are needed",
    );
    assert!(f.stdout.contains("needed buckets 5\n"), "{}", f.stdout);
    for ok in [
        "perfabi_counter_lookup(seg, \"capi.test\", NULL, &h)",
        "perfabi_snapshot_take(seg, &snap)",
        "perfabi_family_handle_lookup(seg, \"capi.bytes\", &fh)",
    ] {
        expect(ok, PERFABI_OK, "", "");
    }
}

/// `checks open PATH`: the code, code string and message perfabi_open
/// gave, after checking that it cleared its result.
fn open_from_c(checks: &Path, path: &Path) -> (i32, String, String) {
    let f = run(checks, &["open", path.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    assert!(f.stdout.contains("\nseg NULL\n"), "{}", f.stdout);
    let (_, (c, n, m)) = calls(&f.stdout).into_iter().next().expect("a result");
    let strerror = f
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("strerror "))
        .unwrap()
        .to_string();
    assert!(
        !strerror.is_empty() && strerror != "unknown error code",
        "{strerror}"
    );
    (c, n, format!("{m} / {strerror}"))
}

/// Spec §5.1: a histogram whose count is not its buckets' sum in a
/// consistent copy (the test adds 1 to CPU 1's count of `capi.latency`
/// `put` behind the writer) is refused from C as from Rust: the snapshot
/// fails, its code string `bad-histogram`, its message the reader's.
#[test]
fn a_histogram_whose_count_is_not_its_buckets_sum_is_refused_from_c() {
    let Some(c) = Checks::new(
        "a_histogram_whose_count_is_not_its_buckets_sum_is_refused_from_c",
        true,
    ) else {
        return;
    };
    let (checks, path) = (&c.checks, &c.seg);
    let f = Segment::open(path).unwrap().family("capi.latency").unwrap();
    let put = f.member("put").unwrap();
    add_to_value(path, 1, u64::from(put.value_slot), 1);
    let out = run(checks, &["dump", path.to_str().unwrap()]);
    assert_sanitizers_quiet(&out);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    let want = format!(
        "checks: snapshot: bad segment: member slot {}: histogram count is not the sum of its buckets in CPU 1's consistent copy",
        put.slot.unwrap()
    );
    assert!(out.stderr.starts_with(&want), "{}", out.stderr);
    assert!(
        out.stderr.trim_end().ends_with("[bad-histogram]"),
        "{}",
        out.stderr
    );
}

#[test]
fn opening_bad_paths_from_c_gives_the_readers_codes() {
    let Some(c) = Checks::new("opening_bad_paths_from_c_gives_the_readers_codes", true) else {
        return;
    };
    let (dir, checks, seg) = (c.dir.path(), &c.checks, &c.seg);

    let missing = dir.join("missing.seg");
    let (c, n, m) = open_from_c(checks, &missing);
    assert_eq!(
        (c, n.as_str()),
        (code(PERFABI_E_NOT_FOUND), "not-found"),
        "{m}"
    );
    assert!(
        m.contains(&format!("no segment at {}", missing.display())),
        "{m}"
    );

    let link = dir.join("link.seg");
    std::os::unix::fs::symlink(seg, &link).unwrap();
    let (c, n, m) = open_from_c(checks, &link);
    assert_eq!((c, n.as_str()), (code(PERFABI_E_SYMLINK), "symlink"), "{m}");
    assert!(m.contains(&link.display().to_string()), "{m}");

    let unknown = dir.join("unknown_major.seg");
    std::fs::copy(
        Path::new(CRATE).join("../../spec/vectors/unknown_major.bin"),
        &unknown,
    )
    .unwrap();
    let (c, n, m) = open_from_c(checks, &unknown);
    assert_eq!(
        (c, n.as_str()),
        (code(PERFABI_E_UNSUPPORTED_MAJOR), "unsupported-major"),
        "{m}"
    );
    assert!(m.contains("ABI major version 2 is not supported"), "{m}");

    // A segment file cut short before it is opened.
    let short = dir.join("short.seg");
    std::fs::copy(seg, &short).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&short)
        .unwrap()
        .set_len(300)
        .unwrap();
    let (c, n, m) = open_from_c(checks, &short);
    assert!(
        [
            code(PERFABI_E_NOT_A_SEGMENT_FILE),
            code(PERFABI_E_MALFORMED)
        ]
        .contains(&c),
        "{c} {n}: {m}"
    );

    // An empty path says so (it said "cannot use : names a folder, not a
    // file").
    let (c, n, m) = open_from_c(checks, Path::new(""));
    assert_eq!((c, n.as_str()), (code(PERFABI_E_IO), "io"), "{m}");
    assert!(m.starts_with("the path is empty: name a file /"), "{m}");

    // A sysfs attribute: 4096 bytes by its size, a line by its content (it
    // said "failed to fill whole buffer").
    let sysfs = Path::new(SYSFS_FILE);
    let (c, n, m) = open_from_c(checks, sysfs);
    assert_eq!(
        (c, n.as_str()),
        (code(PERFABI_E_NOT_A_SEGMENT_FILE), "not-a-segment-file"),
        "{m}"
    );
    assert!(m.contains("holding fewer bytes than its size says"), "{m}");
}

/// A sysfs file every Linux has: its size says a page, it holds one line.
const SYSFS_FILE: &str = "/sys/devices/system/cpu/online";

/// A call that fails once its thread's thread-local storage is gone — in
/// a pthread key's destructor, in an atexit() handler — returns its code
/// and keeps no last error (the getters say `PERFABI_OK`, ""): it does not
/// abort the program, as it did when the last error was reached with
/// `LocalKey::with` (a panic outside `catch_unwind`, in an `extern "C"`
/// function).
#[test]
fn a_call_failing_while_a_thread_or_the_program_ends_returns_its_code() {
    if !have_tools("a_call_failing_while_a_thread_or_the_program_ends_returns_its_code") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_file(dir.path(), "tests/c/at_exit.c", Link::Sanitized);
    let missing = dir.path().join("missing.seg");
    let f = run(&exe, &[missing.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let nf = code(PERFABI_E_NOT_FOUND);
    let kept = format!(
        "last={nf} name=\"not-found\" message=\"no segment at {}: is the exporter running?\"",
        missing.display()
    );
    let gone = format!("last={} name=\"\" message=\"\"", code(PERFABI_OK));
    let expected: String = [
        ("main", &kept),
        ("thread", &kept),
        ("thread-key-destructor", &gone),
        ("atexit", &gone),
    ]
    .iter()
    .map(|(when, last)| format!("{when} open={nf} seg=NULL {last}\n"))
    .collect();
    assert_eq!(f.stdout, expected, "{}", f.stderr);
}

#[test]
fn truncating_the_segment_under_a_c_reader_is_an_error_not_a_crash() {
    // No heartbeat thread: nothing repairs the segment while the test
    // looks at what the reader makes of it.
    let Some(c) = Checks::new(
        "truncating_the_segment_under_a_c_reader_is_an_error_not_a_crash",
        false,
    ) else {
        return;
    };
    let (checks, path) = (&c.checks, &c.seg);
    let mut child = Stepped::start(checks, &["truncate", path.to_str().unwrap()]);
    let seen = child.until_ready();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    child.go();
    let rest = child.finish();
    let before = calls(&seen);
    assert_eq!(
        before.values().next().map(|v| v.0),
        Some(code(PERFABI_OK)),
        "{seen}"
    );
    let after = calls(&rest);
    // The read that ran into the truncation: its data discarded.
    let (c, n, m) = &after["perfabi_read(seg, h, v, 256, NULL)"];
    assert_eq!(
        (*c, n.as_str()),
        (
            code(PERFABI_E_TRUNCATED_WHILE_MAPPED),
            "truncated-while-mapped"
        ),
        "{m}"
    );
    assert!(m.contains(&path.display().to_string()), "{m}");
    // The next call maps the file again and finds it too short for its
    // segment: refused, not read.
    let (c, n, m) = &after["perfabi_snapshot_take(seg, &snap)"];
    let refused = [
        PERFABI_E_TRUNCATED_WHILE_MAPPED,
        PERFABI_E_HEADER_CHANGED,
        PERFABI_E_NOT_A_SEGMENT_FILE,
        PERFABI_E_MALFORMED,
    ];
    assert!(refused.iter().any(|&e| code(e) == *c), "{c} {n}: {m}");
}

/// A family handle whose read failed holds no values: its accessors fail
/// with `PERFABI_E_NOT_READ` until its next successful read, and its info
/// stays that of the last one. They answered `PERFABI_OK` with what the
/// failed read left: once the family was deleted and another family's
/// member took its value slot, member 0 of `capi.reread` read 999999, the
/// other family's value.
#[test]
fn a_family_handle_whose_read_failed_gives_no_values() {
    let Some(c) = Checks::new("a_family_handle_whose_read_failed_gives_no_values", false) else {
        return;
    };
    let path = c.dir.path().join("reread.seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(2),
            max_families: 4,
            max_members: 8,
            damon_capacity: 0,
            heartbeat_interval: Duration::ZERO,
            auto_heartbeat: false,
            ..Config::default()
        },
    )
    .unwrap();
    let spec = |name| FamilySpec::new(name, "", "k", Kind::Counter, Unit::NONE);
    let fam = w.add_family(&spec("capi.reread")).unwrap();
    let x = w.add_member(fam, "x", &[]).unwrap();
    w.member_add(&x, 111).unwrap();
    let mut child = Stepped::start(&c.checks, &["reread", path.to_str().unwrap()]);
    let mut steps = vec![child.until_ready()];
    let mut step = |child: &mut Stepped| {
        child.go();
        steps.push(child.until_ready());
    };
    // Read.
    step(&mut child);
    // CPU 0's block left mid-update (an odd sequence): busy.
    let seq = (w.layout().cpu_block_word(0) * 8) as u64;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut idle = [0u8; 8];
    file.read_exact_at(&mut idle, seq).unwrap();
    let busy = u64::from_ne_bytes(idle) | 1;
    file.write_all_at(&busy.to_ne_bytes(), seq).unwrap();
    step(&mut child);
    // Idle again: read.
    file.write_all_at(&idle, seq).unwrap();
    step(&mut child);
    // The family deleted, and another's member in its value slot.
    w.del_family(fam).unwrap();
    let other = w.add_family(&spec("capi.other")).unwrap();
    let y = w.add_member(other, "y", &[]).unwrap();
    w.member_add(&y, 999_999).unwrap();
    assert_eq!(y.value_slot(), x.value_slot(), "y took x's slot");
    step(&mut child);
    assert_eq!(child.finish(), "");

    let read = "perfabi_family_read(seg, fh, NULL)";
    let accessors = [
        "perfabi_family_handle_u64(fh, 0, PERFABI_TOTAL, &u)",
        "perfabi_family_handle_u64(fh, 0, 0, &u)",
        "perfabi_family_handle_i64(fh, 0, PERFABI_TOTAL, &i)",
        "perfabi_family_handle_histogram(fh, 0, PERFABI_TOTAL, &hist, b, 64)",
    ];
    let none = [PERFABI_E_NOT_READ; 4];
    let values = [
        PERFABI_OK,
        PERFABI_OK,
        PERFABI_E_WRONG_TYPE,
        PERFABI_E_WRONG_TYPE,
    ];
    // Each step: its read's code, and its accessors'.
    let expected = [
        (None, none),
        (Some(PERFABI_OK), values),
        (Some(PERFABI_E_BUSY), none),
        (Some(PERFABI_OK), values),
        (Some(PERFABI_E_UNKNOWN_INSTANCE), none),
    ];
    assert_eq!(steps.len(), expected.len());
    for (k, (out, (read_code, codes))) in steps.iter().zip(expected).enumerate() {
        let got = calls(out);
        assert_eq!(
            got.get(read).map(|c| c.0),
            read_code.map(code),
            "step {k}:\n{out}"
        );
        let got_codes: Vec<i32> = accessors.iter().map(|a| got[*a].0).collect();
        assert_eq!(got_codes, codes.map(code), "step {k}:\n{out}");
        let total = out.lines().find_map(|l| l.strip_prefix("total "));
        let want = (codes == values).then_some("111");
        assert_eq!(total, want, "step {k}:\n{out}");
        assert!(out.ends_with("info capi.reread x\n"), "step {k}:\n{out}");
        if codes == none {
            let (_, name, message) = &got[accessors[0]];
            assert_eq!(name, "not-read", "step {k}");
            assert!(message.contains("not read yet, or its last"), "{message}");
        }
    }
}

/// Every file and folder below `dir`, as paths relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut all = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            all.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                todo.push(p);
            }
        }
    }
    all.sort();
    all
}

/// `make install` builds nothing (`make && sudo make install` must not run
/// Cargo as root): without a build it says to run `make` first and writes
/// nothing. It quotes its paths: a DESTDIR and a PREFIX with blanks, `&`
/// and `|` get the files, and only them (the shell took `&` and `|`, and
/// the blanks split paths, leaving folders all about), and `make
/// uninstall` removes them.
#[test]
fn make_install_builds_nothing_and_quotes_its_paths() {
    if !have_tools("make_install_builds_nothing_and_quotes_its_paths") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("target");
    std::fs::create_dir(&empty).unwrap();
    let root = dir.path().join("stage dir&x|y");
    let vars = [
        format!("DESTDIR={}", root.display()),
        "PREFIX=/opt/my prefix&co".to_string(),
    ];
    let args = |target: &str| [&[target.to_string()], &vars[..]].concat();
    // Were it to build, Cargo would fail at once (not build for minutes).
    let f = make(
        &[args("install"), vec!["CARGO=false".into()]].concat(),
        &empty,
    );
    assert_ne!(f.code(), Some(0), "{}", f.stdout);
    let missing = format!("{}/release/libperfabi_c.so is missing", empty.display());
    assert!(f.stderr.contains(&missing), "{}", f.stderr);
    assert!(f.stderr.contains("run make first"), "{}", f.stderr);
    assert_eq!(tree(dir.path()), ["target"], "nothing built or installed");

    prefix(); // built
    make_ok(&args("install"), &workspace::target_dir());
    let at = "stage dir&x|y/opt/my prefix&co";
    let files = [
        "include/perfabi.h",
        "lib/libperfabi.a",
        "lib/libperfabi.so",
        "lib/libperfabi.so.0",
        "lib/pkgconfig/perfabi.pc",
    ];
    let folders = ["", "/include", "/lib", "/lib/pkgconfig"];
    let mut expected: Vec<String> = ["target", "stage dir&x|y", "stage dir&x|y/opt"]
        .iter()
        .map(|d| d.to_string())
        .chain(folders.iter().map(|d| format!("{at}{d}")))
        .chain(files.iter().map(|f| format!("{at}/{f}")))
        .collect();
    expected.sort();
    assert_eq!(tree(dir.path()), expected);
    let pc = std::fs::read_to_string(dir.path().join(at).join("lib/pkgconfig/perfabi.pc")).unwrap();
    assert!(pc.starts_with("prefix=/opt/my\\ prefix&co\n"), "{pc}");

    make_ok(&args("uninstall"), &workspace::target_dir());
    let folders_only: Vec<String> = expected
        .into_iter()
        .filter(|p| !files.iter().any(|f| p.ends_with(f)))
        .collect();
    assert_eq!(
        tree(dir.path()),
        folders_only,
        "make uninstall removed the files"
    );
}

// The writer for C: tests/c/writer_checks.c writes from C, under the
// sanitizers, and reads back with libperfabi's reader; the Rust reader
// reads the same segment here.

/// writer_checks.c compiled against the installed library under ASan and
/// UBSan, in a folder that also holds the segment directory `dir`; `None`
/// (a skip) where the C tools are missing.
fn writer_checks(test: &str) -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    if !have_tools(test) {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let exe = compile_file(tmp.path(), "tests/c/writer_checks.c", Link::Sanitized);
    let dir = tmp.path().join("segments");
    Some((tmp, exe, dir))
}

/// The total of member `instance` of family `name` in `s`.
fn total(s: &perfabi_reader::Snapshot, name: &str, instance: &str) -> Reading {
    let f = s
        .families
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no family {name}"));
    let m = f
        .members
        .iter()
        .find(|m| m.instance == instance)
        .unwrap_or_else(|| panic!("no member {name}{{{instance}}}"));
    s.reading(f, m)
}

#[test]
fn a_c_writer_writes_every_kind_and_both_readers_read_it_exactly() {
    let test = "a_c_writer_writes_every_kind_and_both_readers_read_it_exactly";
    let Some((_tmp, exe, dir)) = writer_checks(test) else {
        return;
    };
    let mut c = Stepped::start(&exe, &["write", dir.to_str().unwrap()]);
    let before = c.until_ready();
    assert!(!before.contains("MISMATCH"), "the C reader read:\n{before}");
    let path = before
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no path in {before}"));
    // A directory's segment, under the writer's name.
    assert_eq!(path.parent(), Some(dir.as_path()));
    let file = path.file_name().unwrap().to_str().unwrap();
    assert!(
        file.starts_with(&format!("cwriter.{}.", c.child.id())) && file.ends_with(".perfabi"),
        "{file}"
    );

    let mut seg = Segment::open(&path).unwrap();
    let (_, liveness) = seg.status().unwrap();
    assert_eq!(liveness, perfabi_reader::Liveness::Alive);
    let s = seg.snapshot().unwrap();
    assert_eq!(s.nr_cpus, 4);
    let u = |v| Reading::Unsigned(v);
    assert_eq!(total(&s, "app.requests", "200"), u(13));
    assert_eq!(total(&s, "app.requests", "500"), u(2));
    assert_eq!(total(&s, "app.bytes", ""), u(8192));
    assert_eq!(total(&s, "app.inflight", "a"), Reading::Signed(-2));
    assert_eq!(total(&s, "app.queue_peak", "q1"), u(9));
    assert_eq!(total(&s, "app.queue_peak", "q2"), u(0));
    let Reading::Histogram(h) = total(&s, "app.latency", "") else {
        panic!("app.latency is no histogram")
    };
    assert_eq!(
        (h.count, h.sum, h.buckets.as_slice()),
        (4, 1000 + 2000 + 5000 + (1 << 20), &[1, 1, 0, 2][..])
    );
    let Reading::Histogram(h) = total(&s, "app.size", "") else {
        panic!("app.size is no histogram")
    };
    assert_eq!(
        (h.count, h.sum, h.buckets.as_slice()),
        (4, 5555, &[1, 1, 1, 1][..])
    );
    // The metadata is the spec's, field by field.
    let fam = |n: &str| s.families.iter().find(|f| f.name == n).unwrap();
    let req = fam("app.requests");
    assert_eq!(
        (req.kind, req.help.as_str(), req.dimension.as_str()),
        (Kind::Counter, "Requests served", "code")
    );
    let ok = req.members.iter().find(|m| m.instance == "200").unwrap();
    assert_eq!(ok.labels, vec![("method".to_string(), "GET".to_string())]);
    assert_eq!(fam("app.bytes").unit, Unit::BYTES);
    let inflight = fam("app.inflight");
    assert_eq!(
        (inflight.kind, inflight.value_type, inflight.gauge_mode),
        (Kind::Gauge, ValueType::I64, perfabi::GaugeMode::Max)
    );
    assert_eq!(fam("app.queue_peak").kind, Kind::Peak);
    let lat = fam("app.latency");
    assert_eq!(lat.unit, Unit::NS);
    assert_eq!(lat.buckets, Some(Buckets::Log2 { first: 10, n: 4 }));
    assert_eq!(
        fam("app.size").buckets,
        Some(Buckets::Explicit(vec![10, 100, 1000]))
    );

    c.go();
    let after = c.finish();
    assert!(after.contains("done failures=0"), "{after}");
    let got = calls(&after);
    let expect = |call: &str, e: perfabi_error, name: &str| {
        let (code, n, m) = got
            .get(call)
            .unwrap_or_else(|| panic!("{call} not in\n{after}"));
        assert_eq!((*code, n.as_str()), (self::code(e), name), "{call}: {m}");
        assert!(
            m.starts_with(call.split('(').next().unwrap()),
            "{call}: {m}"
        );
    };
    expect(
        "perfabi_member_add(err, 1)",
        PERFABI_E_UNKNOWN_INSTANCE,
        "unknown-instance",
    );
    expect(
        "perfabi_member_delete(err)",
        PERFABI_E_UNKNOWN_INSTANCE,
        "unknown-instance",
    );
    expect(
        "perfabi_member_peak(q1, 1)",
        PERFABI_E_UNKNOWN_INSTANCE,
        "unknown-instance",
    );
    expect(
        "perfabi_writer_family_add_member(peak, \"q3\", NULL, 0, &q3)",
        PERFABI_E_UNKNOWN_INSTANCE,
        "unknown-instance",
    );
    // Every handle freed: the segment is closed, its values final (the
    // add after perfabi_writer_close() counted).
    let mut seg = Segment::open(&path).unwrap();
    assert!(
        matches!(seg.status(), Err(perfabi_reader::Error::Closed)),
        "{:?}",
        seg.status()
    );
    let opts = perfabi_reader::Options {
        require_live: false,
        ..Default::default()
    };
    let s = Segment::open_with(&path, opts).unwrap().snapshot().unwrap();
    assert_eq!(total(&s, "app.requests", "200"), u(14));
}

#[test]
fn misuse_of_the_c_writer_is_a_typed_error_never_a_crash() {
    let test = "misuse_of_the_c_writer_is_a_typed_error_never_a_crash";
    let Some((_tmp, exe, dir)) = writer_checks(test) else {
        return;
    };
    std::fs::create_dir(&dir).unwrap();
    let f = run(&exe, &["misuse", dir.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let got = calls(&f.stdout);
    let expect = |call: &str, e: perfabi_error, name: &str, says: &str| {
        let (c, n, m) = got
            .get(call)
            .unwrap_or_else(|| panic!("{call} not in\n{}", f.stdout));
        assert_eq!((*c, n.as_str()), (code(e), name), "{call}: {m}");
        assert!(m.contains(says), "{call}: {m:?} should say {says:?}");
    };
    let invalid =
        |call: &str, says: &str| expect(call, PERFABI_E_INVALID_ARGUMENT, "invalid-argument", says);
    invalid(
        "perfabi_writer_create(NULL, NULL, &w)",
        "perfabi_writer_create: path is NULL",
    );
    invalid(
        "perfabi_writer_create(\"/dev/shm/x\", NULL, NULL)",
        "perfabi_writer_create: out is NULL",
    );
    invalid(
        "perfabi_writer_create(\"\\xff\\xfe\", NULL, &w)",
        "path is not UTF-8",
    );
    expect(
        "perfabi_writer_create(dir, NULL, &w)",
        PERFABI_E_IO,
        "io",
        "is a directory",
    );
    expect(
        "perfabi_writer_create(path, NULL, &w)",
        PERFABI_E_IO,
        "io",
        "/no/such/folder/seg: No such file or directory",
    );
    expect(
        "perfabi_writer_create(path, &bad, &w)",
        PERFABI_E_BAD_CONFIG,
        "bad-cpu-count",
        "invalid CPU count 100000",
    );
    invalid(
        "perfabi_writer_create_in(dir, NULL, NULL, &w)",
        "name is NULL",
    );
    for call in [
        "perfabi_writer_create_in(dir, \"no/slash\", NULL, &w)",
        "perfabi_writer_create_in(dir, \"\", NULL, &w)",
        "perfabi_writer_create_in(dir, \"a-name-longer-than-sixty-four-bytes-is-refused-by-the-writer-xxxxx\", NULL, &w)",
    ] {
        expect(
            call,
            PERFABI_E_BAD_NAME,
            "bad-name",
            "ASCII letters, digits, '_' or '-'",
        );
    }
    invalid(
        "perfabi_writer_create_in(\"\\xff\", \"w\", NULL, &w)",
        "dir is not UTF-8",
    );
    invalid(
        "perfabi_writer_create_in(dir, \"w\", NULL, NULL)",
        "out is NULL",
    );
    expect(
        "perfabi_writer_create_in(dir, \"w\", &small, &w)",
        PERFABI_OK,
        "",
        "",
    );
    assert!(f.stdout.contains("perfabi_writer_path(NULL) NULL\n"));
    let at = dir.join("at-path.seg");
    assert!(
        f.stdout
            .contains(&format!("at-path {} total 5\n", at.display())),
        "{}",
        f.stdout
    );
    assert!(at.is_file(), "the segment is where it was asked to be");

    invalid("perfabi_writer_add_family(NULL, &counter, &f)", "w is NULL");
    invalid("perfabi_writer_add_family(w, NULL, &f)", "spec is NULL");
    invalid(
        "perfabi_writer_add_family(w, &counter, NULL)",
        "out is NULL",
    );
    for (call, e, name, says) in [
        (
            "spec name NULL",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->name is NULL",
        ),
        (
            "spec name bad",
            PERFABI_E_BAD_NAME,
            "bad-name",
            "family bad name!",
        ),
        (
            "spec name long",
            PERFABI_E_BAD_NAME,
            "bad-name",
            "sixty.three",
        ),
        (
            "spec name not UTF-8",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->name is not UTF-8",
        ),
        (
            "spec help bad",
            PERFABI_E_BAD_NAME,
            "bad-help",
            "family m.count",
        ),
        (
            "spec dimension bad",
            PERFABI_E_BAD_NAME,
            "bad-label-key",
            "family m.count",
        ),
        (
            "spec kind 9",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->kind 9",
        ),
        (
            "spec kind 0",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->kind 0",
        ),
        (
            "spec gauge_mode 7",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->gauge_mode 7",
        ),
        (
            "spec value_type 5",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->value_type 5",
        ),
        (
            "spec buckets 9",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->buckets 9",
        ),
        (
            "spec counter with a gauge mode",
            PERFABI_E_WRONG_KIND,
            "wrong-kind",
            "family m.count",
        ),
        (
            "spec counter with buckets",
            PERFABI_E_WRONG_KIND,
            "wrong-kind",
            "family m.count",
        ),
        (
            "spec unit bad",
            PERFABI_E_BAD_NAME,
            "bad-unit",
            "family m.count",
        ),
        (
            "spec histogram without buckets",
            PERFABI_E_WRONG_KIND,
            "wrong-kind",
            "family m.hist",
        ),
        (
            "spec bounds NULL",
            PERFABI_E_INVALID_ARGUMENT,
            "invalid-argument",
            "spec->bounds is NULL",
        ),
        (
            "spec bounds too many",
            PERFABI_E_BAD_NAME,
            "bad-buckets",
            "family m.hist",
        ),
        (
            "spec bounds none",
            PERFABI_E_BAD_NAME,
            "bad-buckets",
            "family m.hist",
        ),
        (
            "spec bounds decreasing",
            PERFABI_E_BAD_NAME,
            "bad-buckets",
            "family m.hist",
        ),
        (
            "spec log2 one bucket",
            PERFABI_E_BAD_NAME,
            "bad-buckets",
            "family m.hist",
        ),
        (
            "spec signed peak",
            PERFABI_E_WRONG_KIND,
            "wrong-kind",
            "family m.peak",
        ),
        (
            "family again",
            PERFABI_E_DUPLICATE,
            "duplicate-name",
            "family m.count",
        ),
        (
            "family under a family",
            PERFABI_E_DUPLICATE,
            "duplicate-name",
            "family m.count.sub",
        ),
        (
            "family table full",
            PERFABI_E_TABLE_FULL,
            "no-family-room",
            "family m.other",
        ),
    ] {
        expect(call, e, name, says);
        assert!(
            got[call].2.starts_with("perfabi_writer_add_family: "),
            "{call}: {}",
            got[call].2
        );
    }

    let member = |args: &str| format!("perfabi_writer_family_add_member({args})");
    invalid(&member("NULL, \"a\", NULL, 0, &m"), "f is NULL");
    invalid(&member("f, \"a\", NULL, 0, NULL"), "out is NULL");
    invalid(
        &member("f, \"\\xff\", NULL, 0, &m"),
        "instance is not UTF-8",
    );
    invalid(&member("f, \"a\", NULL, 1, &m"), "labels is NULL");
    invalid(&member("f, \"a\", nul, 1, &m"), "a label's key is NULL");
    for (args, e, name) in [
        ("f, NULL, NULL, 0, &m", PERFABI_E_BAD_NAME, "bad-instance"),
        ("f, \"a\", labels, 5, &m", PERFABI_E_BAD_NAME, "bad-labels"),
        (
            "f, \"a\", labels, (size_t)1 << 40, &m",
            PERFABI_E_BAD_NAME,
            "bad-labels",
        ),
        (
            "f, \"a\", badkey, 1, &m",
            PERFABI_E_BAD_NAME,
            "bad-label-key",
        ),
        ("f, \"a\", dup, 1, &m", PERFABI_E_BAD_NAME, "bad-labels"),
        (
            "f, \"b\", NULL, 0, &n",
            PERFABI_E_TABLE_FULL,
            "no-family-room",
        ),
    ] {
        expect(&member(args), e, name, "family m.count instance");
    }
    expect(
        "member again",
        PERFABI_E_DUPLICATE,
        "duplicate-instance",
        "instance \"a\"",
    );

    for call in [
        "perfabi_member_add(NULL, 1)",
        "perfabi_member_set(NULL, 1)",
        "perfabi_member_observe(NULL, 1)",
        "perfabi_member_peak(NULL, 1)",
        "perfabi_member_reset_peak(NULL)",
        "perfabi_member_delete(NULL)",
    ] {
        invalid(call, "m is NULL");
    }
    invalid("perfabi_writer_family_delete(NULL)", "f is NULL");
    for call in [
        "perfabi_member_set(m, 1)",
        "perfabi_member_observe(m, 1)",
        "perfabi_member_peak(m, 1)",
        "perfabi_member_reset_peak(m)",
    ] {
        expect(
            call,
            PERFABI_E_WRONG_KIND,
            "wrong-kind",
            call.split('(').next().unwrap(),
        );
    }
    expect("add live", PERFABI_OK, "", "");
    for call in [
        "perfabi_writer_family_delete(f)",
        "add deleted",
        "perfabi_member_delete(m)",
    ] {
        expect(call, PERFABI_E_UNKNOWN_INSTANCE, "unknown-instance", "");
    }
    assert!(
        f.stdout.contains(&format!(
            "strerror {} the segment has no room left",
            code(PERFABI_E_TABLE_FULL)
        )),
        "{}",
        f.stdout
    );
}

/// The README's "Writing from C" example, this very text, compiled
/// against the installed library under the sanitizers and run as the
/// README says: its segment lands in the segment directory, the Rust
/// reader reads its values exactly, and `perfabi-cat` shows them.
#[test]
fn readme_writer_example_writes_what_perfabi_cat_shows() {
    let test = "readme_writer_example_writes_what_perfabi_cat_shows";
    if !have_tools(test) {
        return;
    }
    let src = readme::example("reader/capi/examples/writer.c");
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "writer", &src, Link::Sanitized);
    let segments = dir.path().join("perfabi");
    let mut child = start_writer_example(&exe, &segments);
    let path = check_writer_example(&mut child, &segments);
    let out = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .arg("--openmetrics")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "perfabi_myapp_requests_total{code=\"200\"} 1000",
        "perfabi_myapp_latency_count 1000",
        "# HELP perfabi_myapp_latency Request latency (unit: ns)",
    ] {
        assert!(text.lines().any(|l| l == want), "{want:?} in {text}");
    }
    end_writer_example(child);
}

/// The writer example linked statically (the archive and perfabi.pc's
/// Libs.private): it needs no libperfabi at run time and writes the same.
#[test]
fn writer_example_linked_statically_writes_the_same() {
    if !have_tools("writer_example_linked_statically_writes_the_same") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_file(dir.path(), "examples/writer.c", Link::Static);
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(!dynamic.contains("libperfabi"), "{dynamic}");
    let segments = dir.path().join("perfabi");
    let mut child = start_writer_example(&exe, &segments);
    check_writer_example(&mut child, &segments);
    end_writer_example(child);
}

/// The compiled writer example `exe` started with `$PERFABI_DIR` at
/// `segments`, its stdin and stdout piped.
fn start_writer_example(exe: &Path, segments: &Path) -> std::process::Child {
    c_program(exe, &[])
        .env("PERFABI_DIR", segments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The path the running writer example prints (within [`LIMIT`]), in
/// `segments`, after checking the values there with the Rust reader.
fn check_writer_example(child: &mut std::process::Child, segments: &Path) -> PathBuf {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(LIMIT)
        .expect("the example prints its segment's path");
    let path = PathBuf::from(line.trim_end());
    assert_eq!(path.parent(), Some(segments), "$PERFABI_DIR");
    let s = Segment::open(&path).unwrap().snapshot().unwrap();
    assert_eq!(total(&s, "myapp.requests", "200"), Reading::Unsigned(1000));
    let Reading::Histogram(h) = total(&s, "myapp.latency", "") else {
        panic!("myapp.latency is no histogram")
    };
    // 50,000 + 100 i ns for i < 1000.
    assert_eq!(
        (h.count, h.sum),
        (1000, 50_000 * 1000 + 100 * 999 * 1000 / 2)
    );
    path
}

/// Ends the writer example (Enter) and checks that it succeeded with the
/// sanitizers quiet.
fn end_writer_example(mut child: std::process::Child) {
    drop(child.stdin.take());
    let mut f = Finished {
        status: None,
        max_rss_kib: 0,
        elapsed: Duration::ZERO,
        stdout: String::new(),
        stderr: String::new(),
    };
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut f.stderr)
        .unwrap();
    f.status = Some(child.wait().unwrap());
    assert_eq!(f.code(), Some(0), "{}", f.stderr);
    assert_sanitizers_quiet(&f);
}

/// Label series from C (`spec/PERFABI.md` §9.2): perfabi_series_instance()
/// gives the instance the Python and `metrics` writers give (one rule), so
/// values with commas make members of their own; the Rust reader reads
/// each with its labels; misuse is a typed error that writes nothing,
/// under ASan and UBSan.
#[test]
fn c_label_series_use_the_writers_one_rule() {
    let test = "c_label_series_use_the_writers_one_rule";
    let Some((_tmp, exe, dir)) = writer_checks(test) else {
        return;
    };
    let f = run(&exe, &["series", dir.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let rows = [
        ("x,y", "z"),
        ("x", "y,z"),
        ("50%", "a b"),
        (&*"v".repeat(40), &*"w".repeat(40)),
    ];
    let printed: Vec<&str> = f
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("instance "))
        .collect();
    let want: Vec<String> = rows
        .iter()
        .map(|(a, b)| perfabi_shm::writer::series_instance([*a, *b]))
        .collect();
    assert_eq!(printed, want);
    assert_eq!(&want[..3], ["x%2Cy,z", "x,y%2Cz", "50%25,a%20b"]);
    let got = calls(&f.stdout);
    for (call, says) in [
        (
            "perfabi_series_instance(one, 1, small, sizeof small)",
            "1 values",
        ),
        (
            "perfabi_series_instance(rows[0], 5, small, sizeof small)",
            "5 values",
        ),
        (
            "perfabi_series_instance(nulls, 2, small, sizeof small)",
            "a value is NULL",
        ),
        (
            "perfabi_series_instance(NULL, 2, small, sizeof small)",
            "values is NULL",
        ),
        (
            "perfabi_series_instance(rows[0], 2, NULL, 64)",
            "out is NULL",
        ),
        (
            "perfabi_series_instance(rows[0], 2, small, sizeof small)",
            "needs 8 bytes",
        ),
    ] {
        let (c, n, m) = got
            .get(call)
            .unwrap_or_else(|| panic!("{call} not in\n{}", f.stdout));
        assert_eq!(
            (*c, n.as_str()),
            (code(PERFABI_E_INVALID_ARGUMENT), "invalid-argument"),
            "{call}: {m}"
        );
        assert!(m.contains(says), "{call}: {m:?} should say {says:?}");
    }
    assert!(f.stdout.contains("done failures=0"), "{}", f.stdout);
    let path = f
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .map(PathBuf::from)
        .unwrap();
    let mut seg = Segment::open_with(
        &path,
        perfabi_reader::Options {
            require_live: false,
            ..perfabi_reader::Options::default()
        },
    )
    .unwrap();
    let snap = seg.snapshot().unwrap();
    let fam = snap.family("app.hits").unwrap();
    for (k, ((a, b), instance)) in rows.iter().zip(&want).enumerate() {
        let m = fam.member(instance).unwrap();
        assert_eq!(
            m.labels,
            [
                ("a".to_string(), a.to_string()),
                ("b".to_string(), b.to_string())
            ]
        );
        assert_eq!(snap.reading(fam, m), Reading::Unsigned(k as u64 + 1));
    }
}

/// Threads of a C program update the same member handles at once: not one
/// add or observation is lost or torn (each lands in its CPU's block,
/// exclusive by the writer's method), under ASan and UBSan.
#[test]
fn c_threads_sharing_member_handles_lose_no_update() {
    let test = "c_threads_sharing_member_handles_lose_no_update";
    let Some((_tmp, exe, dir)) = writer_checks(test) else {
        return;
    };
    let f = run(&exe, &["threads", dir.to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    // 4 threads x 200,000: adds of 3; observations i % 100, half of
    // them (0..=49) in the first bucket.
    let n: u64 = 4 * 200_000;
    let sum = 4 * (200_000 / 100) * (0..100).sum::<u64>();
    let want = format!(
        "adds {} count {n} sum {sum} buckets {},{}",
        3 * n,
        n / 2,
        n / 2
    );
    assert!(
        f.stdout.lines().any(|l| l == want),
        "{want} in {}",
        f.stdout
    );
    // The Rust reader reads the same totals from the closed segment.
    let path = f
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .map(PathBuf::from)
        .unwrap();
    let opts = perfabi_reader::Options {
        require_live: false,
        ..Default::default()
    };
    let s = Segment::open_with(&path, opts).unwrap().snapshot().unwrap();
    assert_eq!(total(&s, "t.adds", ""), Reading::Unsigned(3 * n));
}

/// A writer `name` in the segment directory `dir` with values scaled by
/// `k`: requests by route (counter), latency (histogram), a signed level
/// (gauge, mode sum), a queue peak, and `app.mixed` in `mixed_unit`.
fn dir_writer(dir: &Path, name: &str, k: u64, mixed_unit: Unit) -> Writer {
    let w = Writer::create_in(
        dir,
        name,
        &Config {
            nr_cpus: Some(2),
            max_instances: 16,
            max_families: 8,
            max_members: 16,
            ..Config::default()
        },
    )
    .unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "route",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (route, n) in [("home", 10), ("api", 3)] {
        let m = w.add_member(req, route, &[]).unwrap();
        w.member_add(&m, (n * k) as i64).unwrap();
    }
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Request latency",
            "",
            Unit::NS,
            Buckets::Explicit(vec![10, 100]),
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    for v in [5, 50, 500] {
        for _ in 0..k {
            w.observe(&l, v).unwrap();
        }
    }
    let level = w
        .add_family(&FamilySpec {
            value_type: ValueType::I64,
            ..FamilySpec::gauge("app.level", "A level", "", Unit::NONE, GaugeMode::Sum)
        })
        .unwrap();
    let g = w.add_member(level, "", &[]).unwrap();
    w.member_set(&g, -7 * k as i64).unwrap();
    let peak = w
        .add_family(&FamilySpec::new(
            "app.peak",
            "Longest queue",
            "",
            Kind::Peak,
            Unit::COUNT,
        ))
        .unwrap();
    let p = w.add_member(peak, "", &[]).unwrap();
    w.peak(&p, 100 * k).unwrap();
    let mixed = w
        .add_family(&FamilySpec::new(
            "app.mixed",
            "Units that disagree",
            "",
            Kind::Counter,
            mixed_unit,
        ))
        .unwrap();
    let m = w.add_member(mixed, "", &[]).unwrap();
    w.member_add(&m, 1).unwrap();
    w
}

/// What `directory read` prints, from the Rust reader's `Directory`.
fn rust_directory(dir: &Path, label: Option<&str>) -> String {
    use perfabi_reader::directory::{Directory, DirectoryOptions};
    let mut d = Directory::open(
        dir,
        DirectoryOptions {
            writer_label: label.map(str::to_string),
            ..DirectoryOptions::default()
        },
    )
    .unwrap();
    let s = d.read().unwrap();
    let mut o = String::new();
    for f in &s.families {
        o += &format!(
            "FAMILY {} writers={} members={}\n",
            f.family.name,
            f.writers,
            f.family.members.len()
        );
        for (m, r) in f.family.members.iter().zip(&f.readings) {
            let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            o += &format!("  {}{{{}}} = {}\n", m.instance, labels.join(","), value(r));
        }
    }
    for p in &s.problems {
        o += &format!(
            "PROBLEM {} {} {}: {}\n",
            p.code,
            p.file.display(),
            p.family.as_deref().unwrap_or("-"),
            p.message
        );
    }
    o + &format!("SEGMENTS {}\n", s.segments)
}

/// A directory of four writers (one whose `app.mixed` disagrees) and a
/// symbolic link named as a segment, for the tests of directory.c.
struct DirChecks {
    top: tempfile::TempDir,
    exe: PathBuf,
    _writers: Vec<Writer>,
}

impl DirChecks {
    fn new(test: &str) -> Option<Self> {
        if !have_tools(test) {
            return None;
        }
        let top = tempfile::tempdir().unwrap();
        let exe = compile_file(top.path(), "tests/c/directory.c", Link::Sanitized);
        let dir = top.path().join("segs");
        let mut writers: Vec<Writer> = [("w1", 1), ("w2", 2), ("w4", 4)]
            .into_iter()
            .map(|(n, k)| dir_writer(&dir, n, k, Unit::COUNT))
            .collect();
        writers.push(dir_writer(&dir, "odd", 8, Unit::BYTES));
        std::os::unix::fs::symlink(
            top.path().join("elsewhere"),
            dir.join("evil.1.0123456789abcdef.perfabi"),
        )
        .unwrap();
        Some(Self {
            top,
            exe,
            _writers: writers,
        })
    }

    fn dir(&self) -> PathBuf {
        self.top.path().join("segs")
    }
}

/// Issue 32 item 4, libperfabi: a directory read from C gives the merged
/// values exactly (summed over writers, the signed gauge of live writers,
/// the largest peak), writers apart under a label when asked, a family
/// whose metadata disagree refused naming both files and a symbolic link
/// refused on its own while the rest is served; and all of it is what the
/// Rust reader's `Directory` reads, under ASan and UBSan.
#[test]
fn a_directory_read_from_c_merges_writers_exactly_and_names_its_problems() {
    let test = "a_directory_read_from_c_merges_writers_exactly_and_names_its_problems";
    let Some(c) = DirChecks::new(test) else {
        return;
    };
    let dir = c.dir();
    let d = dir.to_str().unwrap();
    let f = run(&c.exe, &["read", d]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    assert_eq!(f.stdout, rust_directory(&dir, None));
    // w1 + w2 + w4 + odd (k = 1, 2, 4, 8: 15 in all).
    for needle in [
        "FAMILY app.requests writers=4 members=2\n  api{} = 45\n  home{} = 150\n",
        "FAMILY app.latency writers=4 members=1\n  {} = count=45 sum=8325 buckets=15,15,15\n",
        "FAMILY app.level writers=4 members=1\n  {} = -105\n",
        "FAMILY app.peak writers=4 members=1\n  {} = 800\n",
        "SEGMENTS 4\n",
    ] {
        assert!(f.stdout.contains(needle), "{needle:?} in\n{}", f.stdout);
    }
    let problems: Vec<&str> = f
        .stdout
        .lines()
        .filter(|l| l.starts_with("PROBLEM"))
        .collect();
    assert_eq!(problems.len(), 2, "{}", f.stdout);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("PROBLEM family-conflict ")
                && p.contains(" app.mixed: ")
                && p.contains("odd.")
                && p.contains("w1.")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("PROBLEM symlink ")
            && p.contains("evil.1.0123456789abcdef.perfabi -: ")),
        "{problems:?}"
    );
    assert!(!f.stdout.contains("FAMILY app.mixed"), "{}", f.stdout);

    // Writers apart under a label of the caller's choice.
    let f = run(&c.exe, &["read", d, "worker"]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    assert_eq!(f.stdout, rust_directory(&dir, Some("worker")));
    let pid = std::process::id();
    for (w, k) in [("w1", 1), ("w2", 2), ("w4", 4), ("odd", 8)] {
        let needle = format!("  home{{worker={w}.{pid}}} = {}\n", 10 * k);
        assert!(f.stdout.contains(&needle), "{needle:?} in\n{}", f.stdout);
    }
}

/// directory.c's misuse: every bad call is a typed error, none a crash.
#[test]
fn misusing_a_directory_from_c_is_a_typed_error_never_a_crash() {
    let test = "misusing_a_directory_from_c_is_a_typed_error_never_a_crash";
    let Some(c) = DirChecks::new(test) else {
        return;
    };
    let f = run(&c.exe, &["misuse", c.dir().to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    assert_sanitizers_quiet(&f);
    let invalid = code(PERFABI_E_INVALID_ARGUMENT);
    let wrong = code(PERFABI_E_WRONG_TYPE);
    let expect = [
        ("perfabi_directory_open(path, NULL, NULL)", invalid),
        ("perfabi_directory_open(path, &o, &d)", invalid),
        ("perfabi_directory_read(NULL, &s)", invalid),
        ("perfabi_directory_read(d, NULL)", invalid),
        ("perfabi_directory_read(d, &s)", 0),
        ("perfabi_directory_read(d, &t)", 0),
        ("perfabi_scrape_u64(s, req, 0, NULL)", invalid),
        ("perfabi_scrape_u64(s, req, 99, &u)", invalid),
        ("perfabi_scrape_u64(s, other, 0, &u)", invalid),
        ("perfabi_scrape_u64(NULL, req, 0, &u)", invalid),
        ("perfabi_scrape_i64(s, req, 0, &i)", wrong),
        ("perfabi_scrape_u64(s, lat, 0, &u)", wrong),
        ("perfabi_scrape_histogram(s, req, 0, &h, b, 1)", wrong),
        (
            "perfabi_scrape_histogram(s, lat, 0, &h, b, 1)",
            code(PERFABI_E_BUFFER_TOO_SMALL),
        ),
        ("perfabi_scrape_histogram(s, lat, 0, NULL, b, 1)", invalid),
    ];
    let got: HashMap<&str, i32> = f
        .stdout
        .lines()
        .filter_map(|l| {
            let (call, rest) = l.split_once(" code=")?;
            Some((call, rest.split(' ').next()?.parse().ok()?))
        })
        .collect();
    for (call, want) in expect {
        assert_eq!(got.get(call), Some(&want), "{call} in\n{}", f.stdout);
    }
    for line in [
        "after a failed open: NULL",
        "find missing: NULL no-such-family",
        "family past the last: NULL",
        "histogram needs 3 buckets",
        "problem past the last: NULL invalid-argument",
        "writers of another read's family: 0",
        "NULL read: 0 0 0",
    ] {
        assert!(f.stdout.contains(line), "{line:?} in\n{}", f.stdout);
    }
    // perfabi_directory_default_path() as snprintf(): the length, and the
    // path cut to the buffer.
    let dflt = perfabi_reader::directory::default_dir();
    let dflt = dflt.to_str().unwrap();
    for line in [
        format!("default dir length: {}", dflt.len()),
        format!("default dir cut: {} ({})", &dflt[..7], dflt.len()),
    ] {
        assert!(f.stdout.contains(&line), "{line:?} in\n{}", f.stdout);
    }
}

/// The README's C directory example (shown verbatim), built against the
/// installed library, prints every merged value exactly and each problem.
#[test]
fn readme_directory_example_prints_the_merged_values() {
    let test = "readme_directory_example_prints_the_merged_values";
    let src = readme::example("reader/capi/examples/read_directory.c");
    let Some(c) = DirChecks::new(test) else {
        return;
    };
    let exe = compile(c.top.path(), "read_directory", &src, Link::Shared);
    let f = run(&exe, &[c.dir().to_str().unwrap()]);
    assert_eq!(f.code(), Some(0), "{}\n{}", f.stdout, f.stderr);
    let mut lines: Vec<&str> = f.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "app.latency{} count=45 sum=8325",
            "app.level{} -105",
            "app.peak{} 800",
            "app.requests{api} 45",
            "app.requests{home} 150",
        ]
    );
    assert_eq!(f.stderr.matches("left out: ").count(), 2, "{}", f.stderr);
}
