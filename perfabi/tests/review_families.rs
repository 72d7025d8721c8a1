//! Review findings on the ABI 1.1 family decoding (spec §5.1, §5.4).

use perfabi::error::{Error, FamilyField};
use perfabi::family::{decode_family, Buckets, FamilySpec};
use perfabi::Unit;

/// §5.1: `nr_buckets` is 2..=32 and §5.4 names the field `buckets` when it
/// is out of range. An EXPLICIT histogram whose `nr_buckets` is 33 (or
/// u32::MAX) but whose 31 bounds are strictly increasing is decoded as a
/// valid histogram of 32 buckets: the count is taken from the bounds that
/// fit, not from the field.
#[test]
fn explicit_histogram_with_nr_buckets_past_32_is_refused() {
    let bounds: Vec<u64> = (1..=31).collect();
    let spec = FamilySpec::histogram("lat", "latency", "", Unit::NS, Buckets::Explicit(bounds));
    let mut e = spec.entry(1).unwrap();
    assert_eq!(e.nr_buckets, 32);
    assert!(decode_family(0, &e).unwrap().is_some());
    for n in [33, 100, u32::MAX] {
        e.nr_buckets = n;
        assert_eq!(
            decode_family(0, &e),
            Err(Error::BadFamily {
                slot: 0,
                field: FamilyField::Buckets
            }),
            "nr_buckets {n}"
        );
    }
}

/// Every vector the spec's text names after "Vector"/"Vectors" exists in
/// spec/vectors (§5.1's histogram paragraph names `family_histogram_log2`,
/// which does not).
#[test]
fn every_vector_the_spec_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = std::fs::read_to_string(root.join("spec/PERFABI.md")).unwrap();
    let mut missing = Vec::new();
    for line in spec.lines() {
        for (at, _) in line.match_indices("Vector") {
            let rest = &line[at..];
            let rest = rest.split('.').next().unwrap_or("");
            for (k, tok) in rest.split('`').enumerate() {
                if k % 2 == 1
                    && tok
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && !root.join(format!("spec/vectors/{tok}.bin")).exists()
                    // A directory vector (§15.6).
                    && !root.join(format!("spec/vectors/{tok}")).is_dir()
                {
                    missing.push(tok.to_string());
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "vectors named by the spec but missing: {missing:?}"
    );
}
