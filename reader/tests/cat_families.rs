//! perfabi-cat on metric families (ABI 1.1): OpenMetrics of every kind
//! through prometheus_client's parser (every family exactly once, units
//! only where the name says them, cumulative buckets), names that would be
//! one family refused by the writer and by the reader, nested JSON, the
//! table in human units, and --watch rates.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use perfabi::{Buckets, Error, FamilySpec, Kind, Semantics, Unit, ValueType};
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::forge::add_to_value;
use perfabi_test_harness::python::{openmetrics_parsers, python_with};
use serde_json::Value;
use support::*;

fn cat(args: &[&str]) -> Output {
    Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "perfabi-cat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn config() -> Config {
    Config {
        max_instances: 512,
        max_families: 32,
        max_members: 64,
        damon_capacity: 0,
        ..Config::default()
    }
}

/// Families of every kind, unit and bucket layout, with labels, and three
/// ABI 1.0 entries.
fn every_kind(path: &Path) -> Writer {
    let w = Writer::create(path, &config()).unwrap();
    let rx = w.add("net.rx_bytes", "bytes", Semantics::Counter).unwrap();
    w.adjust(rx, 123_456).unwrap();
    let ticks = w.add("old.ticks", "count", Semantics::Counter).unwrap();
    w.adjust(ticks, 9).unwrap();
    let q = w
        .add_typed("queue.depth", "", Semantics::Instant, ValueType::I64)
        .unwrap();
    w.set(q, -4).unwrap();

    let fam = |spec: FamilySpec| w.add_family(&spec).unwrap();
    let c = |name, help, dim, unit| FamilySpec::new(name, help, dim, Kind::Counter, unit);
    let read = fam(c("disk.read_bytes", "Bytes read", "device", Unit::BYTES));
    let sda = w
        .add_member(read, "sda", &[("model", "virtio disk")])
        .unwrap();
    let vdb = w.add_member(read, "vdb", &[]).unwrap();
    w.member_add(&sda, 1 << 20).unwrap();
    w.member_add(&vdb, 512).unwrap();
    let cpu = fam(c(
        "task.cpu_seconds",
        "CPU time of the task",
        "task",
        Unit::NS,
    ));
    let t = w.add_member(cpu, "main", &[]).unwrap();
    w.member_add(&t, 1_500_000_000).unwrap();
    let wait = fam(c("task.wait_time", "Time waited", "task", Unit::NS));
    let t = w.add_member(wait, "main", &[]).unwrap();
    w.member_add(&t, 2500).unwrap();

    let g = |name, help, unit| FamilySpec::new(name, help, "", Kind::Gauge, unit);
    let used = fam(g("mem.used", "Memory in use", Unit::KIB));
    w.member_set(&w.add_member(used, "", &[]).unwrap(), 5)
        .unwrap();
    let cache = fam(g("mem.cache_bytes", "Page cache", Unit::KIB));
    w.member_set(&w.add_member(cache, "", &[]).unwrap(), 3)
        .unwrap();
    let hit = fam(g("cache.hit_ratio", "", Unit::RATIO));
    w.member_set(&w.add_member(hit, "", &[]).unwrap(), 1)
        .unwrap();
    let queue = fam(FamilySpec {
        value_type: ValueType::I64,
        ..g("sched.queue", "Runnable tasks", Unit::COUNT)
    });
    w.member_set(&w.add_member(queue, "", &[]).unwrap(), -3)
        .unwrap();
    fam(g(
        "empty.family",
        "A family with no instance yet",
        Unit::NONE,
    ));

    let peak = fam(FamilySpec::new(
        "mem.peak_pages",
        "Most pages in use",
        "pool",
        Kind::Peak,
        Unit::PAGES,
    ));
    let p = w.add_member(peak, "main", &[]).unwrap();
    w.peak(&p, 300).unwrap();
    w.peak(&p, 100).unwrap();

    let lat = fam(FamilySpec::histogram(
        "disk.latency",
        "Request latency",
        "device",
        Unit::NS,
        Buckets::Log2 { first: 10, n: 6 },
    ));
    let l = w.add_member(lat, "sda", &[]).unwrap();
    for v in [100, 2000, 2000, 40_000, 1 << 40] {
        w.observe(&l, v).unwrap();
    }
    let rpc = fam(FamilySpec::histogram(
        "rpc.latency_seconds",
        "RPC latency",
        "method",
        Unit::US,
        Buckets::Explicit(vec![10, 1000, 100_000]),
    ));
    let get = w
        .add_member(rpc, "get", &[("service", "api"), ("zone", "a 1")])
        .unwrap();
    for v in [5, 50, 500, 5000, 500_000] {
        w.observe(&get, v).unwrap();
    }
    w.add_member(rpc, "put", &[("service", "api")]).unwrap();
    // Bounds 2^60 and 2^60 + 1 are one number in a float: one bucket, named
    // exactly by the larger.
    let blob = fam(FamilySpec::histogram(
        "blob.size",
        "Blob sizes",
        "",
        Unit::BYTES,
        Buckets::Explicit(vec![1 << 60, (1 << 60) + 1, u64::MAX - 1]),
    ));
    let b = w.add_member(blob, "", &[]).unwrap();
    w.observe(&b, 5).unwrap();
    w.observe(&b, (1 << 60) + 1).unwrap();
    w
}

