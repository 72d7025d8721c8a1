//! The reference reader against the spec, field by field: a valid segment
//! (`spec/vectors/valid_basic.bin`) has one header field, instance-table
//! field or DAMON record field changed, and the reader's verdict must be
//! the one `spec/PERFABI.md` gives. The verdicts here are an independent
//! implementation of the spec's rules (§4, §4.1, §5, §6.3/6.4, §8 with step 14), written from
//! the text with its own offsets — not from the reader's code — so a rule
//! the reader breaks, or a check it makes in another order, shows up as a
//! disagreement. Results are checked, not only the absence of a panic.
//!
//! A long run: `PERFABI_FUZZ_CASES=200000 cargo test -p perfabi-reader --release --test spec_oracle`

use std::path::Path;

use perfabi::SegmentView;
use proptest::prelude::*;

mod spec_text;
use spec_text::*;

fn valid_basic() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/valid_basic.bin"))
        .unwrap()
}

/// §8, in its order: the code of the first rule the header breaks.
fn header_verdict(b: &[u8]) -> Result<(), &'static str> {
    if b.len() < 192 {
        return Err("truncated");
    }
    if &b[0..8] != b"PERFABI\0" {
        return Err("bad-magic");
    }
    match u32_at(b, 16) {
        0x0102_0304 => {}
        0x0403_0201 => return Err("foreign-byte-order"),
        _ => return Err("bad-byte-order"),
    }
    if u16_at(b, 8) != 1 {
        return Err("unsupported-major");
    }
    let page = u32_at(b, 20);
    if !page.is_power_of_two() || !(4096..=65536).contains(&page) {
        return Err("bad-page-size");
    }
    let cpus = u32_at(b, 24);
    if !(1..=8192).contains(&cpus) {
        return Err("bad-cpu-count");
    }
    let (maxi, damon) = (u32_at(b, 32), u32_at(b, 36));
    if !(1..=65536).contains(&maxi) || damon > 1_048_576 {
        return Err("bad-capacity");
    }
    let hsize = u32_at(b, 12);
    if hsize < 192 || hsize > page || !hsize.is_multiple_of(8) {
        return Err("bad-header-size");
    }
    if u32_at(b, 40) != 128 || u32_at(b, 44) != 64 {
        return Err("bad-record-size");
    }
    let seg = u64_at(b, 56);
    if seg > b.len() as u64 {
        return Err("truncated");
    }
    let (io, isz) = (u64_at(b, 64), u64_at(b, 72));
    if io % page != 0 {
        return Err("misaligned");
    }
    if io < page {
        return Err("overlap");
    }
    if isz % page != 0 || isz < maxi * 128 {
        return Err("bad-table-size");
    }
    let table_end = io
        .checked_add(isz)
        .filter(|&e| e <= seg)
        .ok_or("out-of-bounds")?;
    let (ca, ppc, cbs) = (u64_at(b, 80), u32_at(b, 28), u64_at(b, 88));
    if ca % page != 0 {
        return Err("misaligned");
    }
    if ca < table_end {
        return Err("overlap");
    }
    if ppc == 0 || ppc.checked_mul(page) != Some(cbs) {
        return Err("bad-block-size");
    }
    cbs.checked_mul(cpus)
        .and_then(|a| a.checked_add(ca))
        .filter(|&e| e <= seg)
        .ok_or("out-of-bounds")?;
    let (co, dof) = (u32_at(b, 48), u32_at(b, 52));
    if co % 64 != 0 {
        return Err("misaligned");
    }
    if co < 128 {
        return Err("overlap");
    }
    if dof % 64 != 0 {
        return Err("misaligned");
    }
    if dof < co + 8 * maxi {
        return Err("overlap");
    }
    if dof + 64 * damon > cbs {
        return Err("out-of-bounds");
    }
    // Step 14, for minor 1 and later (§4.1).
    if u16_at(b, 10) < 1 {
        return Ok(());
    }
    if hsize < 256 {
        return Err("bad-header-size");
    }
    let (mf, mm) = (u32_at(b, 224), u32_at(b, 228));
    if mf == 0 && mm == 0 {
        return Ok(());
    }
    if u32_at(b, 232) != 512 || u32_at(b, 236) != 384 {
        return Err("bad-record-size");
    }
    if !(1..=65536).contains(&mf) || mm > 65536 {
        return Err("bad-capacity");
    }
    // cpus * cbs + ca fits: checked above.
    let area_end = ca + cpus * cbs;
    let table = |off: u64, size: u64, n: u64, entry: u64, after: u64| {
        if !off.is_multiple_of(page) {
            return Err("misaligned");
        }
        if off < after {
            return Err("overlap");
        }
        if !size.is_multiple_of(page) || size < n * entry {
            return Err("bad-table-size");
        }
        off.checked_add(size)
            .filter(|&e| e <= seg)
            .ok_or("out-of-bounds")
    };
    let families_end = table(u64_at(b, 192), u64_at(b, 200), mf, 512, area_end)?;
    if mm > 0 {
        table(u64_at(b, 208), u64_at(b, 216), mm, 384, families_end)?;
    }
    Ok(())
}

