//! The segment-directory vectors (`spec/PERFABI.md` §15.6): the committed
//! directories equal what `make_dir_vectors` produces, and an independent
//! reading of §15.2–§15.5 (its own listing by name, its own reading of
//! the kept file's list, its own merge of each file's snapshot) gives
//! exactly the committed `.expect`.

#[path = "support/dir_vectors.rs"]
mod dir_vectors;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use perfabi_reader::{Family, Kind, Liveness, Options, Reading, Segment};

/// The kept file's name (§15.5).
const KEPT_NAME: &str = "kept.perfabi-kept";

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
}

#[test]
fn committed_directory_vectors_equal_the_generator() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, files) in dir_vectors::ALL {
        dir_vectors::make(&vectors(), tmp.path(), name, files);
        for (file, _) in *files {
            let want = std::fs::read(tmp.path().join(name).join(file)).unwrap();
            let got = std::fs::read(vectors().join(name).join(file)).unwrap_or_else(|_| {
                panic!("{name}/{file} missing: run cargo run -p perfabi-reader --example make_dir_vectors")
            });
            assert!(got == want, "{name}/{file} is stale: run make_dir_vectors");
        }
        let listed = std::fs::read_dir(vectors().join(name)).unwrap().count();
        assert_eq!(listed, files.len(), "{name} has other files");
        let merged = dir_vectors::describe(&dir_vectors::read(&tmp.path().join(name)));
        let committed = std::fs::read_to_string(vectors().join(format!("{name}.expect"))).unwrap();
        assert_eq!(
            merged, committed,
            "{name}.expect is stale: run make_dir_vectors"
        );
    }
}

/// §15.2, read independently: `<name>.<pid>.<nonce>.perfabi`.
fn is_segment_name(s: &str) -> bool {
    let Some(rest) = s.strip_suffix(".perfabi") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('.').collect();
    let [name, pid, nonce] = parts[..] else {
        return false;
    };
    let name_ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let pid_ok = !pid.is_empty()
        && pid.chars().all(|c| c.is_ascii_digit())
        && (pid == "0" || !pid.starts_with('0'))
        && pid.parse::<u32>().is_ok();
    let nonce_ok = nonce.len() == 16
        && nonce.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
        && nonce != "0000000000000000";
    name_ok && pid_ok && nonce_ok
}

type Meta = (String, String, String, String, String, String, String);

fn meta(f: &Family) -> Meta {
    (
        f.kind.as_str().into(),
        format!("{:?}", f.unit),
        f.unit_text.clone(),
        f.value_type.as_str().into(),
        f.dimension.clone(),
        // Not the help: it is no part of a family's identity (§15.4).
        format!("{:?}", f.buckets),
        f.gauge_mode.as_str().into(),
    )
}