/// The OpenMetrics page as prometheus_client parses it: every family with
/// its type, unit, help and samples `[name, labels, value]` (JSON), the same
/// under every interpreter that has the parser.
fn parsed(page: &[u8], parsers: &[String]) -> Vec<Value> {
    let script = "import sys, json\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        out = []\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   out.append({'name': f.name, 'type': f.type, 'unit': f.unit, 'help': f.documentation,\n\
        \x20               'samples': [[s.name, s.labels, s.value] for s in f.samples]})\n\
        print(json.dumps(out))\n";
    let mut first: Option<Vec<Value>> = None;
    for py in parsers {
        let out = python_with(py, script, page);
        assert!(
            out.status.success(),
            "the OpenMetrics parser of {py} refused the page:\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(page)
        );
        let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        match &first {
            None => first = Some(v),
            Some(f) => assert_eq!(*f, v, "{py} parsed the page otherwise"),
        }
    }
    first.unwrap()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample<'a>(fam: &'a Value, name: &str, labels: &[(&str, &str)]) -> &'a Value {
    fam["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s[0] == name && labels.iter().all(|(k, v)| s[1][k].as_str() == Some(v)))
        .map(|s| &s[2])
        .unwrap_or_else(|| panic!("no sample {name} {labels:?} in {fam}"))
}