/// The fields of §4.1 (offset, size).
const FAMILY_HEADER_FIELDS: [(usize, usize); 10] = [
    (192, 8),
    (200, 8),
    (208, 8),
    (216, 8),
    (224, 4),
    (228, 4),
    (232, 4),
    (236, 4),
    (240, 8),
    (248, 8),
];

/// The header fields of §4 (offset, size) that a reader checks or reads.
const HEADER_FIELDS: [(usize, usize); 24] = [
    (0, 8),
    (8, 2),
    (10, 2),
    (12, 4),
    (16, 4),
    (20, 4),
    (24, 4),
    (28, 4),
    (32, 4),
    (36, 4),
    (40, 4),
    (44, 4),
    (48, 4),
    (52, 4),
    (56, 8),
    (64, 8),
    (72, 8),
    (80, 8),
    (88, 8),
    (96, 8),
    (104, 8),
    (120, 8),
    (152, 8),
    (160, 8),
];

/// A new value for a field: near its old value, a boundary, or anything.
fn new_value(old: u64, size: usize, pick: u8, random: u64) -> u64 {
    let v = match pick % 12 {
        0 => 0,
        1 => 1,
        2 => old.wrapping_add(1),
        3 => old.wrapping_sub(1),
        4 => old.wrapping_mul(2),
        5 => old / 2,
        6 => old.wrapping_add(64),
        7 => old.wrapping_add(4096),
        8 => old.wrapping_sub(4096),
        9 => u64::MAX,
        10 => 1 << (random % 64),
        _ => random,
    };
    if size == 8 {
        v
    } else {
        v & ((1u64 << (size * 8)) - 1)
    }
}

#[test]
fn every_header_field_change_gets_the_spec_s_verdict() {
    header_changes(valid_basic(), &HEADER_FIELDS, &[]);
}

/// The same on an ABI 1.1 segment (`family_every_kind`), its §4.1 fields
/// included.
#[test]
fn every_header_field_change_of_a_1_1_segment_gets_the_spec_s_verdict() {
    let base = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/family_every_kind.bin"),
    )
    .unwrap();
    let fields: Vec<(usize, usize)> = HEADER_FIELDS
        .iter()
        .chain(&FAMILY_HEADER_FIELDS)
        .copied()
        .collect();
    header_changes(base, &fields, &["bad-header-size", "bad-record-size"]);
}

