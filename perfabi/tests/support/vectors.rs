//! Builds the segment images of `spec/vectors/` and decodes an image into the
//! canonical text of its `.expect` file. Shared by `examples/make_vectors.rs`
//! (which writes the files) and `tests/vectors.rs` (which checks them).

use std::fmt::Write as _;

use perfabi::damon::{to_record, Intervals, Region};
use perfabi::layout::*;
use perfabi::trust::{Origin, WriterClaim};
use perfabi::Word as AtomicU64;
use perfabi::{Geometry, SegmentView, WriterIdentity};

const GEOMETRY: Geometry = Geometry {
    page_size: 4096,
    nr_cpus: 2,
    max_instances: 32,
    damon_capacity: 8,
    max_families: 0,
    max_members: 0,
};

/// A segment image under construction, in ordinary memory.
pub struct Image(pub Vec<u8>);

impl Image {
    fn put<T: bytemuck::Pod>(&mut self, at: usize, v: &T) {
        self.0[at..at + std::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(v));
    }
    fn header(&self) -> Header {
        bytemuck::pod_read_unaligned(&self.0[..HEADER_SIZE_V1_0])
    }
    fn set_header(&mut self, f: impl FnOnce(&mut Header)) {
        let mut h = self.header();
        f(&mut h);
        self.put(0, &h);
    }
    fn layout(&self) -> perfabi::Layout {
        perfabi::validate(&self.0).expect("base image is valid")
    }
    fn entry(&mut self, slot: usize, e: &InstanceEntry) {
        let at = self.layout().instance_word(slot) * 8;
        self.put(at, e);
    }
    fn value(&mut self, cpu: usize, slot: usize, v: u64) {
        let at = self.layout().counter_word(cpu, slot) * 8;
        self.put(at, &v);
    }
    fn record(&mut self, cpu: usize, slot: usize, r: &DamonRecord) {
        let at = self.layout().damon_word(cpu, slot) * 8;
        self.put(at, r);
    }
    fn seq(&mut self, cpu: usize, v: u64) {
        let at = self.layout().cpu_block_word(cpu) * 8;
        self.put(at, &v);
    }
}

fn entry(
    name: &str,
    unit: &str,
    sem: Semantics,
    ty: ValueType,
    reg_id: u64,
    state: SlotState,
) -> InstanceEntry {
    InstanceEntry {
        name: perfabi::name::encode(name),
        unit: perfabi::name::encode(unit),
        reg_id,
        state: state as u32,
        semantics: sem as u32,
        value_type: ty as u32,
        reserved0: 0,
        reserved: [0; 3],
    }
}

/// The reference valid segment: two CPUs, three slots (one freed), one
/// complete DAMON aggregation split over both CPUs' rings plus a newer,
/// incomplete one that readers must ignore.
pub fn base() -> Image {
    let mut img = Image(vec![0u8; GEOMETRY.sizes().unwrap().segment_size as usize]);
    let h = GEOMETRY
        .header(&WriterIdentity {
            epoch: 0x5eed_0000_0000_0001,
            pid: 4242,
            start_ns: 1_000_000_000,
            heartbeat_interval_ns: 1_000_000_000,
            first_heartbeat_ns: 2_000_000_000,
        })
        .unwrap();
    img.put(0, &h);
    img.set_header(|h| {
        h.gen1 = 4;
        h.gen2 = 4;
        h.instances_used = 3;
    });
    img.entry(
        0,
        &entry(
            "net.rx_bytes",
            "bytes",
            Semantics::Counter,
            ValueType::U64,
            1,
            SlotState::Live,
        ),
    );
    img.entry(
        1,
        &entry(
            "gone",
            "",
            Semantics::Counter,
            ValueType::U64,
            2,
            SlotState::Free,
        ),
    );
    img.entry(
        2,
        &entry(
            "temp.delta",
            "mC",
            Semantics::Instant,
            ValueType::I64,
            3,
            SlotState::Live,
        ),
    );
    img.value(0, 0, 1000);
    img.value(1, 0, 234);
    img.value(0, 1, 99);
    img.value(0, 2, 5);
    img.value(1, 2, (-12i64) as u64);
    for cpu in 0..2 {
        img.seq(cpu, 10);
    }
    let iv = Intervals {
        sample_us: 5_000,
        aggr_us: 100_000,
    };
    let regions = [
        Region {
            start: 0x1000,
            end: 0x5000,
            nr_accesses: 20,
            age: 3,
        },
        Region {
            start: 0x5000,
            end: 0x9000,
            nr_accesses: 0,
            age: 7,
        },
        Region {
            start: 0x9000,
            end: 0x10000,
            nr_accesses: 4,
            age: 1,
        },
    ];
    let rec = |agg, i: usize, n| to_record(77, 1, agg, i as u32, n, iv, &regions[i]);
    img.record(0, 0, &rec(5, 0, 3));
    img.record(1, 0, &rec(5, 1, 3));
    img.record(0, 1, &rec(5, 2, 3));
    img.record(1, 1, &rec(6, 0, 3)); // aggregation 6 is incomplete
    img
}