#[test]
fn openmetrics_of_every_kind_parses_with_every_family_once() {
    let test = "openmetrics_of_every_kind_parses_with_every_family_once";
    let parsers = openmetrics_parsers(test);
    if parsers.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = every_kind(&path);
    let p = path.to_str().unwrap();
    let page = ok(cat(&[p, "--openmetrics"]));
    assert!(page.ends_with("# EOF\n"), "{page}");
    let fams = parsed(page.as_bytes(), &parsers);
    let by_name: BTreeMap<&str, &Value> = fams
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f))
        .collect();

    // Every family exactly once, named perfabi_<flat name>.
    let snap = w.snapshot().unwrap();
    assert_eq!(fams.len(), snap.families.len(), "{page}");
    assert_eq!(by_name.len(), fams.len(), "a family twice: {page}");
    for f in &snap.families {
        let om = perfabi::name::openmetrics(&f.name);
        assert!(by_name.contains_key(om.as_str()), "{om} missing: {page}");
    }

    let fam = |n: &str| by_name[n];
    let t = |n: &str| fam(n)["type"].as_str().unwrap().to_string();
    let unit = |n: &str| fam(n)["unit"].as_str().unwrap().to_string();
    let help = |n: &str| fam(n)["help"].as_str().unwrap().to_string();

    // 1.0 entries as before: counters with _total, instants as gauges.
    assert_eq!(t("perfabi_net_rx_bytes"), "counter");
    assert_eq!(unit("perfabi_net_rx_bytes"), "bytes");
    assert_eq!(
        sample(
            fam("perfabi_net_rx_bytes"),
            "perfabi_net_rx_bytes_total",
            &[]
        ),
        123_456
    );
    assert_eq!(
        help("perfabi_old_ticks"),
        "perfabi counter old.ticks (count)"
    );
    assert_eq!(
        sample(fam("perfabi_old_ticks"), "perfabi_old_ticks_total", &[]),
        9
    );
    assert_eq!(t("perfabi_queue_depth"), "gauge");
    assert_eq!(
        sample(fam("perfabi_queue_depth"), "perfabi_queue_depth", &[]),
        -4
    );

    // Counters: the dimension and the extra labels; UNIT where the name
    // ends with the base unit, values converted to it.
    let read = fam("perfabi_disk_read_bytes");
    assert_eq!(
        (
            t("perfabi_disk_read_bytes"),
            unit("perfabi_disk_read_bytes")
        ),
        ("counter".into(), "bytes".into())
    );
    assert_eq!(help("perfabi_disk_read_bytes"), "Bytes read");
    assert_eq!(
        sample(
            read,
            "perfabi_disk_read_bytes_total",
            &[("device", "sda"), ("model", "virtio disk")]
        ),
        1 << 20
    );
    assert_eq!(
        sample(read, "perfabi_disk_read_bytes_total", &[("device", "vdb")]),
        512
    );
    assert_eq!(unit("perfabi_task_cpu_seconds"), "seconds");
    assert_eq!(
        sample(
            fam("perfabi_task_cpu_seconds"),
            "perfabi_task_cpu_seconds_total",
            &[("task", "main")]
        ),
        1.5
    );
    // No UNIT: values as stored, the unit in the help text.
    assert_eq!(unit("perfabi_task_wait_time"), "");
    assert_eq!(help("perfabi_task_wait_time"), "Time waited (unit: ns)");
    assert_eq!(
        sample(
            fam("perfabi_task_wait_time"),
            "perfabi_task_wait_time_total",
            &[]
        ),
        2500
    );
    // Gauges.
    assert_eq!(
        (t("perfabi_mem_used"), unit("perfabi_mem_used")),
        ("gauge".into(), "".into())
    );
    assert_eq!(help("perfabi_mem_used"), "Memory in use (unit: KiB)");
    assert_eq!(sample(fam("perfabi_mem_used"), "perfabi_mem_used", &[]), 5);
    assert_eq!(unit("perfabi_mem_cache_bytes"), "bytes");
    assert_eq!(
        sample(
            fam("perfabi_mem_cache_bytes"),
            "perfabi_mem_cache_bytes",
            &[]
        ),
        3072
    );
    assert_eq!(unit("perfabi_cache_hit_ratio"), "ratio");
    assert_eq!(
        help("perfabi_cache_hit_ratio"),
        "perfabi gauge cache.hit_ratio"
    );
    assert_eq!(
        sample(
            fam("perfabi_cache_hit_ratio"),
            "perfabi_cache_hit_ratio",
            &[]
        ),
        1
    );
    assert_eq!(help("perfabi_sched_queue"), "Runnable tasks (unit: count)");
    assert_eq!(
        sample(fam("perfabi_sched_queue"), "perfabi_sched_queue", &[]),
        -3
    );
    assert_eq!(
        fam("perfabi_empty_family")["samples"],
        serde_json::json!([])
    );
    // A peak is a gauge of the maximum over CPUs.
    assert_eq!(
        (t("perfabi_mem_peak_pages"), unit("perfabi_mem_peak_pages")),
        ("gauge".into(), "pages".into())
    );
    assert_eq!(
        sample(
            fam("perfabi_mem_peak_pages"),
            "perfabi_mem_peak_pages",
            &[("pool", "main")]
        ),
        300
    );

    // Histograms: cumulative buckets, +Inf last, _count, _sum.
    let lat = fam("perfabi_disk_latency");
    assert_eq!(t("perfabi_disk_latency"), "histogram");
    assert_eq!(help("perfabi_disk_latency"), "Request latency (unit: ns)");
    let le = |f: &Value, name: &str, labels: &[(&str, &str)]| -> Vec<(String, Value)> {
        f["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s[0] == name && labels.iter().all(|(k, v)| s[1][k].as_str() == Some(v)))
            .map(|s| (s[1]["le"].as_str().unwrap().to_string(), s[2].clone()))
            .collect()
    };
    let buckets = le(lat, "perfabi_disk_latency_bucket", &[("device", "sda")]);
    let want: Vec<(String, Value)> = [
        ("1024", 1),
        ("2048", 3),
        ("4096", 3),
        ("8192", 3),
        ("16384", 3),
        ("+Inf", 5),
    ]
    .iter()
    .map(|(l, v)| (l.to_string(), (*v).into()))
    .collect();
    assert_eq!(buckets, want, "{page}");
    assert_eq!(sample(lat, "perfabi_disk_latency_count", &[]), 5);
    assert_eq!(
        sample(lat, "perfabi_disk_latency_sum", &[]),
        44_100u64 + (1 << 40)
    );
    let rpc = fam("perfabi_rpc_latency_seconds");
    assert_eq!(unit("perfabi_rpc_latency_seconds"), "seconds");
    let buckets = le(
        rpc,
        "perfabi_rpc_latency_seconds_bucket",
        &[("method", "get"), ("service", "api"), ("zone", "a 1")],
    );
    let les: Vec<f64> = buckets.iter().map(|(l, _)| l.parse().unwrap()).collect();
    assert_eq!(les[..3], [1e-5, 1e-3, 0.1]);
    assert!(les[3].is_infinite());
    let counts: Vec<u64> = buckets.iter().map(|(_, v)| v.as_u64().unwrap()).collect();
    assert_eq!(counts, [1, 3, 4, 5]);
    let sum = sample(rpc, "perfabi_rpc_latency_seconds_sum", &[("method", "get")]);
    assert!((sum.as_f64().unwrap() - 0.505_555).abs() < 1e-9, "{sum}");
    assert_eq!(
        sample(
            rpc,
            "perfabi_rpc_latency_seconds_count",
            &[("method", "put")]
        ),
        0
    );
    let blob = le(fam("perfabi_blob_size"), "perfabi_blob_size_bucket", &[]);
    assert_eq!(blob.len(), 3, "2^60 and 2^60+1 are one bound: {blob:?}");
    assert_eq!(
        blob.iter()
            .map(|(_, v)| v.as_u64().unwrap())
            .collect::<Vec<_>>(),
        [2, 2, 2]
    );

    // Per CPU: a `cpu` label on every sample, the same families, and the
    // per-CPU samples add up to the totals.
    let page_cpu = ok(cat(&[p, "--openmetrics", "--cpu"]));
    let fams_cpu = parsed(page_cpu.as_bytes(), &parsers);
    assert_eq!(fams_cpu.len(), fams.len());
    let mut per_cpu_sum = 0u64;
    for f in &fams_cpu {
        for s in f["samples"].as_array().unwrap() {
            assert!(s[1]["cpu"].is_string(), "{s}");
            if s[0] == "perfabi_disk_read_bytes_total" && s[1]["device"] == "sda" {
                per_cpu_sum += s[2].as_u64().unwrap();
            }
        }
    }
    assert_eq!(per_cpu_sum, 1 << 20);
    println!(
        "OpenMetrics: {} families ({} samples; {} per CPU) parsed, each once",
        fams.len(),
        fams.iter()
            .map(|f| f["samples"].as_array().unwrap().len())
            .sum::<usize>(),
        fams_cpu
            .iter()
            .map(|f| f["samples"].as_array().unwrap().len())
            .sum::<usize>()
    );
}