/// Changes one or two of `fields` of `base` at random; the reader's verdict
/// must be the oracle's. Every code of the usual list, and `also`, must be
/// met.
fn header_changes(base: Vec<u8>, fields: &[(usize, usize)], also: &[&str]) {
    let fields = fields.to_vec();
    let field_count = fields.len();
    assert_eq!(header_verdict(&base), Ok(()));
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::<&str, u32>::new());
    proptest!(cases(4000), |(f in 0..field_count, pick in any::<u8>(), random in any::<u64>(), second in prop::option::weighted(0.3, (0..field_count, any::<u8>())))| {
        let mut b = base.clone();
        let (at, size) = fields[f];
        let old = match size { 2 => u16_at(&b, at), 4 => u32_at(&b, at), _ => u64_at(&b, at) };
        put(&mut b, at, size, new_value(old, size, pick, random));
        // Sometimes two fields at once: the order of checks decides.
        if let Some((g, p)) = second {
            let (at, size) = fields[g];
            let old = match size { 2 => u16_at(&b, at), 4 => u32_at(&b, at), _ => u64_at(&b, at) };
            put(&mut b, at, size, new_value(old, size, p, random.rotate_left(17)));
        }
        let want = header_verdict(&b);
        let got = perfabi::validate(&b).map(drop).map_err(|e| e.code());
        prop_assert_eq!(got, want, "field at {} := {:#x}", at, u64_at(&b, at & !7));
        *seen.borrow_mut().entry(want.err().unwrap_or("ok")).or_default() += 1;
    });
    let seen = seen.into_inner();
    println!("header field changes, verdicts met: {seen:?}");
    // The mutations reach past the first checks: most codes are exercised.
    for code in [
        "bad-magic",
        "bad-page-size",
        "bad-capacity",
        "bad-table-size",
        "bad-block-size",
        "misaligned",
        "overlap",
        "out-of-bounds",
        "truncated",
        "ok",
    ]
    .iter()
    .chain(also)
    {
        assert!(seen.contains_key(code), "no case ended in {code}: {seen:?}");
    }
}

/// §5: the verdict on the live entries of slots `0..used` (the image's
/// header is valid): the first entry breaking a rule, then uniqueness.
fn table_verdict(b: &[u8], table: usize, used: usize) -> Result<usize, &'static str> {
    let mut live = Vec::new();
    for slot in 0..used {
        let e = &b[table + slot * 128..table + slot * 128 + 128];
        match u32_at(e, 88) {
            0 => continue,
            1 => {}
            _ => return Err("bad-entry"),
        }
        let name = name_rule(&e[0..64]).ok_or("bad-entry")?;
        let unit_end = e[64..80].iter().position(|&c| c == 0).ok_or("bad-entry")?;
        if !e[64..64 + unit_end].iter().all(|c| c.is_ascii_graphic()) {
            return Err("bad-entry");
        }
        let reg = u64_at(e, 80);
        if reg == 0 || !(1..=2).contains(&u32_at(e, 92)) || !(1..=2).contains(&u32_at(e, 96)) {
            return Err("bad-entry");
        }
        live.push((reg, clash_key(&name)));
    }
    let mut regs: Vec<_> = live.iter().map(|l| l.0).collect();
    regs.sort_unstable();
    regs.dedup();
    if regs.len() != live.len() {
        return Err("bad-entry");
    }
    let mut keys: Vec<_> = live.iter().map(|l| l.1.clone()).collect();
    keys.sort();
    keys.dedup();
    if keys.len() != live.len() {
        return Err("name-clash");
    }
    Ok(live.len())
}

/// Bytes a name field may be made of: the rule's alphabet, and some it
/// forbids.
const NAME_BYTES: &[u8] = b"ab_x.0Z\0-t";