/// The base image with its header changed by `f`.
fn with_header(f: impl FnOnce(&mut Header)) -> Image {
    let mut i = base();
    i.set_header(f);
    i
}

/// Every vector: (file stem, image).
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    let mut v: Vec<(&'static str, Image)> = Vec::new();
    v.push(("valid_basic", base()));
    v.push(("valid_newer_minor", {
        let mut i = base();
        i.set_header(|h| {
            h.abi_minor = 7;
            h.header_size = 256;
        });
        i.put(HEADER_SIZE_V1_0, &[0xabu8; 64]);
        i
    }));
    v.push(("valid_closed", with_header(|h| h.flags = FLAG_CLOSED)));
    v.push((
        "valid_hostile_instances_used",
        with_header(|h| h.instances_used = u64::MAX),
    ));
    v.push(("bad_magic", with_header(|h| h.magic = *b"PERFABX\0")));
    v.push(("unknown_major", with_header(|h| h.abi_major = 2)));
    v.push((
        "foreign_byte_order",
        with_header(|h| h.byte_order = BYTE_ORDER_MARK.swap_bytes()),
    ));
    v.push(("truncated_header", {
        let mut i = base();
        i.0.truncate(100);
        i
    }));
    v.push(("truncated_segment", {
        let mut i = base();
        let n = i.0.len() - 4096;
        i.0.truncate(n);
        i
    }));
    v.push((
        "offsets_past_end",
        with_header(|h| h.cpu_area_offset = 1 << 40),
    ));
    v.push((
        "offsets_overflow",
        with_header(|h| h.instances_size = u64::MAX - 4095),
    ));
    v.push((
        "overlapping_sections",
        with_header(|h| h.cpu_area_offset = h.instances_offset),
    ));
    v.push((
        "header_overlaps_table",
        with_header(|h| h.instances_offset = 0),
    ));
    v.push((
        "counters_overlap_damon",
        with_header(|h| h.damon_offset = h.counters_offset + 64),
    ));
    v.push((
        "misaligned_counters",
        with_header(|h| h.counters_offset = 136),
    ));
    v.push(("damon_past_block", with_header(|h| h.damon_capacity = 1000)));
    v.push(("bad_page_size", with_header(|h| h.page_size = 3000)));
    v.push(("absurd_cpu_count", with_header(|h| h.nr_cpus = 1_000_000)));
    v.push(("zero_cpus", with_header(|h| h.nr_cpus = 0)));
    v.push(("bad_header_size", with_header(|h| h.header_size = 100)));
    v.push(("bad_record_size", with_header(|h| h.damon_record_size = 48)));
    v.push(("odd_sequence_dead_writer", {
        let mut i = base();
        i.seq(1, 11);
        i
    }));
    v.push(("metadata_mid_change", with_header(|h| h.gen1 = h.gen2 + 1)));
    v.push(("damon_frequency_clamped", {
        // 100 ms / 1.5 ms is 66.7 samples (not 66), and DAMON may report more
        // accesses than fit: frequencies are exact and at most 1.
        let mut i = base();
        let r = |start, end, nr_accesses| Region {
            start,
            end,
            nr_accesses,
            age: 0,
        };
        let odd = Intervals {
            sample_us: 1_500,
            aggr_us: 100_000,
        };
        let regions = [r(0x1000, 0x2000, 100), r(0x2000, 0x3000, 33)];
        for (k, reg) in regions.iter().enumerate() {
            i.record(0, 2 + k, &to_record(78, 2, 1, k as u32, 2, odd, reg));
        }
        let short = Intervals {
            sample_us: 200_000,
            aggr_us: 100_000,
        };
        i.record(
            1,
            2,
            &to_record(78, 3, 1, 0, 1, short, &r(0x1000, 0x2000, 1000)),
        );
        i
    }));
    v.push((
        "forged_kernel_flag",
        with_header(|h| {
            h.flags = FLAG_KERNEL;
            h.writer_pid = 0;
        }),
    ));
    v.push(("bad_entry_semantics", {
        let mut i = base();
        let at = i.layout().instance_word(0) * 8 + std::mem::offset_of!(InstanceEntry, semantics);
        i.put(at, &9u32);
        i
    }));
    v.push(("name_without_nul", {
        let mut i = base();
        let at = i.layout().instance_word(2) * 8;
        i.put(at, &[b'x'; NAME_LEN]);
        i
    }));
    // Spec §8: the order of checks decides which code wins.
    v.push((
        "two_faults_first_wins",
        with_header(|h| {
            h.page_size = 3000;
            h.header_size = 100;
        }),
    ));
    v.push(("table_too_small", with_header(|h| h.instances_size = 2048)));
    v.push((
        "table_not_whole_pages",
        with_header(|h| h.instances_size = 4096 + 128),
    ));
    // Whole pages, one entry short: 33 entries need 4,224 bytes.
    v.push((
        "table_one_entry_short",
        with_header(|h| h.max_instances = 33),
    ));
    // Both zero: they agree (0 pages of 0 bytes), and still no block.
    v.push((
        "zero_pages_per_cpu",
        with_header(|h| {
            h.pages_per_cpu = 0;
            h.cpu_block_size = 0;
        }),
    ));
    v.push((
        "block_size_disagrees",
        with_header(|h| h.pages_per_cpu += 1),
    ));
    v.push((
        "counters_overlap_head",
        with_header(|h| h.counters_offset = 64),
    ));
    // Spec §5: entry rules, each field named.
    let field = |f: usize| move |i: &Image| i.layout().instance_word(0) * 8 + f;
    v.push(("bad_entry_state", {
        let mut i = base();
        let at = field(std::mem::offset_of!(InstanceEntry, state))(&i);
        i.put(at, &7u32);
        i
    }));
    v.push(("bad_entry_name", {
        let mut i = base();
        let at = i.layout().instance_word(0) * 8;
        i.put(at, &perfabi::name::encode::<NAME_LEN>("_net.rx_bytes"));
        i
    }));
    v.push(("reg_id_zero", {
        let mut i = base();
        let at = field(std::mem::offset_of!(InstanceEntry, reg_id))(&i);
        i.put(at, &0u64);
        i
    }));
    v.push(("reg_id_twice", {
        let mut i = base();
        let at = i.layout().instance_word(2) * 8 + std::mem::offset_of!(InstanceEntry, reg_id);
        i.put(at, &1u64);
        i
    }));
    v.push(("names_clash_dot_underscore", {
        let mut i = base();
        let at = i.layout().instance_word(2) * 8;
        i.put(at, &perfabi::name::encode::<NAME_LEN>("net_rx_bytes"));
        i
    }));
    v.push(("names_clash_total_suffix", {
        let mut i = base();
        let at = i.layout().instance_word(2) * 8;
        i.put(at, &perfabi::name::encode::<NAME_LEN>("net.rx_bytes_total"));
        i
    }));
    v.push(("names_clash_with_freed_slot_is_valid", {
        // Slot 1 is free: its name may be the same as a live one.
        let mut i = base();
        let at = i.layout().instance_word(1) * 8;
        i.put(at, &perfabi::name::encode::<NAME_LEN>("net_rx_bytes"));
        i
    }));
    v.into_iter().map(|(n, i)| (n, i.0)).collect()
}