#[test]
fn names_one_dot_or_underscore_apart_are_never_both_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    let spec = |name: &str| FamilySpec::new(name, "", "", Kind::Gauge, Unit::NONE);
    let ab = w.add_family(&spec("a.b_c")).unwrap();
    w.add_member(ab, "", &[]).unwrap();
    w.add("x.y", "", Semantics::Counter).unwrap();
    // One name to OpenMetrics (perfabi_a_b_c, perfabi_x_y): refused, whether
    // a family or a 1.0 entry asks.
    for clash in ["a_b_c", "a_b.c", "a.b.c", "x_y", "a.b_c_total", "x.y_count"] {
        assert_eq!(
            w.add_family(&spec(clash)).map(drop),
            Err(Error::DuplicateName),
            "family {clash}"
        );
        assert_eq!(
            w.add(clash, "", Semantics::Counter).map(drop),
            Err(Error::DuplicateName),
            "entry {clash}"
        );
    }
    // Close but distinct names are fine.
    let near = w.add_family(&spec("a.bc")).unwrap();
    w.add_member(near, "", &[]).unwrap();
    let p = path.to_str().unwrap();
    let page = ok(cat(&[p, "--openmetrics"]));
    let parsers = openmetrics_parsers("names_one_dot_or_underscore_apart_are_never_both_live");
    if !parsers.is_empty() {
        let names: Vec<String> = parsed(page.as_bytes(), &parsers)
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["perfabi_x_y", "perfabi_a_b_c", "perfabi_a_bc"]);
    }

    // A forged segment with both: family a.bc renamed a_b.c in the file.
    // The reader refuses it (name-clash), so no page ever has the name twice.
    let bytes = std::fs::read(&path).unwrap();
    let layout = perfabi::validate(&bytes).unwrap();
    let t = layout.families.unwrap();
    let at = t.family_word(near.slot() as usize) * 8;
    assert_eq!(&bytes[at..at + 5], b"a.bc\0");
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"a_b.c\0", at as u64).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    let err = seg.families().unwrap_err();
    assert_eq!(err.code(), "name-clash", "{err}");
    assert!(matches!(
        err,
        perfabi_reader::Error::Abi(Error::FamilyClash { .. })
    ));
    for mode in [&["--openmetrics"][..], &["--json"], &[]] {
        let mut args = vec![p];
        args.extend_from_slice(mode);
        let out = cat(&args);
        let msg = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{mode:?}: {msg}");
        assert!(msg.contains("one name to consumers"), "{msg}");
        assert!(out.stdout.is_empty());
    }
    println!("6 clashing names refused by the writer; a forged clash refused by the reader");
}

