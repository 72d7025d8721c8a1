//! The reference reader against the spec, for ABI 1.1 family and member
//! entries: a valid 1.1 segment (`spec/vectors/family_every_kind.bin`) has
//! one (sometimes two) fields of its family table, member table, dynamic
//! counts (`instances_used`, `families_used`, `members_used`) or per-CPU
//! values changed, and the reader's verdict must be the one
//! `spec/PERFABI.md` gives (§5.1–§5.4, §8 "Hidden fields", §11.6): the code
//! and, for `bad-family`/`bad-member`, the slot and the field (for
//! `bad-histogram`, the member slot and the CPU). Where the
//! segment is valid, the families, members and values the reader presents
//! must be those of the image, and totals those of §5.1 (wrapping sum; the
//! maximum, as the value type compares, for a peak; element by element for
//! a histogram).
//!
//! The verdicts are an independent implementation written from the spec's
//! text with its own offsets, not from `perfabi::family`. Where the text
//! leaves a choice open, the choice made is written down at the rule (see
//! "Reading of the text"). Rules 2, 4, 6 and 7 of §5.4 do not say which
//! slot is named when several break them: any slot involved is accepted
//! (with its field, for rule 7), and how often the reader named another one
//! than this oracle's own reading is printed.
//!
//! A long run: `PERFABI_FUZZ_CASES=50000 cargo test -p perfabi-reader --release --test spec_oracle_families`;
//! with `PERFABI_ORACLE_EXPLORE=1` a disagreement does not stop the run:
//! every kind of disagreement is printed with a first example and a count.

use std::collections::BTreeMap;
use std::path::Path;

use perfabi::family::Origin;
use perfabi::{Error, Reading, SegmentView};
use proptest::prelude::*;

mod spec_text;
use spec_text::*;

fn base_image() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/family_every_kind.bin"),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------
// Offsets, from the spec's tables.

/// §4 and §4.1 header fields this test reads.
mod hdr {
    pub const NR_CPUS: usize = 24; // u32
    pub const MAX_INSTANCES: usize = 32; // u32
    pub const COUNTERS_OFFSET: usize = 48; // u32
    pub const INSTANCES_OFFSET: usize = 64; // u64
    pub const CPU_AREA_OFFSET: usize = 80; // u64
    pub const CPU_BLOCK_SIZE: usize = 88; // u64
    pub const INSTANCES_USED: usize = 160; // u64
    pub const FAMILIES_OFFSET: usize = 192; // u64
    pub const MEMBERS_OFFSET: usize = 208; // u64
    pub const MAX_FAMILIES: usize = 224; // u32
    pub const MAX_MEMBERS: usize = 228; // u32
    pub const FAMILIES_USED: usize = 240; // u64
    pub const MEMBERS_USED: usize = 248; // u64
}

/// §5.1, `struct perfabi_family` (512 bytes).
mod fam {
    pub const SIZE: usize = 512;
    pub const NAME: usize = 0; // char[64]
    pub const HELP: usize = 64; // char[128]
    pub const DIMENSION: usize = 192; // char[32]
    pub const REG_ID: usize = 224; // u64
    pub const STATE: usize = 232; // u32
    pub const KIND: usize = 236; // u32
    pub const UNIT: usize = 240; // struct perfabi_unit, 8 bytes
    pub const VALUE_TYPE: usize = 248; // u32
    pub const NR_BUCKETS: usize = 252; // u32
    pub const BUCKET_LAYOUT: usize = 256; // u32
    pub const LOG2_FIRST: usize = 260; // u32
    pub const BOUNDS: usize = 264; // u64[31]
}

/// §5.3, `struct perfabi_member` (384 bytes).
mod mem {
    pub const SIZE: usize = 384;
    pub const INSTANCE: usize = 0; // char[64]
    pub const REG_ID: usize = 64; // u64
    pub const STATE: usize = 72; // u32
    pub const FAMILY: usize = 76; // u32
    pub const VALUE_SLOT: usize = 80; // u32
    pub const INSTANCE_ID: usize = 84; // u32
    pub const RESERVED0: usize = 88; // u64
    pub const LABELS: usize = 96; // { char key[16]; char value[48]; }[4]
    pub const RESERVED: usize = 352; // u64[4]
}

/// §5, `struct perfabi_instance` (128 bytes).
mod ent {
    pub const SIZE: usize = 128;
    pub const NAME: usize = 0;
    pub const UNIT: usize = 64;
    pub const REG_ID: usize = 80;
    pub const STATE: usize = 88;
    pub const SEMANTICS: usize = 92;
    pub const VALUE_TYPE: usize = 96;
}

/// Where the tables and values are (the header is valid and unchanged but
/// for its dynamic counts).
#[derive(Clone, Copy)]
struct Geo {
    cpus: usize,
    max_instances: u64,
    instances: usize,
    families: usize,
    members: usize,
    max_families: u64,
    max_members: u64,
    cpu_area: usize,
    block: usize,
    counters: usize,
}

impl Geo {
    fn of(b: &[u8]) -> Geo {
        Geo {
            cpus: u32_at(b, hdr::NR_CPUS) as usize,
            max_instances: u32_at(b, hdr::MAX_INSTANCES),
            instances: u64_at(b, hdr::INSTANCES_OFFSET) as usize,
            families: u64_at(b, hdr::FAMILIES_OFFSET) as usize,
            members: u64_at(b, hdr::MEMBERS_OFFSET) as usize,
            max_families: u32_at(b, hdr::MAX_FAMILIES),
            max_members: u32_at(b, hdr::MAX_MEMBERS),
            cpu_area: u64_at(b, hdr::CPU_AREA_OFFSET) as usize,
            block: u64_at(b, hdr::CPU_BLOCK_SIZE) as usize,
            counters: u32_at(b, hdr::COUNTERS_OFFSET) as usize,
        }
    }
    fn family(&self, slot: usize) -> usize {
        self.families + fam::SIZE * slot
    }
    fn member(&self, slot: usize) -> usize {
        self.members + mem::SIZE * slot
    }
    fn entry(&self, slot: usize) -> usize {
        self.instances + ent::SIZE * slot
    }
    /// The byte offset of value `slot` of CPU `cpu` (§3, §6.2).
    fn value(&self, cpu: usize, slot: usize) -> usize {
        self.cpu_area + cpu * self.block + self.counters + 8 * slot
    }
}

// ---------------------------------------------------------------------------
// String rules.

/// §5.3: a label key: `[a-z][a-z0-9_]*`, 1..=`max` bytes (the field has
/// room for a NUL after them), not `cpu`, `le`, `lower_bound` or
/// `upper_bound`.
fn key_rule(s: &[u8], max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s[0].is_ascii_lowercase()
        && s.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
        && s != b"cpu"
        && s != b"le"
        && s != b"lower_bound"
        && s != b"upper_bound"
}

/// §5.1 help: 0..=127 bytes of 0x20..=0x7e.
fn help_rule(field: &[u8]) -> Option<String> {
    let s = cstr(field)?;
    s.iter()
        .all(|c| (0x20..=0x7e).contains(c))
        .then(|| String::from_utf8(s.to_vec()).unwrap())
}

/// §5.3 instance: printable ASCII without space, `"` or `\` (0..=63 bytes
/// here: whether it may be empty is rule 5 of §5.4).
fn instance_bytes_rule(field: &[u8]) -> Option<String> {
    let s = cstr(field)?;
    s.iter()
        .all(|&c| (0x21..=0x7e).contains(&c) && c != b'"' && c != b'\\')
        .then(|| String::from_utf8(s.to_vec()).unwrap())
}