#[test]
fn every_table_entry_change_gets_the_spec_s_verdict() {
    let base = valid_basic();
    let table = u64_at(&base, 64) as usize;
    let used = u64_at(&base, 160) as usize;
    assert_eq!(table_verdict(&base, table, used), Ok(2));
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::<&str, u32>::new());
    let fields: [(usize, usize); 5] = [(80, 8), (88, 4), (92, 4), (96, 4), (64, 1)];
    proptest!(cases(4000), |(slot in 0..used, kind in 0..7usize, pick in any::<u8>(), random in any::<u64>(), name in prop::collection::vec(prop::sample::select(NAME_BYTES), 0..12), copy_from in 0..used)| {
        let mut b = base.clone();
        let e = table + slot * 128;
        match kind {
            // A name made of the alphabet above (may clash with another).
            0 => {
                b[e..e + 64].fill(0);
                b[e..e + name.len()].copy_from_slice(&name);
            }
            // Another live slot's name, with a suffix or a dot changed.
            1 => {
                let other = table + copy_from * 128;
                let src: Vec<u8> = b[other..other + 64].to_vec();
                b[e..e + 64].copy_from_slice(&src);
                let end = b[e..e + 64].iter().position(|&c| c == 0).unwrap_or(0);
                let tail: &[u8] = [&b"_total"[..], b"_count", b"_sum", b"", b"s"][pick as usize % 5];
                if end + tail.len() < 64 {
                    b[e + end..e + end + tail.len()].copy_from_slice(tail);
                }
                if pick % 3 == 0 {
                    if let Some(d) = b[e..e + 64].iter().position(|&c| c == b'.') {
                        b[e + d] = b'_';
                    }
                }
            }
            // Another live slot's registration id.
            2 => {
                let r = u64_at(&b, table + copy_from * 128 + 80);
                put(&mut b, e + 80, 8, r);
            }
            // A field set anew.
            k => {
                let (at, size) = fields[k - 3];
                let old = if size == 8 { u64_at(&b, e + at) } else if size == 4 { u32_at(&b, e + at) } else { u64::from(b[e + at]) };
                put(&mut b, e + at, size, new_value(old, size, pick, random) % if size == 1 { 256 } else { u64::MAX });
            }
        }
        let want = table_verdict(&b, table, used);
        let words = view_of(&b);
        let view = SegmentView::new(&words).unwrap();
        let got = view.snapshot(4).map(|s| s.instances.len()).map_err(|e| e.code());
        prop_assert_eq!(got, want, "slot {} kind {}", slot, kind);
        *seen.borrow_mut().entry(want.err().unwrap_or("ok")).or_default() += 1;
    });
    let seen = seen.into_inner();
    println!("instance table changes, verdicts met: {seen:?}");
    for code in ["bad-entry", "name-clash", "ok"] {
        assert!(seen.contains_key(code), "no case ended in {code}: {seen:?}");
    }
}

#[test]
fn every_damon_record_change_leaves_only_whole_valid_aggregations() {
    let base = valid_basic();
    let words = view_of(&base);
    let before = SegmentView::new(&words).unwrap().damon(4).aggregations;
    assert_eq!(before.len(), 1);
    let layout = perfabi::validate(&base).unwrap();
    let kept = std::cell::Cell::new(0u32);
    proptest!(cases(3000), |(cpu in 0..2usize, slot in 0..2usize, word in 0..8usize, pick in any::<u8>(), random in any::<u64>())| {
        let mut b = base.clone();
        let at = layout.damon_word(cpu, slot) * 8 + word * 8;
        let old = u64_at(&b, at);
        put(&mut b, at, 8, new_value(old, 8, pick, random));
        let words = view_of(&b);
        let read = SegmentView::new(&words).unwrap().damon(4);
        for a in &read.aggregations {
            // §6.4: whole (all of nr_regions, from one aggregation), sorted,
            // non-overlapping, non-empty regions, and frequencies in 0..=1.
            prop_assert!(!a.regions.is_empty());
            prop_assert!(a.intervals.sample_us > 0 && a.intervals.aggr_us > 0);
            for r in &a.regions {
                prop_assert!(r.start < r.end, "{:?}", r);
                let f = a.frequency(r);
                prop_assert!((0.0..=1.0).contains(&f), "{}", f);
            }
            for w in a.regions.windows(2) {
                prop_assert!(w[0].end <= w[1].start, "{:?}", w);
            }
            if *a == before[0] {
                kept.set(kept.get() + 1);
            }
        }
    });
    println!(
        "DAMON record changes: the untouched aggregation was returned {} times, every one whole",
        kept.get()
    );
}