/// Spec §5.1: a histogram whose count is not its buckets' sum in a
/// consistent copy (here the test adds 1 to CPU 0's count behind the
/// writer) is shown by no output. The table and `--json` showed the stored
/// count while OpenMetrics' `_count` was the `+Inf` bucket; now every mode
/// fails with the same `bad-histogram` message (exit 4) and prints nothing.
#[test]
fn a_histogram_whose_count_is_not_its_buckets_sum_is_shown_by_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = every_kind(&path);
    let p = path.to_str().unwrap();
    let modes: [&[&str]; 6] = [
        &[],
        &["--cpu"],
        &["--json"],
        &["--json", "--cpu"],
        &["--openmetrics"],
        &["--openmetrics", "--cpu"],
    ];
    let run = |mode: &[&str]| cat(&[&[p][..], mode].concat());
    for mode in modes {
        ok(run(mode));
    }
    let f = Segment::open(&path)
        .unwrap()
        .family("rpc.latency_seconds")
        .unwrap();
    let get = f.member("get").unwrap();
    add_to_value(&path, 0, u64::from(get.value_slot), 1);
    let want = format!(
        "member slot {}: histogram count is not the sum of its buckets in CPU 0's consistent copy",
        get.slot.unwrap()
    );
    for mode in modes {
        let out = run(mode);
        let msg = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{mode:?}: {msg}");
        assert!(msg.contains(&want), "{mode:?}: {msg}");
        assert!(out.stdout.is_empty(), "{mode:?}");
    }
}