/// §5.3 label value: 1..=47 bytes of printable ASCII (spaces allowed)
/// without `"` or `\`.
fn label_value_rule(field: &[u8]) -> Option<String> {
    let s = cstr(field)?;
    (!s.is_empty()
        && s.iter()
            .all(|&c| (0x20..=0x7e).contains(&c) && c != b'"' && c != b'\\'))
    .then(|| String::from_utf8(s.to_vec()).unwrap())
}

/// §5.2, every rule of the unit encoding.
fn unit_rule(u: &[u8]) -> bool {
    let (ds, dt, dc) = (u[0] as i8, u[1] as i8, u[2] as i8);
    let (ss, st, sc, q, r) = (u[3], u[4], u[5] as i8, u[6], u[7]);
    let dims = [ds, dt, dc].iter().all(|d| (-3..=3).contains(d));
    let scales = ss <= 6 && st <= 5 && (-8..=7).contains(&sc);
    let zero_scales = (ds != 0 || ss == 0) && (dt != 0 || st == 0) && (dc != 0 || sc == 0);
    let quantity = match q {
        0 => true,
        // pages: dim_count 1, all else 0.
        1 => dc == 1 && ds == 0 && dt == 0 && ss == 0 && st == 0 && sc == 0,
        // ratio: every dim_* 0.
        2 => ds == 0 && dt == 0 && dc == 0,
        _ => false,
    };
    dims && scales && zero_scales && quantity && r == 0
}

// ---------------------------------------------------------------------------
// The oracle.

/// The spec's verdict: ok, or a code, with the slot and the field (the
/// spec's field name) for `bad-family` and `bad-member`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Ok,
    Code(&'static str),
    At(&'static str, u32, &'static str),
    /// `bad-histogram`: the member slot and the CPU.
    Histogram(u32, u32),
}

impl Verdict {
    /// The verdict as decided by `rule`, the text leaving no choice.
    fn at(self, rule: &'static str) -> Fault {
        Fault {
            primary: self,
            also: Vec::new(),
            rule,
        }
    }
    fn key_slot(&self) -> String {
        match self {
            Verdict::At(_, s, f) => format!("slot {s} {f}"),
            Verdict::Histogram(s, c) => format!("member slot {s} cpu {c}"),
            v => v.key(),
        }
    }
    fn key(&self) -> String {
        match self {
            Verdict::Ok => "ok".into(),
            Verdict::Code(c) => (*c).into(),
            Verdict::At(c, _, f) => format!("{c}/{f}"),
            Verdict::Histogram(..) => "bad-histogram".into(),
        }
    }
}

/// What the spec says of a refused image: the verdict of this oracle's
/// reading, and (for the rules whose text leaves the slot named open) the
/// other verdicts the text admits, with the rule.
#[derive(Clone, Debug)]
struct Fault {
    primary: Verdict,
    also: Vec<Verdict>,
    rule: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
struct PMember {
    slot: Option<u32>,
    reg_id: u64,
    instance: String,
    instance_id: u32,
    labels: Vec<(String, String)>,
    value_slot: u32,
    words: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct PFamily {
    origin: (bool, u32), // (is a 1.0 entry, slot)
    reg_id: u64,
    name: String,
    help: String,
    dimension: String,
    kind: u32,       // 1 COUNTER, 2 GAUGE, 3 PEAK, 4 HISTOGRAM
    value_type: u32, // 1 U64, 2 I64
    unit: [u8; 8],
    /// A histogram's bounds, `None` for +Inf.
    buckets: Option<Vec<Option<u64>>>,
    /// A gauge's `gauge_mode` (§5.1: the word at 256), else 0.
    gauge_mode: u32,
    members: Vec<PMember>,
}

/// A live family as decoded, with what the cross-entry rules need.
struct DFamily {
    slot: usize,
    p: PFamily,
    nr_buckets: u32,
}

struct DMember {
    slot: usize,
    family: u32,
    p: PMember,
}

/// §5.1: decode family slot `s` (live), each field in order; `Err(field)`
/// names the first field breaking its rule.
///
/// Reading of the text: §5.4 says "each field in table order", which puts
/// `state` (offset 232) after `name`, `help`, `dimension` and `reg_id`;
/// but a free entry is "not checked at all" (§8), so `state` decides first
/// whether anything else is checked, and §5 — whose list is also called
/// "table order" — puts `state` first for 1.0 entries though it is not
/// first in that table either. This oracle checks `state` first, then the
/// rest in table order.
fn decode_family(e: &[u8], slot: usize) -> Result<Option<DFamily>, &'static str> {
    match u32_at(e, fam::STATE) {
        0 => return Ok(None),
        1 => {}
        _ => return Err("state"),
    }
    // §5.1: the rule of §5, and every part starts with a letter.
    let name = name_rule(&e[fam::NAME..fam::NAME + 64])
        .filter(|n| n.split('.').all(|p| p.as_bytes()[0].is_ascii_alphabetic()))
        .ok_or("name")?;
    let help = help_rule(&e[fam::HELP..fam::HELP + 128]).ok_or("help")?;
    let dim = cstr(&e[fam::DIMENSION..fam::DIMENSION + 32]).ok_or("dimension")?;
    if !dim.is_empty() && !key_rule(dim, 31) {
        return Err("dimension");
    }
    let dimension = String::from_utf8(dim.to_vec()).unwrap();
    let reg_id = u64_at(e, fam::REG_ID);
    if reg_id == 0 {
        return Err("reg_id");
    }
    let kind = u32_at(e, fam::KIND) as u32;
    if !(1..=4).contains(&kind) {
        return Err("kind");
    }
    let hist = kind == 4;
    let unit: [u8; 8] = e[fam::UNIT..fam::UNIT + 8].try_into().unwrap();
    if !unit_rule(&unit) {
        return Err("unit");
    }
    let vt = u32_at(e, fam::VALUE_TYPE) as u32;
    // §5.1: a histogram's and a peak's value type is U64.
    if !(1..=2).contains(&vt) || ((hist || kind == 3) && vt != 1) {
        return Err("value_type");
    }
    let nb = u32_at(e, fam::NR_BUCKETS) as u32;
    if (hist && !(2..=32).contains(&nb)) || (!hist && nb != 0) {
        return Err("nr_buckets");
    }
    let layout = u32_at(e, fam::BUCKET_LAYOUT) as u32;
    // §5.1: the word at 256 is a gauge's `gauge_mode` (0..=3).
    if kind == 2 && layout > 3 {
        return Err("gauge_mode");
    }
    if (hist && !(1..=2).contains(&layout)) || (!hist && kind != 2 && layout != 0) {
        return Err("bucket_layout");
    }
    let log2 = hist && layout == 1;
    let explicit = hist && layout == 2;
    let l2 = u32_at(e, fam::LOG2_FIRST);
    if (log2 && l2 + u64::from(nb) - 2 > 63) || (!log2 && l2 != 0) {
        return Err("log2_first");
    }
    let bounds: Vec<u64> = (0..31).map(|k| u64_at(e, fam::BOUNDS + 8 * k)).collect();
    let finite = if explicit { nb as usize - 1 } else { 0 };
    if bounds[..finite].windows(2).any(|w| w[0] >= w[1]) || bounds[finite..].iter().any(|&w| w != 0)
    {
        return Err("bounds");
    }
    let buckets = hist.then(|| {
        (0..nb as usize)
            .map(|k| {
                (k + 1 < nb as usize).then(|| {
                    if log2 {
                        1u64 << (l2 as usize + k)
                    } else {
                        bounds[k]
                    }
                })
            })
            .collect()
    });
    Ok(Some(DFamily {
        slot,
        nr_buckets: nb,
        p: PFamily {
            origin: (false, slot as u32),
            reg_id,
            name,
            help,
            dimension,
            kind,
            value_type: vt,
            unit,
            buckets,
            gauge_mode: if kind == 2 { layout } else { 0 },
            members: Vec::new(),
        },
    }))
}

/// §5.3: decode member slot `s` (live), each field in order (`state` first,
/// as for families); what depends on the family or on other entries is left
/// to §5.4's rules 4–7.
///
/// Reading of the text: `reserved0` (offset 88) is checked where the table
/// puts it, before `labels` (96); §8 names the field of both reserved words
/// `reserved`. Bytes after a string's first NUL are not looked at (§2: the
/// value is the bytes before the first NUL); a label is used when its key
/// is not empty, and an unused one must be all zero, all 64 bytes.
fn decode_member(e: &[u8], slot: usize) -> Result<Option<DMember>, &'static str> {
    match u32_at(e, mem::STATE) {
        0 => return Ok(None),
        1 => {}
        _ => return Err("state"),
    }
    let instance = instance_bytes_rule(&e[mem::INSTANCE..mem::INSTANCE + 64]).ok_or("instance")?;
    let reg_id = u64_at(e, mem::REG_ID);
    if reg_id == 0 {
        return Err("reg_id");
    }
    let family = u32_at(e, mem::FAMILY) as u32;
    let value_slot = u32_at(e, mem::VALUE_SLOT) as u32;
    let instance_id = u32_at(e, mem::INSTANCE_ID) as u32;
    if u64_at(e, mem::RESERVED0) != 0 {
        return Err("reserved");
    }
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut unused_seen = false;
    for k in 0..4 {
        let l = &e[mem::LABELS + 64 * k..mem::LABELS + 64 * k + 64];
        if l[0] == 0 {
            if l.iter().any(|&c| c != 0) {
                return Err("labels");
            }
            unused_seen = true;
            continue;
        }
        if unused_seen {
            return Err("labels");
        }
        let key = cstr(&l[..16]).ok_or("labels")?;
        if !key_rule(key, 15) {
            return Err("labels");
        }
        let key = String::from_utf8(key.to_vec()).unwrap();
        if labels.iter().any(|(k2, _)| *k2 == key) {
            return Err("labels");
        }
        let value = label_value_rule(&l[16..]).ok_or("labels")?;
        labels.push((key, value));
    }
    if (0..4).any(|k| u64_at(e, mem::RESERVED + 8 * k) != 0) {
        return Err("reserved");
    }
    Ok(Some(DMember {
        slot,
        family,
        p: PMember {
            slot: Some(slot as u32),
            reg_id,
            instance,
            instance_id,
            labels,
            value_slot,
            words: 0, // from the family, rule 5
        },
    }))
}

