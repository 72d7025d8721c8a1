//! Review of the cached `needs` of a `Snapshot` (the value slots its
//! families reach): it must describe the families the snapshot holds, or a
//! snapshot of the same (epoch, generation) keeps families that reach past
//! the slots it copied, and `Snapshot::words` indexes out of its values.
#![cfg(not(loom))]

#[allow(dead_code)]
#[path = "support/vectors.rs"]
mod vectors;

use perfabi::layout::{Header, HEADER_SIZE_V1_0};
use perfabi::Word as AtomicU64;
use perfabi::{SegmentView, Snapshot};

/// The reference image (slot 0 live, 1 free, 2 live: families reach 3
/// slots) with `instances_used` set to `used`, at the same epoch and
/// generation: what a hostile writer can store at any time.
fn image(used: u64) -> Vec<AtomicU64> {
    let mut img = vectors::base();
    let mut h: Header = bytemuck::pod_read_unaligned(&img.0[..HEADER_SIZE_V1_0]);
    h.instances_used = used;
    img.0[..HEADER_SIZE_V1_0].copy_from_slice(bytemuck::bytes_of(&h));
    img.0
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect()
}

fn snapshot_of(words: &[AtomicU64], snap: &mut Snapshot) -> Result<(), perfabi::Error> {
    SegmentView::new(words).unwrap().snapshot_into(snap, 16)
}

/// Every member of every family lies inside the slots copied.
fn families_inside(s: &Snapshot) -> bool {
    s.families
        .iter()
        .flat_map(|f| &f.members)
        .all(|m| m.value_slot as usize + m.words as usize <= s.slots)
}

/// pmdaperfabi's `share_tables` hands the decoded tables of one snapshot to
/// another of the same (epoch, generation) by swapping their `families`
/// (public fields). The cached `needs` must follow the families, not stay
/// with the snapshot: else a later snapshot that finds fewer slots in use
/// at that generation keeps families reaching past them.
#[test]
fn swapped_families_never_reach_past_the_slots_copied() {
    let (one, two, three) = (image(1), image(2), image(3));
    let mut a = Snapshot::default();
    snapshot_of(&one, &mut a).unwrap();
    let mut b = Snapshot::default();
    snapshot_of(&three, &mut b).unwrap();
    assert_eq!((a.slots, b.slots), (1, 3));
    assert_eq!((a.families.len(), b.families.len()), (1, 2));
    // As share_tables does: the tables change hands, values stay.
    std::mem::swap(&mut a.families, &mut b.families);
    std::mem::swap(&mut a.instances, &mut b.instances);
    // Two slots in use at the same generation: slot 2 is outside.
    snapshot_of(&two, &mut a).unwrap();
    assert_eq!(a.slots, 2);
    assert!(
        families_inside(&a),
        "{:#?} over {} slots",
        a.families,
        a.slots
    );
    for f in &a.families {
        for m in &f.members {
            // Panics (index out of range) if a member is outside.
            let _ = a.reading(f, m);
        }
    }
    // And the other way round: b, with the families of `one`.
    snapshot_of(&two, &mut b).unwrap();
    assert!(families_inside(&b));
}