#[test]
fn json_nests_families_instances_and_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = every_kind(&path);
    let doc: Value = serde_json::from_str(&ok(cat(&[path.to_str().unwrap(), "--json"]))).unwrap();
    let snap = w.snapshot().unwrap();
    let fams = doc["families"].as_object().unwrap();
    assert_eq!(fams.len(), snap.families.len());
    // The 1.0 entries are still listed as counters, as before.
    assert_eq!(doc["counters"].as_array().unwrap().len(), 3);

    let read = &fams["disk.read_bytes"];
    assert_eq!(read["kind"], "counter");
    assert_eq!(read["origin"], "family");
    assert_eq!(read["help"], "Bytes read");
    assert_eq!(read["dimension"], "device");
    assert_eq!(read["unit"]["text"], "bytes");
    assert_eq!(read["unit"]["dim_space"], 1);
    assert_eq!(read["unit"]["base"], "bytes");
    assert_eq!(read["unit"]["factor"], 1.0);
    assert_eq!(read["buckets"], Value::Null);
    let sda = &read["instances"]["sda"];
    assert_eq!(sda["labels"]["model"], "virtio disk");
    assert_eq!(sda["total"], 1 << 20);
    let per_cpu = sda["per_cpu"].as_array().unwrap();
    assert_eq!(per_cpu.len(), snap.nr_cpus);
    assert_eq!(
        per_cpu.iter().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        1 << 20
    );

    let cpu = &fams["task.cpu_seconds"]["unit"];
    assert_eq!(
        (cpu["text"].as_str(), cpu["dim_time"].as_i64()),
        (Some("ns"), Some(1))
    );
    assert_eq!(cpu["factor"], 1e-9);
    assert_eq!(fams["mem.used"]["unit"]["scale_space"], 1);
    assert_eq!(fams["mem.peak_pages"]["unit"]["quantity"], "pages");
    assert_eq!(fams["cache.hit_ratio"]["unit"]["quantity"], "ratio");
    assert_eq!(fams["sched.queue"]["instances"][""]["total"], -3);
    assert_eq!(fams["sched.queue"]["type"], "i64");
    assert_eq!(fams["mem.peak_pages"]["kind"], "peak");
    assert_eq!(fams["mem.peak_pages"]["instances"]["main"]["total"], 300);
    assert_eq!(fams["empty.family"]["instances"], serde_json::json!({}));

    let lat = &fams["disk.latency"];
    assert_eq!(lat["kind"], "histogram");
    assert_eq!(
        lat["buckets"],
        serde_json::json!({"layout": "log2", "log2_first": 10, "count": 6,
                           "bounds": [1024, 2048, 4096, 8192, 16384]})
    );
    let total = &lat["instances"]["sda"]["total"];
    assert_eq!(total["count"], 5);
    assert_eq!(total["buckets"], serde_json::json!([1, 2, 0, 0, 0, 2]));
    let cpus = lat["instances"]["sda"]["per_cpu"].as_array().unwrap();
    assert_eq!(
        cpus.iter()
            .map(|h| h["count"].as_u64().unwrap())
            .sum::<u64>(),
        5
    );
    assert_eq!(fams["rpc.latency_seconds"]["buckets"]["layout"], "explicit");
    assert_eq!(
        fams["rpc.latency_seconds"]["instances"]["get"]["labels"],
        serde_json::json!({"service": "api", "zone": "a 1"})
    );
    // A 1.0 entry: a family of one instance "", its unit string mapped.
    let old = &fams["old.ticks"];
    assert_eq!(old["origin"], "entry");
    assert_eq!(old["unit"]["dim_count"], 1);
    assert_eq!(old["instances"][""]["total"], 9);
}