/// §5.2's legacy unit strings.
fn legacy_unit(s: &str) -> [u8; 8] {
    let u: [i8; 7] = match s {
        "bytes" => [1, 0, 0, 0, 0, 0, 0],
        "KiB" => [1, 0, 0, 1, 0, 0, 0],
        "ns" => [0, 1, 0, 0, 0, 0, 0],
        "us" => [0, 1, 0, 0, 1, 0, 0],
        "ms" => [0, 1, 0, 0, 2, 0, 0],
        "s" => [0, 1, 0, 0, 3, 0, 0],
        "count" => [0, 0, 1, 0, 0, 0, 0],
        "pages" => [0, 0, 1, 0, 0, 0, 1],
        "ratio" => [0, 0, 0, 0, 0, 0, 2],
        "bytes/s" => [1, -1, 0, 0, 3, 0, 0],
        _ => [0; 7],
    };
    let mut o = [0u8; 8];
    for (o, u) in o.iter_mut().zip(u) {
        *o = u as u8;
    }
    o
}

/// §5, §5.1–§5.4 on the whole image: the verdict, and for a valid image
/// the families a reader presents.
fn oracle(b: &[u8]) -> Result<Vec<PFamily>, Fault> {
    let g = Geo::of(b);
    let used_i = u64_at(b, hdr::INSTANCES_USED).min(g.max_instances);
    let used_f = u64_at(b, hdr::FAMILIES_USED).min(g.max_families) as usize;
    let used_m = u64_at(b, hdr::MEMBERS_USED).min(g.max_members) as usize;

    // The instance table (§5; not changed by this test, but the used count
    // is).
    let mut entries: Vec<(usize, PFamily, String)> = Vec::new(); // (slot, family, clash key)
    for slot in 0..used_i as usize {
        let e = &b[g.entry(slot)..g.entry(slot) + ent::SIZE];
        match u32_at(e, ent::STATE) {
            0 => continue,
            1 => {}
            _ => return Err(Verdict::Code("bad-entry").at("decode")),
        }
        let name = name_rule(&e[ent::NAME..ent::NAME + 64])
            .ok_or(Verdict::Code("bad-entry").at("decode"))?;
        let unit =
            cstr(&e[ent::UNIT..ent::UNIT + 16]).ok_or(Verdict::Code("bad-entry").at("decode"))?;
        if !unit.iter().all(|c| c.is_ascii_graphic()) {
            return Err(Verdict::Code("bad-entry").at("decode"));
        }
        let unit = String::from_utf8(unit.to_vec()).unwrap();
        let reg = u64_at(e, ent::REG_ID);
        let sem = u32_at(e, ent::SEMANTICS) as u32;
        let vt = u32_at(e, ent::VALUE_TYPE) as u32;
        if reg == 0 || !(1..=2).contains(&sem) || !(1..=2).contains(&vt) {
            return Err(Verdict::Code("bad-entry").at("decode"));
        }
        let key = clash_key(&name);
        entries.push((
            slot,
            PFamily {
                origin: (true, slot as u32),
                reg_id: reg,
                name,
                help: String::new(),
                dimension: String::new(),
                kind: sem, // COUNTER → COUNTER, INSTANT → GAUGE
                value_type: vt,
                unit: legacy_unit(&unit),
                buckets: None,
                gauge_mode: 0,
                members: vec![PMember {
                    slot: None,
                    reg_id: reg,
                    instance: String::new(),
                    instance_id: 0,
                    labels: Vec::new(),
                    value_slot: slot as u32,
                    words: 1,
                }],
            },
            key,
        ));
    }

    // Families, then members, in slot order (§5.4's first paragraph).
    let mut families: Vec<DFamily> = Vec::new();
    for slot in 0..used_f {
        let e = &b[g.family(slot)..g.family(slot) + fam::SIZE];
        match decode_family(e, slot) {
            Ok(Some(f)) => families.push(f),
            Ok(None) => {}
            Err(field) => return Err(Verdict::At("bad-family", slot as u32, field).at("decode")),
        }
    }
    let mut members: Vec<DMember> = Vec::new();
    for slot in 0..used_m {
        let e = &b[g.member(slot)..g.member(slot) + mem::SIZE];
        match decode_member(e, slot) {
            Ok(Some(m)) => members.push(m),
            Ok(None) => {}
            Err(field) => return Err(Verdict::At("bad-member", slot as u32, field).at("decode")),
        }
    }

    // Rule 1: the 1.0 rules.
    for (i, (_, a, _)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(_, c, _)| c.reg_id == a.reg_id) {
            return Err(Verdict::Code("bad-entry").at("rule 1"));
        }
    }
    for (i, (_, _, ka)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(_, _, kc)| kc == ka) {
            return Err(Verdict::Code("name-clash").at("rule 1"));
        }
    }
    // Rules 2, 4, 6 and 7 say what must hold and which code and field a
    // break gets, not which slot is named when several break it: the text
    // admits naming any slot involved in a break (of rule 7, with its
    // field). This oracle's own reading, `primary`, names the first slot,
    // in slot order, breaking the rule against an earlier slot; any other
    // involved slot is accepted too, and counted as the text's open choice.
    let open = |rule: &'static str,
                table: &'static str,
                involved: Vec<(usize, &'static str)>,
                primary: (usize, &'static str)| Fault {
        primary: Verdict::At(table, primary.0 as u32, primary.1),
        also: involved
            .into_iter()
            .map(|(s, f)| Verdict::At(table, s as u32, f))
            .collect(),
        rule,
    };
    // Rule 2.
    let dup = |i: usize| {
        families
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && o.p.reg_id == families[i].p.reg_id)
    };
    if let Some(first) = (0..families.len()).find(|&i| {
        families[..i]
            .iter()
            .any(|o| o.p.reg_id == families[i].p.reg_id)
    }) {
        let involved = (0..families.len())
            .filter(|&i| dup(i))
            .map(|i| (families[i].slot, "reg_id"))
            .collect();
        return Err(open(
            "rule 2",
            "bad-family",
            involved,
            (families[first].slot, "reg_id"),
        ));
    }
    // Rule 3: families against entries and families (raw names for the
    // dotted prefix).
    let dotted_prefix =
        |a: &str, b: &str| b.len() > a.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'.';
    let others: Vec<(&str, String)> = entries
        .iter()
        .map(|(_, p, k)| (p.name.as_str(), k.clone()))
        .collect();
    for (i, f) in families.iter().enumerate() {
        let key = clash_key(&f.p.name);
        let name = f.p.name.as_str();
        let against = others.iter().map(|(n, k)| (*n, k.clone())).chain(
            families[..i]
                .iter()
                .map(|o| (o.p.name.as_str(), clash_key(&o.p.name))),
        );
        for (n, k) in against {
            if k == key || dotted_prefix(name, n) || dotted_prefix(n, name) {
                return Err(Verdict::Code("name-clash").at("rule 3"));
            }
        }
    }
    // Rule 4.
    let dup = |i: usize| {
        members
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && o.p.reg_id == members[i].p.reg_id)
    };
    if let Some(first) = (0..members.len()).find(|&i| {
        members[..i]
            .iter()
            .any(|o| o.p.reg_id == members[i].p.reg_id)
    }) {
        let involved = (0..members.len())
            .filter(|&i| dup(i))
            .map(|i| (members[i].slot, "reg_id"))
            .collect();
        return Err(open(
            "rule 4",
            "bad-member",
            involved,
            (members[first].slot, "reg_id"),
        ));
    }
    // Rule 5, in member slot order (the text says so), each member's checks
    // in the order given.
    for m in members.iter_mut() {
        let slot = m.slot as u32;
        let f = families
            .iter()
            .find(|f| f.slot as u64 == u64::from(m.family))
            .ok_or(Verdict::At("bad-member", slot, "family").at("rule 5"))?;
        if m.p.instance.is_empty() != f.p.dimension.is_empty() {
            return Err(Verdict::At("bad-member", slot, "instance").at("rule 5"));
        }
        if !f.p.dimension.is_empty() && m.p.labels.iter().any(|(k, _)| *k == f.p.dimension) {
            return Err(Verdict::At("bad-member", slot, "labels").at("rule 5"));
        }
        m.p.words = if f.p.kind == 4 { 2 + f.nr_buckets } else { 1 };
        if u64::from(m.p.value_slot) + u64::from(m.p.words) > used_i {
            return Err(Verdict::At("bad-member", slot, "value_slot").at("rule 5"));
        }
    }
    // Rule 6: a member is involved when its range meets a live entry's slot
    // or another live member's range.
    let range = |m: &DMember| {
        (
            m.p.value_slot as usize,
            (m.p.value_slot + m.p.words) as usize,
        )
    };
    let meets = |i: usize, others: &[DMember]| {
        let (lo, hi) = range(&members[i]);
        entries.iter().any(|(s, _, _)| (lo..hi).contains(s))
            || others.iter().any(|o| {
                o.slot != members[i].slot && {
                    let (olo, ohi) = range(o);
                    lo < ohi && olo < hi
                }
            })
    };
    if let Some(first) = (0..members.len()).find(|&i| meets(i, &members[..i])) {
        let involved = (0..members.len())
            .filter(|&i| meets(i, &members))
            .map(|i| (members[i].slot, "value_slot"))
            .collect();
        return Err(open(
            "rule 6",
            "bad-member",
            involved,
            (members[first].slot, "value_slot"),
        ));
    }
    // Rule 7. A family without dimension has members with empty instance
    // strings by rule 5, so a second one repeats the instance string:
    // `instance`. This oracle's reading: members in slot order, each against
    // the earlier live members of its family, the instance string first,
    // then the instance number.
    let repeats = |i: usize, others: &[DMember]| {
        let m = &members[i];
        let same = || {
            others
                .iter()
                .filter(|o| o.slot != m.slot && o.family == m.family)
        };
        if same().any(|o| o.p.instance == m.p.instance) {
            Some("instance")
        } else if same().any(|o| o.p.instance_id == m.p.instance_id) {
            Some("instance_id")
        } else {
            None
        }
    };
    if let Some((first, field)) =
        (0..members.len()).find_map(|i| repeats(i, &members[..i]).map(|f| (i, f)))
    {
        let mut involved = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let same = || {
                members
                    .iter()
                    .filter(|o| o.slot != m.slot && o.family == m.family)
            };
            if same().any(|o| o.p.instance == m.p.instance) {
                involved.push((members[i].slot, "instance"));
            }
            if same().any(|o| o.p.instance_id == m.p.instance_id) {
                involved.push((members[i].slot, "instance_id"));
            }
        }
        return Err(open(
            "rule 7",
            "bad-member",
            involved,
            (members[first].slot, field),
        ));
    }

    // What readers present (§5.4): 1.0 entries, then families by slot, each
    // with its live members by slot.
    let mut out: Vec<PFamily> = entries.into_iter().map(|(_, p, _)| p).collect();
    for mut f in families {
        f.p.members = members
            .iter()
            .filter(|m| m.family as usize == f.slot)
            .map(|m| m.p.clone())
            .collect();
        out.push(f.p);
    }
    // §5.1: in every consistent copy of a CPU's values, a histogram's count
    // is the sum of its buckets modulo 2^64; checked after the entries, CPU
    // by CPU, on each the members in the order presented; the first named.
    for cpu in 0..g.cpus {
        for f in out.iter().filter(|f| f.kind == 4) {
            for m in &f.members {
                let word = |k: usize| u64_at(b, g.value(cpu, m.value_slot as usize + k));
                let buckets = (2..m.words as usize).fold(0u64, |a, k| a.wrapping_add(word(k)));
                if word(0) != buckets {
                    let slot = m.slot.expect("a histogram is a member of the table");
                    return Err(Verdict::Histogram(slot, cpu as u32).at("histogram"));
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// The reader's side.

/// The reader's field enum's name for a spec field.
fn reader_field(table: &str, spec: &str) -> &'static str {
    match (table, spec) {
        (_, "state") => "State",
        (_, "reg_id") => "RegId",
        ("bad-family", "name") => "Name",
        ("bad-family", "help") => "Help",
        ("bad-family", "dimension") => "Dimension",
        ("bad-family", "kind") => "Kind",
        ("bad-family", "unit") => "Unit",
        ("bad-family", "value_type") => "ValueType",
        // One field of the reader for three of the table.
        ("bad-family", "nr_buckets" | "bucket_layout" | "log2_first") => "Buckets",
        ("bad-family", "bounds") => "Bounds",
        ("bad-family", "gauge_mode") => "GaugeMode",
        ("bad-member", "instance") => "Instance",
        ("bad-member", "family") => "Family",
        ("bad-member", "value_slot") => "ValueSlot",
        ("bad-member", "instance_id") => "InstanceId",
        ("bad-member", "labels") => "Labels",
        ("bad-member", "reserved") => "Reserved",
        _ => panic!("no field {spec} in {table}"),
    }
}

/// Whether the reader's error is the verdict `want` (an error).
fn error_matches(e: &Error, want: &Verdict) -> Result<(), String> {
    let shown = format!("{} ({e})", e.code());
    match want {
        Verdict::Ok => Err(format!("reader refused: {shown}")),
        Verdict::Code(c) => (e.code() == *c).then_some(()).ok_or(shown),
        Verdict::At(c, slot, field) => {
            let (got_slot, got_field, prefix) = match e {
                Error::BadFamily { slot, field } => (*slot, format!("{field:?}"), "family"),
                Error::BadMember { slot, field } => (*slot, format!("{field:?}"), "member"),
                _ => return Err(shown),
            };
            let ok = e.code() == *c
                && got_slot == *slot
                && got_field == reader_field(c, field)
                && e.to_string()
                    .starts_with(&format!("{prefix} slot {slot}: "));
            ok.then_some(()).ok_or(format!("{shown} [{got_field}]"))
        }
        Verdict::Histogram(slot, cpu) => {
            let ok =
                *e == Error::BadHistogram {
                    slot: *slot,
                    cpu: *cpu,
                } && e.code() == "bad-histogram"
                    && e.to_string().starts_with(&format!("member slot {slot}: "));
            ok.then_some(()).ok_or(shown)
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    U(u64),
    I(i64),
    H(u64, u64, Vec<u64>),
}

fn val_of(r: Reading) -> Val {
    match r {
        Reading::Unsigned(v) => Val::U(v),
        Reading::Signed(v) => Val::I(v),
        Reading::Histogram(h) => Val::H(h.count, h.sum, h.buckets),
    }
}

/// One CPU's value of a member, from the image's words (§5.1).
fn val_from_words(f: &PFamily, w: &[u64]) -> Val {
    if f.kind == 4 {
        Val::H(w[0], w[1], w[2..].to_vec())
    } else if f.value_type == 2 {
        Val::I(w[0] as i64)
    } else {
        Val::U(w[0])
    }
}

/// §5.1's totals.
fn total_of(f: &PFamily, per_cpu: &[Val]) -> Val {
    let mut it = per_cpu.iter().cloned();
    let first = it.next().unwrap();
    it.fold(first, |acc, v| match (acc, v) {
        (Val::U(a), Val::U(b)) => Val::U(if f.kind == 3 {
            a.max(b)
        } else {
            a.wrapping_add(b)
        }),
        (Val::I(a), Val::I(b)) => Val::I(if f.kind == 3 {
            a.max(b)
        } else {
            a.wrapping_add(b)
        }),
        (Val::H(c, s, bk), Val::H(c2, s2, bk2)) => Val::H(
            c.wrapping_add(c2),
            s.wrapping_add(s2),
            bk.iter()
                .zip(&bk2)
                .map(|(x, y)| x.wrapping_add(*y))
                .collect(),
        ),
        _ => unreachable!(),
    })
}

/// For a valid outcome: the reader presents `want` (families, members and
/// their metadata), every per-CPU value is the image's, every total §5.1's.
fn check_presented(b: &[u8], s: &perfabi::Snapshot, want: &[PFamily]) -> Result<(), String> {
    let g = Geo::of(b);
    if s.nr_cpus != g.cpus {
        return Err(format!("nr_cpus {}", s.nr_cpus));
    }
    let got: Vec<PFamily> = s
        .families
        .iter()
        .map(|f| PFamily {
            origin: match f.origin {
                Origin::Entry(s) => (true, s),
                Origin::Family(s) => (false, s),
            },
            reg_id: f.reg_id,
            name: f.name.clone(),
            help: f.help.clone(),
            dimension: f.dimension.clone(),
            kind: match f.kind.as_str() {
                "counter" => 1,
                "gauge" => 2,
                "peak" => 3,
                "histogram" => 4,
                k => panic!("kind {k}"),
            },
            value_type: match f.value_type.as_str() {
                "u64" => 1,
                "i64" => 2,
                t => panic!("value type {t}"),
            },
            unit: [
                f.unit.dim_space as u8,
                f.unit.dim_time as u8,
                f.unit.dim_count as u8,
                f.unit.scale_space,
                f.unit.scale_time,
                f.unit.scale_count as u8,
                f.unit.quantity,
                f.unit.reserved,
            ],
            buckets: f
                .buckets
                .as_ref()
                .map(|bk| (0..bk.count()).map(|k| bk.bound(k)).collect()),
            gauge_mode: f.gauge_mode as u32,
            members: f
                .members
                .iter()
                .map(|m| PMember {
                    slot: m.slot,
                    reg_id: m.reg_id,
                    instance: m.instance.clone(),
                    instance_id: m.instance_id,
                    labels: m.labels.clone(),
                    value_slot: m.value_slot,
                    words: m.words,
                })
                .collect(),
        })
        .collect();
    if got != want {
        return Err(format!("presented\n{got:#?}\nwanted\n{want:#?}"));
    }
    for (pf, f) in want.iter().zip(&s.families) {
        for (pm, m) in pf.members.iter().zip(&f.members) {
            let mut per = Vec::new();
            for c in 0..g.cpus {
                let w: Vec<u64> = (0..pm.words as usize)
                    .map(|k| u64_at(b, g.value(c, pm.value_slot as usize + k)))
                    .collect();
                if s.words(c, m) != &w[..] {
                    return Err(format!(
                        "{} {:?} cpu {c}: words {:?}, image {w:?}",
                        pf.name,
                        pm.slot,
                        s.words(c, m)
                    ));
                }
                let v = val_from_words(pf, &w);
                let r = val_of(s.reading_on(c, f, m));
                if r != v {
                    return Err(format!(
                        "{} {:?} cpu {c}: reading {r:?}, image {v:?}",
                        pf.name, pm.slot
                    ));
                }
                per.push(v);
            }
            let t = total_of(pf, &per);
            let r = val_of(s.reading(f, m));
            if r != t {
                return Err(format!(
                    "{} {:?}: total {r:?}, §5.1 {t:?} of {per:?}",
                    pf.name, pm.slot
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Changes.

/// A new value for a number: near its old value, a boundary, or anything.
fn new_value(old: u64, size: usize, pick: u8, random: u64) -> u64 {
    let v = match pick % 14 {
        0 => 0,
        1 => 1,
        2 => old.wrapping_add(1),
        3 => old.wrapping_sub(1),
        4 => old.wrapping_mul(2),
        5 => old / 2,
        6 => old.wrapping_add(64),
        7 => u64::MAX,
        8 => 1 << (random % 64),
        9..=11 => random % 9,
        12 => 2 + random % 3,
        _ => random,
    };
    if size == 8 {
        v
    } else {
        v & ((1u64 << (size * 8)) - 1)
    }
}

/// Names a family may be given: live ones, their dotted prefixes and
/// extensions, their flat forms and suffixed forms, a freed family's, and
/// names the rule forbids.
const NAMES: &[&str] = &[
    "old.read_bytes",
    "old",
    "old.read_bytes.x",
    "old_read_bytes",
    "old.read_bytes_total",
    "disk",
    "disk.dev",
    "disk.dev.read_bytes.x",
    "disk_dev_read_bytes",
    "disk.dev.read_bytes_count",
    "disk.dev.latency_bucket",
    "disk.dev_latency",
    "sched.runq_delta_sum",
    "sched",
    "net.queue",
    "net.queue_peak_info",
    "net.queue_peak.x",
    "cpu.idle_ratio_total_total",
    "cpu",
    "gone.family",
    "gone",
    "gone.family.x",
    "x",
    "x_total",
    "_x",
    "Ab._c",
    "a..b",
    "a.",
    ".a",
    "a.1b",
    "1a",
    "a-b",
    "a b",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl",
];
const HELPS: &[&str] = &[
    "", "ok", "tab\there", "del\x7f", " !\"#$%&'()*+,-./~", "\n", "\u{e9}",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwx",
];
const KEYS: &[&str] = &[
    "device",
    "model",
    "bus",
    "mode",
    "cpu",
    "le",
    "a",
    "z9_",
    "cpux",
    "lee",
    "A",
    "_a",
    "9a",
    "a-b",
    "",
    "abcdefghijklmno",
    "abcdefghijklmnop",
    "abcdefghijklmnopqrstuvwxyz01234",
    "abcdefghijklmnopqrstuvwxyz012345",
];
const VALUES: &[&str] = &[
    "virtio disk",
    "pci",
    "",
    " ",
    "a\"b",
    "a\\b",
    "\x7f",
    "\t",
    "~",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv",
];
const INSTANCES: &[&str] = &[
    "sda",
    "vdb",
    "eth0",
    "sdc",
    "",
    "a b",
    "a\"b",
    "a\\b",
    "\x7f",
    "24:virtio0-input",
    "~",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl",
];
/// Bytes a string field may be made of: several rules' alphabets, and
/// bytes they forbid.
const BYTES: &[u8] = b"ab_x.0Z\0- \"\\\x7f\x1f~:\xe9";

/// Writes `s` into the field at `at` (`len` bytes), NUL padded (no NUL if
/// `s` fills it).
fn put_str(b: &mut [u8], at: usize, len: usize, s: &[u8]) {
    b[at..at + len].fill(0);
    let n = s.len().min(len);
    b[at..at + n].copy_from_slice(&s[..n]);
}

/// One change, drawn at random.
#[derive(Clone, Debug)]
struct Change {
    target: u8,
    slot: usize,
    field: usize,
    pick: u8,
    random: u64,
    bytes: Vec<u8>,
    other: usize,
}

fn change() -> impl Strategy<Value = Change> {
    (
        any::<u8>(),
        0..8usize,
        any::<usize>(),
        any::<u8>(),
        any::<u64>(),
        prop::collection::vec(prop::sample::select(BYTES), 0..24),
        0..8usize,
    )
        .prop_map(|(target, slot, field, pick, random, bytes, other)| Change {
            target,
            slot,
            field,
            pick,
            random,
            bytes,
            other,
        })
}

/// A string field changed: bytes drawn from `BYTES`, a curated string,
/// another slot's string (maybe changed), one byte set, or no NUL at all.
fn change_str(b: &mut [u8], at: usize, len: usize, other_at: usize, curated: &[&str], c: &Change) {
    match (c.pick / 8) % 6 {
        0 => put_str(b, at, len, &c.bytes),
        1 | 2 => put_str(
            b,
            at,
            len,
            curated[c.random as usize % curated.len()].as_bytes(),
        ),
        3 => {
            // Another slot's, maybe with a suffix, a dot made `_`, cut at
            // its last dot, or a part appended.
            let mut s = cstr(&b[other_at..other_at + len])
                .unwrap_or(&b[other_at..other_at + len])
                .to_vec();
            match (c.random >> 8) % 6 {
                1 => s.extend_from_slice(b"_total"),
                2 => {
                    if let Some(d) = s.iter().position(|&x| x == b'.') {
                        s[d] = b'_';
                    }
                }
                3 => {
                    if let Some(d) = s.iter().rposition(|&x| x == b'.') {
                        s.truncate(d);
                    }
                }
                4 => s.extend_from_slice(b".x"),
                _ => {}
            }
            put_str(b, at, len, &s);
        }
        4 => {
            // One byte anywhere (after the NUL too: not part of the value).
            let k = c.random as usize % len;
            b[at + k] = BYTES[(c.random >> 32) as usize % BYTES.len()];
        }
        _ => b[at..at + len].fill(b'a' + (c.random % 3) as u8),
    }
}

/// A number changed: another slot's value of the field, 0, or `new_value`.
fn change_num(b: &mut [u8], at: usize, size: usize, other_at: usize, c: &Change) {
    let old = if size == 8 {
        u64_at(b, at)
    } else if size == 4 {
        u32_at(b, at)
    } else {
        u64::from(b[at])
    };
    let v = if c.pick.is_multiple_of(5) {
        if size == 8 {
            u64_at(b, other_at)
        } else if size == 4 {
            u32_at(b, other_at)
        } else {
            u64::from(b[other_at])
        }
    } else if c.pick % 5 == 1 {
        0
    } else {
        new_value(old, size, c.pick / 5, c.random)
    };
    put(b, at, size, v);
}

/// Applies `c`; returns what it changed, for messages.
fn apply(b: &mut [u8], c: &Change) -> String {
    let g = Geo::of(b);
    match c.target % 20 {
        // A family field (§5.1).
        0..=8 => {
            let e = g.family(c.slot);
            let o = g.family(c.other);
            let entry0 = g.entry(0);
            let f = c.field % 17;
            match f {
                0 => {
                    // Names: also the 1.0 entry's, for rule 3.
                    if c.pick.is_multiple_of(7) {
                        let src = b[entry0..entry0 + 64].to_vec();
                        b[e..e + 64].copy_from_slice(&src);
                    } else {
                        change_str(b, e + fam::NAME, 64, o + fam::NAME, NAMES, c);
                    }
                }
                1 => change_str(b, e + fam::HELP, 128, o + fam::HELP, HELPS, c),
                2 => change_str(b, e + fam::DIMENSION, 32, o + fam::DIMENSION, KEYS, c),
                3 => change_num(b, e + fam::REG_ID, 8, o + fam::REG_ID, c),
                4 => change_num(b, e + fam::STATE, 4, o + fam::STATE, c),
                5 => change_num(b, e + fam::KIND, 4, o + fam::KIND, c),
                6 | 7 => {
                    // One byte of the unit, a small signed value or any;
                    // or another family's whole unit.
                    let k = (c.random % 8) as usize;
                    match c.pick % 4 {
                        0 => {
                            let src = b[o + fam::UNIT..o + fam::UNIT + 8].to_vec();
                            b[e + fam::UNIT..e + fam::UNIT + 8].copy_from_slice(&src);
                        }
                        1 => b[e + fam::UNIT + k] = (c.random >> 8) as u8,
                        _ => b[e + fam::UNIT + k] = (((c.random >> 8) % 19) as i8 - 9) as u8,
                    }
                }
                8 => change_num(b, e + fam::VALUE_TYPE, 4, o + fam::VALUE_TYPE, c),
                9 | 10 => change_num(b, e + fam::NR_BUCKETS, 4, o + fam::NR_BUCKETS, c),
                11 => change_num(b, e + fam::BUCKET_LAYOUT, 4, o + fam::BUCKET_LAYOUT, c),
                12 => {
                    // log2_first, often near its bound.
                    if c.pick.is_multiple_of(3) {
                        put(b, e + fam::LOG2_FIRST, 4, 58 + c.random % 8);
                    } else {
                        change_num(b, e + fam::LOG2_FIRST, 4, o + fam::LOG2_FIRST, c)
                    }
                }
                _ => {
                    // A bound: mostly one of the first few.
                    let k = if c.pick.is_multiple_of(2) {
                        (c.random % 5) as usize
                    } else {
                        (c.random % 31) as usize
                    };
                    let at = e + fam::BOUNDS + 8 * k;
                    if c.pick.is_multiple_of(3) && k > 0 {
                        let prev = u64_at(b, at - 8);
                        put(b, at, 8, prev.wrapping_add((c.random >> 40) % 3));
                    } else {
                        change_num(b, at, 8, o + fam::BOUNDS + 8 * k, c);
                    }
                }
            }
            format!("family slot {} field #{f}", c.slot)
        }
        // A member field (§5.3).
        9..=17 => {
            let e = g.member(c.slot);
            let o = g.member(c.other);
            let f = c.field % 14;
            let k = (c.random >> 16) as usize % 4;
            match f {
                0 | 1 => change_str(b, e + mem::INSTANCE, 64, o + mem::INSTANCE, INSTANCES, c),
                2 => change_num(b, e + mem::REG_ID, 8, o + mem::REG_ID, c),
                3 => change_num(b, e + mem::STATE, 4, o + mem::STATE, c),
                4 | 5 => change_num(b, e + mem::FAMILY, 4, o + mem::FAMILY, c),
                6 | 7 => change_num(b, e + mem::VALUE_SLOT, 4, o + mem::VALUE_SLOT, c),
                8 => change_num(b, e + mem::INSTANCE_ID, 4, o + mem::INSTANCE_ID, c),
                9 => change_num(b, e + mem::RESERVED0, 8, o + mem::RESERVED0, c),
                10 | 11 if c.pick.is_multiple_of(5) => {
                    // A label named as the dimension of the member's family
                    // (rule 5), the first unused one or the first.
                    let fslot = (u32_at(b, e + mem::FAMILY) % 8) as usize;
                    let dim = b
                        [g.family(fslot) + fam::DIMENSION..g.family(fslot) + fam::DIMENSION + 16]
                        .to_vec();
                    let k = (0..4)
                        .find(|&k| b[e + mem::LABELS + 64 * k] == 0)
                        .unwrap_or(0);
                    let at = e + mem::LABELS + 64 * k;
                    b[at..at + 16].copy_from_slice(&dim);
                    if b[at + 16] == 0 {
                        put_str(b, at + 16, 48, b"v");
                    }
                }
                10 | 11 => {
                    let at = e + mem::LABELS + 64 * k;
                    change_str(b, at, 16, o + mem::LABELS + 64 * k, KEYS, c)
                }
                12 => {
                    let at = e + mem::LABELS + 64 * k + 16;
                    change_str(b, at, 48, o + mem::LABELS + 64 * k + 16, VALUES, c)
                }
                _ => change_num(
                    b,
                    e + mem::RESERVED + 8 * k,
                    8,
                    o + mem::RESERVED + 8 * k,
                    c,
                ),
            }
            format!("member slot {} field #{f} label/word {k}", c.slot)
        }
        // A dynamic count.
        18 => {
            let (at, cap) = [
                (hdr::INSTANCES_USED, g.max_instances),
                (hdr::FAMILIES_USED, g.max_families),
                (hdr::MEMBERS_USED, g.max_members),
            ][c.field % 3];
            let v = match c.pick % 4 {
                0 => u64::MAX,
                1 => new_value(u64_at(b, at), 8, c.pick / 4, c.random),
                _ => c.random % (cap + 3),
            };
            put(b, at, 8, v);
            format!("count at {at} := {v}")
        }
        // A value word of a CPU (§6.2), after (half the time) a change of
        // a family that keeps it valid but changes how its values add up.
        _ => {
            let mut what = String::new();
            if c.pick.is_multiple_of(2) {
                let (slot, writes) = RESHAPES[(c.random >> 32) as usize % RESHAPES.len()];
                for &(at, size, v) in writes {
                    put(b, g.family(slot) + at, size, v);
                }
                what = format!("family slot {slot} reshaped {writes:?}, ");
            }
            let cpu = c.slot % g.cpus;
            let slot = c.field % 21;
            let at = g.value(cpu, slot);
            let v = match (c.pick / 2) % 4 {
                0 => u64::MAX,
                1 => i64::MIN as u64,
                _ => new_value(u64_at(b, at), 8, c.pick / 8, c.random),
            };
            put(b, at, 8, v);
            what + &format!("cpu {cpu} value {slot} := {v:#x}")
        }
    }
}

/// Changes of a family of the base image that keep it valid (§5.1) but
/// change its kind, value type or buckets: (slot, [(offset, size, value)]).
/// Family 0 is a `U64` counter of two members, 1 an `I64` gauge, 2 a `U64`
/// peak, 3 a `LOG2` histogram (first bound 2^10, 4 buckets), 4 an
/// `EXPLICIT` one (10, 100, 1000).
#[allow(clippy::type_complexity)]
const RESHAPES: &[(usize, &[(usize, usize, u64)])] = &[
    (0, &[(fam::KIND, 4, 2)]),
    (0, &[(fam::KIND, 4, 3)]),
    (0, &[(fam::VALUE_TYPE, 4, 2)]),
    (1, &[(fam::KIND, 4, 1)]),
    (1, &[(fam::VALUE_TYPE, 4, 1)]),
    (1, &[(fam::KIND, 4, 3), (fam::VALUE_TYPE, 4, 1)]),
    (2, &[(fam::KIND, 4, 1)]),
    (2, &[(fam::KIND, 4, 2)]),
    (3, &[(fam::NR_BUCKETS, 4, 3)]),
    (3, &[(fam::NR_BUCKETS, 4, 2)]),
    (3, &[(fam::LOG2_FIRST, 4, 0)]),
    (3, &[(fam::LOG2_FIRST, 4, 61)]),
    (
        3,
        &[
            (fam::BUCKET_LAYOUT, 4, 2),
            (fam::LOG2_FIRST, 4, 0),
            (fam::BOUNDS, 8, 0),
            (fam::BOUNDS + 8, 8, 1),
            (fam::BOUNDS + 16, 8, u64::MAX),
        ],
    ),
    (4, &[(fam::NR_BUCKETS, 4, 3), (fam::BOUNDS + 16, 8, 0)]),
    (
        4,
        &[
            (fam::NR_BUCKETS, 4, 2),
            (fam::BOUNDS + 8, 8, 0),
            (fam::BOUNDS + 16, 8, 0),
        ],
    ),
    (
        4,
        &[
            (fam::BUCKET_LAYOUT, 4, 1),
            (fam::LOG2_FIRST, 4, 3),
            (fam::BOUNDS, 8, 0),
            (fam::BOUNDS + 8, 8, 0),
            (fam::BOUNDS + 16, 8, 0),
        ],
    ),
];

/// The words of `b` that differ from `base`, located in the tables.
fn diff(base: &[u8], b: &[u8]) -> String {
    let g = Geo::of(base);
    let mut out = Vec::new();
    for at in (0..b.len()).step_by(8) {
        let (old, new) = (u64_at(base, at), u64_at(b, at));
        if old == new {
            continue;
        }
        let place = if at >= g.members {
            format!(
                "member {} +{}",
                (at - g.members) / mem::SIZE,
                (at - g.members) % mem::SIZE
            )
        } else if at >= g.families {
            format!(
                "family {} +{}",
                (at - g.families) / fam::SIZE,
                (at - g.families) % fam::SIZE
            )
        } else if at >= g.cpu_area {
            format!(
                "cpu {} word {}",
                (at - g.cpu_area) / g.block,
                ((at - g.cpu_area) % g.block - g.counters) / 8
            )
        } else {
            format!("header +{at}")
        };
        out.push(format!(
            "{place}: {old:#x} -> {new:#x} ({:?})",
            String::from_utf8_lossy(&b[at..at + 8])
        ));
    }
    out.join("; ")
}

#[test]
fn the_base_image_is_what_its_expect_file_says() {
    let b = base_image();
    let want = oracle(&b).expect("valid");
    assert_eq!(want.len(), 6);
    assert_eq!(want.iter().map(|f| f.members.len()).sum::<usize>(), 7);
    let words = view_of(&b);
    let s = SegmentView::new(&words).unwrap().snapshot(4).unwrap();
    check_presented(&b, &s, &want).unwrap();
}

/// §5.4: "each field in table order"; §5.3's table has `reserved0` (byte
/// 88) before `labels` (byte 96), and §8 names the field `reserved`. A
/// member with a non-zero `reserved0` and a bad label is `reserved`.
#[test]
fn a_member_s_reserved0_is_checked_before_its_labels() {
    let mut b = base_image();
    let g = Geo::of(&b);
    let m = g.member(0);
    put(&mut b, m + mem::RESERVED0, 8, 1);
    // Label 0 ("model" = "virtio disk") without a value.
    put_str(&mut b, m + mem::LABELS + 16, 48, b"");
    let want = oracle(&b).unwrap_err().primary;
    assert_eq!(want, Verdict::At("bad-member", 0, "reserved"));
    let words = view_of(&b);
    let got = SegmentView::new(&words)
        .unwrap()
        .snapshot(4)
        .map(drop)
        .unwrap_err();
    error_matches(&got, &want).unwrap();
}

#[test]
fn every_family_and_member_change_gets_the_spec_s_verdict() {
    let base = base_image();
    let seen = std::cell::RefCell::new(BTreeMap::<String, u32>::new());
    let explore = std::env::var("PERFABI_ORACLE_EXPLORE").is_ok();
    let disagreements = std::cell::RefCell::new(BTreeMap::<String, (u32, String)>::new());
    let open_choices = std::cell::RefCell::new(BTreeMap::<String, u32>::new());
    let shapes = std::cell::RefCell::new(BTreeMap::<String, u32>::new());
    let ordered = std::cell::RefCell::new(0u32);
    proptest!(cases(3000), |(first in change(), second in prop::option::weighted(0.3, change()))| {
        let mut b = base.clone();
        let mut what = apply(&mut b, &first);
        if let Some(c) = &second {
            what += " and ";
            what += &apply(&mut b, c);
        }
        let what = format!("{what} [{}]", diff(&base, &b));
        let want = oracle(&b);
        let verdict = want.as_ref().err().map_or(Verdict::Ok, |f| f.primary.clone());
        let words = view_of(&b);
        let view = SegmentView::new(&words).expect("the header is unchanged but for counts");
        let problem: Option<String> = match (view.snapshot(4), &want) {
            (Ok(s), Ok(families)) => check_presented(&b, &s, families).err(),
            (Ok(_), Err(f)) => Some(format!("reader accepted, spec says {:?}", f.primary)),
            (Err(e), Ok(_)) => Some(format!("reader refused: {} ({e}), spec says ok", e.code())),
            (Err(e), Err(f)) => match error_matches(&e, &f.primary) {
                Ok(()) => None,
                Err(m) => match f.also.iter().find(|v| error_matches(&e, v).is_ok()) {
                    // Another verdict the text admits: counted.
                    Some(v) => {
                        *open_choices.borrow_mut().entry(format!("{}: {} named, not {}", f.rule, v.key_slot(), f.primary.key_slot())).or_default() += 1;
                        None
                    }
                    None => Some(format!("reader {m}, spec says {:?} (or one of {:?})", f.primary, f.also)),
                },
            },
        };
        if let Some(p) = problem {
            if explore {
                let class: String = p.chars().take(70).collect();
                let mut d = disagreements.borrow_mut();
                let e = d.entry(class).or_insert_with(|| (0, format!("{what}: {p}")));
                e.0 += 1;
            } else {
                prop_assert!(false, "{}: {}", what, p);
            }
        }
        let rule = want.as_ref().err().map_or("", |f| f.rule);
        *seen.borrow_mut().entry(format!("{} ({rule})", verdict.key())).or_default() += 1;
        if let Ok(families) = &want {
            for f in families {
                let kind = ["", "counter", "gauge", "peak", "histogram"][f.kind as usize];
                let layout = match &f.buckets {
                    Some(bk) => {
                        let finite: Vec<u64> = bk.iter().flatten().copied().collect();
                        let log2 = finite[0].is_power_of_two() && finite.windows(2).all(|w| w[1] == w[0].wrapping_mul(2));
                        if log2 { " log2" } else { " buckets" }
                    }
                    None => "",
                };
                *shapes.borrow_mut().entry(format!("{kind} {}{layout}", ["", "u64", "i64"][f.value_type as usize])).or_default() += 1;
            }
        }
        // Two changes, each refused alone with another verdict: the order
        // of §5.4 decides, and the reader followed it.
        if let (Some(c), Err(both)) = (&second, &want) {
            let alone = |c: &Change| {
                let mut b = base.clone();
                apply(&mut b, c);
                oracle(&b).err().map(|f| f.primary)
            };
            if let (Some(x), Some(y)) = (alone(&first), alone(c)) {
                if x != y && (both.primary == x || both.primary == y) {
                    *ordered.borrow_mut() += 1;
                }
            }
        }
    });
    for (k, (n, v)) in disagreements.borrow().iter() {
        println!("DISAGREEMENT {k}: {n} cases, e.g.\n    {v}");
    }
    println!("the text's open choices (rules 2, 4, 6, 7: which slot is named), taken otherwise than this oracle's reading: {:?}", open_choices.borrow());
    let seen = seen.into_inner();
    println!("family and member changes, verdicts met (code/field (rule)): {seen:?}");
    println!(
        "valid images, families presented and totals checked, by kind and type: {:?}",
        shapes.borrow()
    );
    println!(
        "two changes refused alone with different verdicts, the order of checks deciding: {}",
        ordered.borrow()
    );
    if explore {
        return;
    }
    for key in [
        "ok ()",
        "bad-family/state (decode)",
        "bad-family/name (decode)",
        "bad-family/help (decode)",
        "bad-family/dimension (decode)",
        "bad-family/reg_id (decode)",
        "bad-family/kind (decode)",
        "bad-family/unit (decode)",
        "bad-family/value_type (decode)",
        "bad-family/nr_buckets (decode)",
        "bad-family/bucket_layout (decode)",
        "bad-family/log2_first (decode)",
        "bad-family/bounds (decode)",
        "bad-family/gauge_mode (decode)",
        "bad-member/state (decode)",
        "bad-member/instance (decode)",
        "bad-member/reg_id (decode)",
        "bad-member/reserved (decode)",
        "bad-member/labels (decode)",
        "bad-family/reg_id (rule 2)",
        "name-clash (rule 3)",
        "bad-member/reg_id (rule 4)",
        "bad-member/family (rule 5)",
        "bad-member/instance (rule 5)",
        "bad-member/labels (rule 5)",
        "bad-member/value_slot (rule 5)",
        "bad-member/value_slot (rule 6)",
        "bad-member/instance (rule 7)",
        "bad-member/instance_id (rule 7)",
        "bad-histogram (histogram)",
    ] {
        assert!(seen.contains_key(key), "no case ended in {key}: {seen:?}");
    }
    for shape in [
        "counter u64",
        "counter i64",
        "gauge u64",
        "gauge i64",
        "peak u64",
        "histogram u64 log2",
        "histogram u64 buckets",
    ] {
        assert!(
            shapes.borrow().contains_key(shape),
            "no valid image had a {shape}: {:?}",
            shapes.borrow()
        );
    }
    assert!(
        *ordered.borrow() >= 20,
        "too few cases where the order of checks decides"
    );
}