/// Decodes an image the way a reader does (validate, then read through the
/// protocol with a small retry bound) into canonical text.
pub fn describe(bytes: &[u8]) -> String {
    let mut out = String::new();
    let layout = match perfabi::validate(bytes) {
        Ok(l) => l,
        Err(e) => {
            writeln!(out, "validate: error {} ({e})", e.code()).unwrap();
            return out;
        }
    };
    writeln!(out, "validate: ok").unwrap();
    writeln!(
        out,
        "abi: {}.{} cpus: {} capacity: {} damon_capacity: {} size: {}",
        layout.abi_major,
        layout.abi_minor,
        layout.nr_cpus,
        layout.max_instances,
        layout.damon_capacity,
        layout.segment_size
    )
    .unwrap();
    // Shared memory is only read through atomics: copy into aligned words.
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect();
    let view = SegmentView::new(&words).expect("validated above");
    let info = view.info();
    writeln!(
        out,
        "epoch: {:#x} generation: {} pid: {} closed: {}",
        info.epoch,
        info.generation,
        info.writer_pid,
        info.flags & FLAG_CLOSED != 0
    )
    .unwrap();
    let claim = |origin| WriterClaim::of(&info, origin).describe();
    writeln!(
        out,
        "writer: file={} device={}",
        claim(Origin::File),
        claim(Origin::KernelDevice)
    )
    .unwrap();
    match view.snapshot(4) {
        Ok(s) => {
            writeln!(out, "snapshot: ok instances: {}", s.instances.len()).unwrap();
            for i in &s.instances {
                let per: Vec<String> = s
                    .per_cpu(i)
                    .map(|v| match i.value_type {
                        ValueType::U64 => v.to_string(),
                        ValueType::I64 => (v as i64).to_string(),
                    })
                    .collect();
                let total = match i.value_type {
                    ValueType::U64 => s.total(i).to_string(),
                    ValueType::I64 => (s.total(i) as i64).to_string(),
                };
                writeln!(
                    out,
                    "instance slot={} reg={} {} {} {} unit={:?} total={} per_cpu={}",
                    i.slot,
                    i.reg_id,
                    i.name,
                    i.semantics.as_str(),
                    i.value_type.as_str(),
                    i.unit,
                    total,
                    per.join(",")
                )
                .unwrap();
            }
        }
        Err(e) => writeln!(out, "snapshot: error {} ({e})", e.code()).unwrap(),
    }
    let read = view.damon(4);
    write!(out, "damon: ok aggregations: {}", read.aggregations.len()).unwrap();
    if !read.busy_cpus.is_empty() {
        write!(out, " busy_cpus: {:?}", read.busy_cpus).unwrap();
    }
    out.push('\n');
    for a in &read.aggregations {
        writeln!(
            out,
            "aggregation monitor={} target={} index={} sample_us={} aggr_us={} regions={}",
            a.monitor_id,
            a.target_id,
            a.aggregation,
            a.intervals.sample_us,
            a.intervals.aggr_us,
            a.regions.len()
        )
        .unwrap();
        for r in &a.regions {
            writeln!(
                out,
                "region {:#x}-{:#x} nr_accesses={} age={} frequency={:.3}",
                r.start,
                r.end,
                r.nr_accesses,
                r.age,
                a.frequency(r)
            )
            .unwrap();
        }
    }
    out
}