#[test]
fn a_1_0_unit_that_names_no_unit_keeps_only_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = counters_writer(&path, 4);
    w.add("widgets.made", "widgets", Semantics::Counter)
        .unwrap();
    let doc: Value = serde_json::from_str(&ok(cat(&[path.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(
        doc["families"]["widgets.made"]["unit"],
        serde_json::json!({"text": "widgets"})
    );
    let table = ok(cat(&[path.to_str().unwrap()]));
    assert!(table.contains("0 widgets"), "{table}");
}

#[test]
fn the_table_groups_families_with_human_units() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = every_kind(&path);
    let table = ok(cat(&[path.to_str().unwrap()]));
    println!("{table}");
    let line = |family: &str, instance: &str| -> String {
        let mut current = String::new();
        for l in table.lines() {
            let cols: Vec<&str> = l.split_whitespace().collect();
            if !l.starts_with(' ') {
                current = cols[0].to_string();
            }
            let inst = if l.starts_with(' ') {
                cols[0]
            } else {
                cols.get(1).copied().unwrap_or("")
            };
            if current == family && inst == instance {
                return l.to_string();
            }
        }
        panic!("no row {family} {instance}:\n{table}")
    };
    assert!(table.starts_with("FAMILY"), "{table}");
    assert!(line("net.rx_bytes", "-").contains("120.6 KiB"));
    assert!(line("old.ticks", "-").contains(" 9"));
    assert!(line("queue.depth", "-").contains("-4"));
    let sda = line("disk.read_bytes", "device=sda");
    assert!(
        sda.contains("1.0 MiB") && sda.contains("{model=virtio disk}"),
        "{sda}"
    );
    // The family's name only on its first row.
    let vdb = line("disk.read_bytes", "device=vdb");
    assert!(vdb.starts_with(' ') && vdb.contains("512 B"), "{vdb}");
    assert!(line("task.cpu_seconds", "task=main").contains("1.50 s"));
    assert!(line("task.wait_time", "task=main").contains("2.5 µs"));
    assert!(line("mem.used", "-").contains("5.0 KiB"));
    assert!(line("mem.peak_pages", "pool=main").contains("300 pages"));
    assert!(line("cache.hit_ratio", "-").contains("100.0%"));
    let lat = line("disk.latency", "device=sda");
    assert!(lat.contains("5 obs"), "{lat}");
    // 3 of 5 observations are at most 2048 ns; the 5th above 16 KiB.
    assert!(
        lat.contains("p50 ≤2.0 µs") && lat.contains("p99 >16.4 µs"),
        "{lat}"
    );
    assert!(line("empty.family", "-").contains("(no instances)"));
    let wide = ok(cat(&[path.to_str().unwrap(), "--cpu"]));
    assert!(wide.lines().next().unwrap().contains("cpu0"), "{wide}");
}

/// --watch: a counter of CPU time as a percentage of one CPU, bytes per
/// second, a histogram's observations per second; in JSON, per family and
/// instance.
#[test]
fn watch_shows_cpu_time_as_a_share_of_a_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = std::sync::Arc::new(Writer::create(&path, &config()).unwrap());
    let cpu = w
        .add_family(&FamilySpec::new(
            "task.cpu_time",
            "CPU time",
            "task",
            Kind::Counter,
            Unit::NS,
        ))
        .unwrap();
    let main = w.add_member(cpu, "main", &[]).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "",
            Unit::US,
            Buckets::Explicit(vec![100, 10_000]),
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            // Half a CPU: 5 ms of CPU time every 10 ms; 100 observations of
            // 50 µs a second.
            let start = Instant::now();
            let mut done = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let due = start.elapsed().as_millis() as u64 / 10;
                while done < due {
                    w.member_add(&main, 5_000_000).unwrap();
                    w.observe(&l, 50).unwrap();
                    done += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let p = path.to_str().unwrap();
    let json = ok(cat(&[p, "--watch", "1", "--count", "2", "--json"]));
    let text = ok(cat(&[p, "--watch", "1", "--count", "1"]));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    feeder.join().unwrap();
    for line in json.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let ns_per_s = v["rates"]["task.cpu_time"]["main"].as_f64().unwrap();
        assert!((ns_per_s / 5e8 - 1.0).abs() < 0.1, "{line}");
        let h = &v["rates"]["rpc.latency"];
        assert!(
            (h["per_s"].as_f64().unwrap() / 100.0 - 1.0).abs() < 0.1,
            "{line}"
        );
        assert_eq!(h["mean"], 50.0);
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("task.cpu_time{task=main}"))
        .unwrap_or_else(|| panic!("{text}"));
    let pct: f64 = row
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("{row}"));
    assert!(row.ends_with("% CPU") && (pct - 50.0).abs() < 5.0, "{row}");
    let row = text
        .lines()
        .find(|l| l.starts_with("rpc.latency "))
        .unwrap();
    assert!(
        row.contains("obs/s") && row.contains("mean 50.0 µs") && row.contains("p50 ≤100.0 µs"),
        "{row}"
    );
    println!("--watch: {row}");
}
