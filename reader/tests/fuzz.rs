//! Property tests: every segment image — arbitrary bytes, or a test vector
//! with random bytes changed, random header words or a random length — opens
//! as a typed error or reads as Ok / typed errors, never a panic, a hang or a
//! signal.
//!
//! CI runs a bounded number of cases. A long run:
//! `PERFABI_FUZZ_CASES=1000000 cargo test -p perfabi-reader --release --test fuzz -- --nocapture`

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use perfabi_reader::{Options, Segment};
use proptest::prelude::*;

static OK: AtomicU64 = AtomicU64::new(0);
static ERR: AtomicU64 = AtomicU64::new(0);

/// `PERFABI_FUZZ_CASES` cases (or `default`), failures reported, not saved.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PERFABI_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn vectors() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    v.sort();
    v.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// A private folder on tmpfs (like real segments) when there is one.
fn scratch() -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    tempfile::tempdir_in(base).unwrap()
}

/// Opens `bytes` as a segment file and exercises every read.
fn exercise(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    let opts = Options {
        require_live: false,
        retries: 8,
        ..Options::default()
    };
    let mut seg = match Segment::open_with(path, opts) {
        Ok(s) => s,
        Err(_) => {
            ERR.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let results = [
        seg.info().map(|_| ()),
        seg.instances().map(|_| ()),
        seg.snapshot().map(|_| ()),
        seg.damon().map(|_| ()),
        seg.counter("net.rx_bytes").map(|_| ()),
    ];
    if results.iter().all(Result::is_ok) {
        OK.fetch_add(1, Ordering::Relaxed);
    } else {
        ERR.fetch_add(1, Ordering::Relaxed);
    }
    // The in-memory route of the same image (perfabi::validate, no mapping).
    let _ = perfabi::validate(bytes);
}

/// A change to a vector: byte writes, a header word, and a new length.
#[derive(Debug, Clone)]
struct Mutation {
    vector: usize,
    bytes: Vec<(usize, u8)>,
    header_word: Option<(usize, u64)>,
    len: Option<usize>,
}

fn mutation(nvec: usize) -> impl Strategy<Value = Mutation> {
    (
        0..nvec,
        prop::collection::vec((any::<usize>(), any::<u8>()), 0..16),
        prop::option::of((0..perfabi::layout::HEADER_WORDS, any::<u64>())),
        prop::option::weighted(0.2, any::<usize>()),
    )
        .prop_map(|(vector, bytes, header_word, len)| Mutation {
            vector,
            bytes,
            header_word,
            len,
        })
}

fn apply(base: &[u8], m: &Mutation) -> Vec<u8> {
    let mut b = base.to_vec();
    if b.is_empty() {
        return b;
    }
    for &(at, v) in &m.bytes {
        // Bias toward the header page and instance table, where decisions are.
        let at = if at % 2 == 0 {
            at % b.len().min(8192)
        } else {
            at % b.len()
        };
        b[at] = v;
    }
    if let Some((w, v)) = m.header_word {
        if b.len() >= (w + 1) * 8 {
            b[w * 8..w * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
    if let Some(len) = m.len {
        b.truncate(len % (b.len() + 1));
    }
    b
}

#[test]
fn arbitrary_bytes_never_panic() {
    let dir = scratch();
    let path = dir.path().join("arbitrary.seg");
    let cfg = config(2_000);
    let cfg = ProptestConfig {
        cases: cfg.cases / 4 + 1,
        ..cfg
    };
    let n = cfg.cases;
    proptest!(cfg, |(bytes in prop::collection::vec(any::<u8>(), 0..12_000))| {
        exercise(&path, &bytes);
    });
    println!("arbitrary bytes: {n} cases, no panic");
}

#[test]
fn mutated_vectors_never_panic() {
    let vecs = vectors();
    assert!(vecs.len() >= 20);
    let dir = scratch();
    let path = dir.path().join("mutated.seg");
    let cfg = config(2_000);
    let n = cfg.cases;
    proptest!(cfg, |(m in mutation(vecs.len()))| {
        exercise(&path, &apply(&vecs[m.vector], &m));
    });
    println!(
        "mutated vectors: {n} cases, no panic ({} read fully, {} typed errors, over both fuzz tests)",
        OK.load(Ordering::Relaxed),
        ERR.load(Ordering::Relaxed)
    );
}
