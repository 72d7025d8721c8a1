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
