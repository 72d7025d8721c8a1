//! The test vectors of `spec/vectors/`: each image decodes to its `.expect`
//! text (a typed error for every corruption, never a panic), and the files
//! are exactly what `examples/make_vectors.rs` generates.
#![cfg(not(loom))]

#[path = "support/vectors.rs"]
mod vectors;

use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
}

#[test]
fn every_vector_decodes_as_expected() {
    let mut n = 0;
    let mut files: Vec<_> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    // Every vector is decoded, and every one that differs is named: a
    // changed check shows the whole set of vectors that notice it (the
    // table of `tests/mutants`), not only the first.
    let mut differ = Vec::new();
    for bin in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
    {
        let name = bin.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(bin).unwrap();
        let expect = std::fs::read_to_string(bin.with_extension("expect"))
            .unwrap_or_else(|_| panic!("{} has no .expect file", bin.display()));
        let got = std::panic::catch_unwind(|| vectors::describe(&bytes))
            .unwrap_or_else(|_| format!("decoding {name} panicked\n"));
        if got == expect {
            println!("vector {name}: {}", expect.lines().next().unwrap());
        } else {
            let line = |t: &str, k: usize| t.lines().nth(k).unwrap_or("").to_string();
            let k = (0..).find(|&k| line(&got, k) != line(&expect, k)).unwrap();
            println!(
                "vector {name}: DIFFERS at line {}:\n  expected {}\n  got      {}",
                k + 1,
                line(&expect, k),
                line(&got, k)
            );
            differ.push(name);
        }
        n += 1;
    }
    assert!(
        differ.is_empty(),
        "vectors decoded otherwise than their .expect: {}",
        differ.join(" ")
    );
    assert!(n >= 20, "only {n} vectors found");
}

#[test]
fn committed_vectors_equal_the_generator() {
    for (name, bytes) in vectors::all() {
        let on_disk = std::fs::read(dir().join(format!("{name}.bin"))).unwrap_or_else(|_| {
            panic!("{name}.bin missing: run cargo run -p perfabi --example make_vectors")
        });
        assert!(
            on_disk == bytes,
            "{name}.bin is stale: run cargo run -p perfabi --example make_vectors"
        );
    }
}

#[test]
fn every_prefix_and_every_byte_flip_of_a_valid_vector_is_ok_or_a_typed_error() {
    let base = vectors::base().0;
    for len in (0..base.len()).step_by(61) {
        let _ = vectors::describe(&base[..len & !7]);
    }
    for at in (0..perfabi::layout::HEADER_SIZE_V1_0).chain((4096..4096 + 512).step_by(3)) {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = base.clone();
            b[at] ^= flip;
            let _ = vectors::describe(&b);
        }
    }
}