/// §15.3 and §15.4, read independently, shown as the `.expect` shows them.
fn oracle(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| is_segment_name(n))
        .collect();
    names.sort_by_key(|n| {
        let p: Vec<&str> = n.split('.').collect();
        (
            p[0].to_string(),
            p[1].parse::<u32>().unwrap(),
            p[2].to_string(),
        )
    });
    let mut problems = Vec::new();
    // §15.2: past the reader's stated limit, the first files in name
    // order are read and the directory reports `limit`.
    let max = dir_vectors::max_segments(&dir.file_name().unwrap().to_string_lossy());
    if names.len() > max {
        names.truncate(max);
        problems.push(format!(
            "problem {} limit family=\"\"",
            dir.file_name().unwrap().to_string_lossy()
        ));
    }
    // Every file read first: a family's reference file (§15.4) is known
    // only once all are.
    let mut read = Vec::new();
    for n in &names {
        let opts = Options {
            require_live: false,
            ..Options::default()
        };
        let mut seg = match Segment::open_with(dir.join(n), opts) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("problem {n} {} family=\"\"", e.code()));
                continue;
            }
        };
        let snap = match seg.snapshot() {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("problem {n} {} family=\"\"", e.code()));
                continue;
            }
        };
        let live = matches!(
            seg.status().unwrap().1,
            Liveness::Alive | Liveness::Kernel | Liveness::Silent { .. }
        );
        let started = seg.info().unwrap().header.writer_start_ns;
        read.push((n.clone(), live, started, snap));
    }
    // §15.5: the kept file, read first; the segments it lists are
    // counted there, not again. Its list's members without labels are
    // identities; those labelled role=reference, its families' starts.
    let mut starts: BTreeMap<String, u64> = BTreeMap::new();
    let kept_opts = Options {
        require_live: false,
        ..Options::default()
    };
    if let Ok(mut kept) = Segment::open_with(dir.join(KEPT_NAME), kept_opts) {
        let mut snap = kept.snapshot().unwrap();
        let mut identities = Vec::new();
        if let Some(f) = snap.family("perfabi.folded") {
            for m in &f.members {
                let Reading::Unsigned(v) = snap.reading(f, m) else {
                    panic!("{m:?}")
                };
                match &m.labels[..] {
                    [] => identities.push(m.instance.clone()),
                    [(k, r)] if k == "role" && r == "reference" => {
                        starts.insert(m.instance.clone(), v);
                    }
                    _ => {}
                }
            }
        }
        snap.families.retain(|f| f.name != "perfabi.folded");
        read.retain(|(n, ..)| {
            let p: Vec<&str> = n.split('.').collect();
            !identities.contains(&format!("{}.{}", p[1], p[2]))
        });
        read.insert(0, (KEPT_NAME.to_string(), false, 0, snap));
    }
    let segments = read.len() - usize::from(read.first().is_some_and(|r| r.0 == KEPT_NAME));
    // §15.4: a file's rank for family `name`: live, then start (the kept
    // file's, the one it records for that family), then a segment file
    // above the kept file.
    let rank = |k: usize, name: &str| {
        let (n, live, started, _) = &read[k];
        if n == KEPT_NAME {
            (false, starts.get(name).copied().unwrap_or(0), false)
        } else {
            (*live, *started, true)
        }
    };
    // name -> the reference: the highest rank, the first of equals.
    let mut reference: BTreeMap<String, ((bool, u64, bool), usize)> = BTreeMap::new();
    for (k, (_, _, _, snap)) in read.iter().enumerate() {
        for f in &snap.families {
            let this = rank(k, &f.name);
            let r = reference.entry(f.name.clone()).or_insert((this, k));
            if this > r.0 {
                *r = (this, k);
            }
        }
    }
    // name -> (family, reference file, conflict, writers, series)
    #[allow(clippy::type_complexity)]
    let mut fams: BTreeMap<
        String,
        (
            Family,
            String,
            bool,
            usize,
            BTreeMap<(String, Vec<(String, String)>), Reading>,
        ),
    > = BTreeMap::new();
    // name -> the dead files whose family of it is left out, in order.
    let mut left_out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, live, _, snap) in &read {
        for f in &snap.families {
            let (_, k) = reference[&f.name];
            let (ref_file, _, _, ref_snap) = &read[k];
            let r = ref_snap.family(&f.name).unwrap();
            let e = fams
                .entry(f.name.clone())
                .or_insert_with(|| (r.clone(), ref_file.clone(), false, 0, BTreeMap::new()));
            if e.2 {
                continue;
            }
            if meta(r) != meta(f) {
                if *live {
                    e.2 = true;
                } else {
                    left_out
                        .entry(f.name.clone())
                        .or_default()
                        .push(format!("problem {n} family-conflict family={:?}", f.name));
                }
                continue;
            }
            e.3 += 1;
            if f.kind == Kind::Gauge && !live {
                continue;
            }
            for m in &f.members {
                let r = snap.reading(f, m);
                let key = (m.instance.clone(), m.labels.clone());
                let merged = match (e.4.remove(&key), r) {
                    (None, r) => r,
                    (Some(Reading::Unsigned(a)), Reading::Unsigned(b)) => {
                        Reading::Unsigned(match (f.kind, f.gauge_mode.as_str()) {
                            (Kind::Peak, _) | (Kind::Gauge, "max") => a.max(b),
                            (Kind::Gauge, "min") => a.min(b),
                            _ => a.wrapping_add(b),
                        })
                    }
                    (Some(Reading::Signed(a)), Reading::Signed(b)) => {
                        Reading::Signed(match (f.kind, f.gauge_mode.as_str()) {
                            (Kind::Peak, _) | (Kind::Gauge, "max") => a.max(b),
                            (Kind::Gauge, "min") => a.min(b),
                            _ => a.wrapping_add(b),
                        })
                    }
                    (Some(Reading::Histogram(mut a)), Reading::Histogram(b)) => {
                        a.count = a.count.wrapping_add(b.count);
                        a.sum = a.sum.wrapping_add(b.sum);
                        for (x, y) in a.buckets.iter_mut().zip(&b.buckets) {
                            *x = x.wrapping_add(*y);
                        }
                        Reading::Histogram(a)
                    }
                    (Some(a), b) => panic!("{a:?} and {b:?} under agreeing metadata"),
                };
                e.4.insert(key, merged);
            }
        }
    }
    let mut out = format!("segments: {segments}\n");
    for (name, (f, first, conflict, writers, series)) in &fams {
        if *conflict {
            // A family refused whole: its left-out files are not said.
            problems.push(format!("problem {first} family-conflict family={name:?}"));
            continue;
        }
        problems.extend(left_out.remove(name).unwrap_or_default());
        out += &format!(
            "family {name} {} unit={:?} dimension={:?} gauge_mode={} writers={writers} help={:?}\n",
            f.kind.as_str(),
            f.unit_text,
            f.dimension,
            f.gauge_mode.as_str(),
            f.help
        );
        for ((instance, labels), r) in series {
            out += &format!(
                "  series instance={instance:?} labels={labels:?} value={}\n",
                dir_vectors::show(r)
            );
        }
    }
    for p in problems {
        out += &p;
        out.push('\n');
    }
    out
}

#[test]
fn an_independent_reading_of_the_directory_vectors_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, _) in dir_vectors::ALL {
        let committed = std::fs::read_to_string(vectors().join(format!("{name}.expect"))).unwrap();
        let dir = dir_vectors::copy_committed(&vectors(), tmp.path(), name);
        let independent = oracle(&dir);
        println!("{independent}");
        assert_eq!(independent, committed, "{name}");
    }
}
