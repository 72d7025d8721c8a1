//! `perfabi-cat --json` streams its page: its peak memory is the snapshot
//! (and the mapped segment) plus one value at a time, not a document tree
//! of the whole page. Measured with GNU time on the largest legal tables:
//! 65,536 counters, and many families (16,384 by default: the writer
//! registers a family in time linear in the families it has, so 65,536 take
//! it minutes; `PERFABI_TEST_JSON_FAMILIES=65536` measures the case).

use std::path::Path;
use std::time::Duration;

use perfabi::{FamilySpec, Kind, Semantics, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness as harness;

/// Makes one case's segment at a path.
type MakeSegment = fn(&Path) -> Writer;

/// A segment of 65,536 1.0 counters on 2 CPUs (counter `i` holds `i`).
fn counters(path: &Path) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(2),
            max_instances: perfabi::layout::MAX_INSTANCES,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for i in 0..perfabi::layout::MAX_INSTANCES {
        let id = w
            .add(&format!("bench.c{i:05}"), "count", Semantics::Counter)
            .unwrap();
        w.adjust(id, i64::from(i)).unwrap();
    }
    w
}

/// Families of the second case (see the module's docs).
fn nr_families() -> u32 {
    std::env::var("PERFABI_TEST_JSON_FAMILIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| (1..=perfabi::layout::MAX_FAMILIES).contains(n))
        .unwrap_or(16384)
}

/// A segment of [`nr_families`] families on 2 CPUs, each of one instance.
fn families(path: &Path) -> Writer {
    let n = nr_families();
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(2),
            max_instances: n,
            max_families: n,
            max_members: n,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for i in 0..n {
        let f = w
            .add_family(&FamilySpec::new(
                &format!("bench.f{i:05}"),
                "one of many families",
                "",
                Kind::Counter,
                Unit::COUNT,
            ))
            .unwrap();
        let m = w.add_member(f, "", &[]).unwrap();
        w.member_add(&m, i64::from(i)).unwrap();
    }
    w
}

/// What perfabi-cat takes whatever it reads: its code, its libraries, the
/// allocator's arenas (it is 5 to 8 MiB).
const PROGRAM: u64 = 16 << 20;

/// Peak memory of `perfabi-cat --json` on each case, beside the size of
/// the page it printed. The document tree it built before took 18 to 23
/// times the page (574 MiB for the 31 MiB page of 65,536 counters);
/// streamed, the peak is the snapshot and the mapped segment (whose pages
/// it touched count in its RSS): below the segment's size plus 4 times the
/// page, beside the program's own [`PROGRAM`].
#[test]
fn json_of_the_largest_tables_is_streamed() {
    let cat = harness::workspace::perfabi_cat();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let many = format!("{} families", nr_families());
    let cases: [(&str, MakeSegment); 2] = [("65536 counters", counters), (&many, families)];
    let mut failed = Vec::new();
    for (name, make) in cases {
        let path = dir.path().join(name.replace(' ', "-"));
        let t = std::time::Instant::now();
        let w = make(&path);
        let made = t.elapsed();
        let seg_bytes = std::fs::metadata(&path).unwrap().len();
        let f = harness::run_measured(
            &cat,
            &[path.display().to_string(), "--json".into()],
            Duration::from_secs(120),
        );
        drop(w);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(f.code(), Some(0), "{name}: {}", f.stderr);
        let doc: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
        let shown =
            doc["counters"].as_array().unwrap().len() + doc["families"].as_object().unwrap().len();
        assert!(
            shown >= 65536.min(nr_families() as usize),
            "{name}: {shown} shown"
        );
        let page = f.stdout.len() as u64;
        let peak = f.max_rss_kib << 10;
        println!(
            "CAT-JSON-MEMORY {name}: page {:.1} MiB, segment {:.1} MiB, peak RSS {:.1} MiB ({:.2}x the page), {:.2} s (segment made in {:.1} s)",
            page as f64 / 1048576.0,
            seg_bytes as f64 / 1048576.0,
            peak as f64 / 1048576.0,
            peak as f64 / page as f64,
            f.elapsed.as_secs_f64(),
            made.as_secs_f64()
        );
        if peak >= seg_bytes + 4 * page + PROGRAM {
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "peak at the segment plus 4x the page (and the program) or more: {failed:?}"
    );
}
