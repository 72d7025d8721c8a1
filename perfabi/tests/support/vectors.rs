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
    base_of(GEOMETRY)
}

/// [`base`]'s contents in a segment of geometry `g`, placed canonically.
fn base_of(g: Geometry) -> Image {
    let mut img = Image(vec![0u8; g.sizes().unwrap().segment_size as usize]);
    let h = g
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
        // Minor 7: the 1.1 fields (no family tables) and 64 bytes of
        // fields this reader does not know, which it ignores.
        let mut i = base();
        i.set_header(|h| {
            h.abi_minor = 7;
            h.header_size = HEADER_SIZE_V1_1 as u32 + 64;
        });
        i.put(HEADER_SIZE_V1_1, &[0xabu8; 64]);
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
    // The kernel flag of a BPF writer without a heartbeat promise: nothing
    // could tell its programs detached, so a kernel map's claim is not
    // believed (§11.3); the module's device still is.
    v.push((
        "kernel_flag_without_heartbeat",
        with_header(|h| {
            h.flags = FLAG_KERNEL;
            h.writer_pid = 0;
            h.heartbeat_interval_ns = 0;
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
    placement(&mut v);
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
    families::all(&mut v);
    v.into_iter().map(|(n, i)| (n, i.0)).collect()
}

/// Spec §8 steps 11-13: every rule about where a section lies, at its
/// boundary. `valid_basic` is at most of them (the table starts at a page
/// and holds exactly `max_instances` entries, the per-CPU area starts where
/// it ends and ends at `segment_size`, a block is one page, the counters
/// start at 128 and the ring right after them); these images add the other
/// side of each rule, one word (or, where alignment allows no less, one
/// page or record) past it, and the legal boundaries `valid_basic` does not
/// reach.
fn placement(v: &mut Vec<(&'static str, Image)>) {
    // Step 11: the instance table.
    v.push((
        "instances_misaligned_by_a_word",
        with_header(|h| h.instances_offset += 8),
    ));
    v.push((
        "table_size_a_word_past_whole_pages",
        with_header(|h| h.instances_size += 8),
    ));
    // The table may end at segment_size (step 11 holds); the per-CPU area,
    // which follows it, then cannot (step 12).
    v.push((
        "instances_at_segment_end_cpu_area_past_it",
        with_header(|h| h.segment_size = h.instances_offset + h.instances_size),
    ));
    v.push((
        "instances_a_word_past_segment_end",
        with_header(|h| h.segment_size = h.instances_offset + h.instances_size - 8),
    ));
    // Step 12: the per-CPU area.
    v.push((
        "cpu_area_misaligned_by_a_word",
        with_header(|h| h.cpu_area_offset += 8),
    ));
    v.push((
        "block_size_a_word_past_its_pages",
        with_header(|h| h.cpu_block_size += 8),
    ));
    v.push((
        "cpu_area_a_word_past_segment_end",
        with_header(|h| h.segment_size -= 8),
    ));
    // Step 13: inside a block.
    v.push((
        "damon_misaligned_by_a_word",
        with_header(|h| h.damon_offset += 8),
    ));
    // 33 counters end at 128 + 264 = 392: a ring at 384 (aligned) covers
    // the last counter.
    v.push(("counters_overlap_damon_by_a_word", {
        let mut i = base_of(Geometry {
            max_instances: 33,
            ..GEOMETRY
        });
        i.set_header(|h| {
            assert_eq!(h.counters_offset + 8 * h.max_instances, 392);
            h.damon_offset = 384;
        });
        i
    }));
    // The ring at 384 of 58 records ends at 4,096, the block's end.
    v.push((
        "damon_ends_at_block_end_is_valid",
        with_header(|h| h.damon_capacity = 58),
    ));
    v.push((
        "damon_a_record_past_block_end",
        with_header(|h| h.damon_capacity = 59),
    ));
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
        "writer: file={} device={} map={}",
        claim(Origin::File),
        claim(Origin::KernelDevice),
        claim(Origin::KernelMap)
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
    if layout.families.is_some() {
        families::describe(&view, &mut out);
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

/// The ABI 1.1 vectors: a segment with every kind of family, and one image
/// per rule of spec §4.1, §5.1–§5.4 it breaks.
mod families {
    use super::*;
    use perfabi::family::{member_entry, Buckets, FamilySpec};
    use perfabi::{Kind, Reading, Unit};

    const GEOMETRY_1_1: Geometry = Geometry {
        page_size: 4096,
        nr_cpus: 2,
        max_instances: 32,
        damon_capacity: 0,
        max_families: 8,
        max_members: 8,
    };

    impl Image {
        fn tables(&self) -> perfabi::FamilyTables {
            self.layout().families.expect("a 1.1 image")
        }
        fn family(&mut self, slot: usize, e: &FamilyEntry) {
            let at = self.tables().family_word(slot) * 8;
            self.put(at, e);
        }
        fn member(&mut self, slot: usize, e: &MemberEntry) {
            let at = self.tables().member_word(slot) * 8;
            self.put(at, e);
        }
        fn family_header(&mut self, f: impl FnOnce(&mut FamilyHeader)) {
            let mut fh: FamilyHeader =
                bytemuck::pod_read_unaligned(&self.0[HEADER_SIZE_V1_0..HEADER_SIZE_V1_1]);
            f(&mut fh);
            self.put(HEADER_SIZE_V1_0, &fh);
        }
        fn family_field<T: bytemuck::Pod>(&mut self, slot: usize, offset: usize, v: &T) {
            let at = self.tables().family_word(slot) * 8 + offset;
            self.put(at, v);
        }
        fn member_field<T: bytemuck::Pod>(&mut self, slot: usize, offset: usize, v: &T) {
            let at = self.tables().member_word(slot) * 8 + offset;
            self.put(at, v);
        }
    }

    fn spec(name: &str, help: &str, dim: &str, kind: Kind, unit: Unit) -> FamilySpec {
        FamilySpec::new(name, help, dim, kind, unit)
    }

    /// A 1.1 segment: a 1.0 counter (slot 0), a counter family with two
    /// devices (one labelled), a signed gauge of one instance, a peak, a
    /// log2 and an explicit histogram, a freed family and a freed member.
    pub fn base() -> Image {
        let sizes = GEOMETRY_1_1.sizes().unwrap();
        let mut img = Image(vec![0u8; sizes.segment_size as usize]);
        let h = GEOMETRY_1_1
            .header(&WriterIdentity {
                epoch: 0x5eed_0000_0000_0011,
                pid: 4242,
                start_ns: 1_000_000_000,
                heartbeat_interval_ns: 1_000_000_000,
                first_heartbeat_ns: 2_000_000_000,
            })
            .unwrap();
        img.put(0, &h);
        img.put(HEADER_SIZE_V1_0, &sizes.families);
        img.set_header(|h| {
            h.gen1 = 9;
            h.gen2 = 9;
            h.instances_used = 19;
        });
        img.family_header(|f| {
            f.families_used = 6;
            f.members_used = 7;
        });
        img.entry(
            0,
            &entry(
                "old.read_bytes",
                "bytes",
                Semantics::Counter,
                ValueType::U64,
                1,
                SlotState::Live,
            ),
        );
        img.value(0, 0, 40);
        img.value(1, 0, 2);
        let fams = [
            spec(
                "disk.dev.read_bytes",
                "Bytes read from the device",
                "device",
                Kind::Counter,
                Unit::BYTES,
            ),
            FamilySpec {
                value_type: ValueType::I64,
                ..spec(
                    "sched.runq_delta",
                    "Change of the run queue",
                    "",
                    Kind::Gauge,
                    Unit::COUNT,
                )
            },
            spec(
                "net.queue_peak",
                "Longest transmit queue",
                "device",
                Kind::Peak,
                Unit::PAGES,
            ),
            FamilySpec::histogram(
                "disk.dev.latency",
                "Request latency",
                "device",
                Unit::NS,
                Buckets::Log2 { first: 10, n: 4 },
            ),
            FamilySpec::histogram(
                "cpu.idle_ratio",
                "Share of time idle, per wakeup",
                "",
                Unit::RATIO,
                Buckets::Explicit(vec![10, 100, 1000]),
            ),
            spec("gone.family", "", "", Kind::Counter, Unit::NONE),
        ];
        for (slot, f) in fams.iter().enumerate() {
            let mut e = f.entry(10 + slot as u64).unwrap();
            if slot == 5 {
                e.state = SlotState::Free as u32;
            }
            img.family(slot, &e);
        }
        // (member slot, family, instance, number, value slot, labels)
        type Row<'a> = (usize, u32, &'a str, u32, u32, &'a [(&'a str, &'a str)]);
        let members: [Row; 7] = [
            (
                0,
                0,
                "sda",
                0,
                1,
                &[("model", "virtio disk"), ("bus", "pci")],
            ),
            (1, 0, "vdb", 1, 2, &[]),
            (2, 1, "", 0, 3, &[]),
            (3, 2, "eth0", 0, 4, &[]),
            (4, 3, "sda", 0, 5, &[]),
            (5, 4, "", 0, 11, &[]),
            (6, 0, "sdc", 2, 17, &[]),
        ];
        for (slot, fam, inst, no, value, labels) in members {
            let dim = if fams[fam as usize].dimension.is_empty() {
                ""
            } else {
                "device"
            };
            let mut e = member_entry(fam, 100 + slot as u64, inst, no, value, labels, dim).unwrap();
            if slot == 6 {
                e.state = SlotState::Free as u32;
            }
            img.member(slot, &e);
        }
        let per_cpu: [(usize, [u64; 2]); 4] = [
            (1, [4096, 512]),
            (2, [0, 8192]),
            (3, [3, (-5i64) as u64]),
            (4, [17, 30]),
        ];
        for (slot, v) in per_cpu {
            img.value(0, slot, v[0]);
            img.value(1, slot, v[1]);
        }
        // Log2 histogram at 5..11: count, sum, buckets <=1024, <=2048, <=4096, +Inf.
        let h0 = [3u64, 900 + 1500 + 9000, 1, 1, 0, 1];
        let h1 = [1u64, 3000, 0, 0, 1, 0];
        // Explicit histogram at 11..17: <=10, <=100, <=1000, +Inf.
        let e0 = [2u64, 5 + 50, 1, 1, 0, 0];
        let e1 = [0u64; 6];
        for (base, (a, b)) in [(5, (h0, h1)), (11, (e0, e1))] {
            for k in 0..6 {
                img.value(0, base + k, a[k]);
                img.value(1, base + k, b[k]);
            }
        }
        img
    }

    fn with_family(slot: usize, offset: usize, v: &impl bytemuck::Pod) -> Image {
        let mut i = base();
        i.family_field(slot, offset, v);
        i
    }

    fn with_member(slot: usize, offset: usize, v: &impl bytemuck::Pod) -> Image {
        let mut i = base();
        i.member_field(slot, offset, v);
        i
    }

    fn with_tables(f: impl FnOnce(&mut FamilyHeader)) -> Image {
        let mut i = base();
        i.family_header(f);
        i
    }

    pub fn all(v: &mut Vec<(&'static str, Image)>) {
        use std::mem::offset_of;
        let fam = |f: &str| match f {
            "state" => offset_of!(FamilyEntry, state),
            "name" => offset_of!(FamilyEntry, name),
            "help" => offset_of!(FamilyEntry, help),
            "dimension" => offset_of!(FamilyEntry, dimension),
            "reg_id" => offset_of!(FamilyEntry, reg_id),
            "kind" => offset_of!(FamilyEntry, kind),
            "unit" => offset_of!(FamilyEntry, unit),
            "value_type" => offset_of!(FamilyEntry, value_type),
            "nr_buckets" => offset_of!(FamilyEntry, nr_buckets),
            "bucket_layout" => offset_of!(FamilyEntry, bucket_layout),
            "log2_first" => offset_of!(FamilyEntry, log2_first),
            "bounds" => offset_of!(FamilyEntry, bounds),
            _ => unreachable!(),
        };
        let mem = |f: &str| match f {
            "instance" => offset_of!(MemberEntry, instance),
            "reg_id" => offset_of!(MemberEntry, reg_id),
            "state" => offset_of!(MemberEntry, state),
            "family" => offset_of!(MemberEntry, family),
            "value_slot" => offset_of!(MemberEntry, value_slot),
            "instance_id" => offset_of!(MemberEntry, instance_id),
            "labels" => offset_of!(MemberEntry, labels),
            "reserved" => offset_of!(MemberEntry, reserved),
            _ => unreachable!(),
        };
        let text = |s: &str| perfabi::name::encode::<NAME_LEN>(s);
        v.push(("family_every_kind", base()));
        // §5.1, field by field.
        v.push(("family_bad_state", with_family(0, fam("state"), &3u32)));
        v.push((
            "family_bad_name",
            with_family(0, fam("name"), &text("disk..dev")),
        ));
        v.push((
            "family_name_part_starts_with_underscore",
            with_family(0, fam("name"), &text("disk._dev")),
        ));
        v.push((
            "family_help_without_nul",
            with_family(0, fam("help"), &[b'h'; HELP_LEN]),
        ));
        v.push((
            "family_help_not_printable",
            with_family(0, fam("help"), b"tab\there\0\0\0\0\0\0\0"),
        ));
        v.push((
            "family_bad_dimension",
            with_family(0, fam("dimension"), b"Device\0\0"),
        ));
        v.push(("family_reg_id_zero", with_family(0, fam("reg_id"), &0u64)));
        v.push(("family_reg_id_twice", with_family(1, fam("reg_id"), &10u64)));
        v.push(("family_bad_kind", with_family(0, fam("kind"), &9u32)));
        v.push((
            "family_bad_unit_scale",
            with_family(0, fam("unit"), &Unit::new(0, 0, 0, 1, 0, 0, 0)),
        ));
        v.push((
            "family_bad_unit_quantity",
            with_family(0, fam("unit"), &Unit::new(1, 0, 0, 0, 0, 0, 1)),
        ));
        v.push((
            "family_histogram_signed",
            with_family(3, fam("value_type"), &2u32),
        ));
        v.push((
            "family_too_many_buckets",
            with_family(4, fam("nr_buckets"), &33u32),
        ));
        v.push((
            "family_counter_with_buckets",
            with_family(0, fam("nr_buckets"), &4u32),
        ));
        v.push((
            "family_log2_past_2_63",
            with_family(3, fam("log2_first"), &62u32),
        ));
        v.push((
            "family_bounds_not_increasing",
            with_family(4, fam("bounds"), &[10u64, 10, 1000]),
        ));
        v.push((
            "family_bounds_past_the_last",
            with_family(4, fam("bounds") + 8 * 3, &7u64),
        ));
        v.push((
            "family_bad_layout",
            with_family(3, fam("bucket_layout"), &3u32),
        ));
        // §5.1 and §15.4: a gauge's word at 256 is its `gauge_mode`.
        v.push((
            "family_gauge_mode_max_is_valid",
            with_family(1, fam("bucket_layout"), &1u32),
        ));
        // §15.4 and §15.6: the next version of `family_every_kind`'s
        // writer, started a second later: its counter family's help is
        // reworded (the family still merges, showing this help) and its
        // log2 histogram's buckets moved up one (another identity: the
        // older file's counts of it are left out).
        v.push(("family_upgraded_is_valid", {
            let mut i = base();
            i.set_header(|h| h.writer_start_ns = 2_000_000_000);
            i.family_field(
                0,
                fam("help"),
                &perfabi::name::encode::<HELP_LEN>("Bytes read, per device"),
            );
            i.family_field(3, fam("log2_first"), &11u32);
            i
        }));
        // §15.5 and §15.6: a directory's kept file (closed) whose
        // `perfabi.folded` records, for `disk.dev.latency`, the start of
        // the writer whose metadata it keeps (3 s: after
        // `family_upgraded_is_valid`'s writer), and nothing for its other
        // families (ranked as started at 0): the first file of vector
        // `dir_kept`.
        v.push(("kept_records_a_reference_is_valid", {
            let mut i = base();
            i.set_header(|h| h.flags |= FLAG_CLOSED);
            let folded = spec(
                "perfabi.folded",
                "Segments whose counts this kept file holds",
                "segment",
                Kind::Counter,
                Unit::COUNT,
            );
            i.family(5, &folded.entry(15).unwrap());
            let reference = [("role", "reference")];
            let m = member_entry(5, 106, "disk.dev.latency", 0, 17, &reference, "segment");
            i.member(6, &m.unwrap());
            i.value(0, 17, 3_000_000_000);
            i
        }));
        v.push((
            "family_gauge_mode_undefined",
            with_family(1, fam("bucket_layout"), &4u32),
        ));
        v.push((
            "family_counter_with_gauge_mode",
            with_family(0, fam("bucket_layout"), &1u32),
        ));
        // §5.4: names across entries and families.
        v.push((
            "family_clashes_with_entry",
            with_family(0, fam("name"), &text("old_read_bytes")),
        ));
        v.push((
            "family_is_prefix_of_family",
            with_family(1, fam("name"), &text("disk.dev")),
        ));
        v.push((
            "family_clash_with_freed_family_is_valid",
            with_family(5, fam("name"), &text("disk_dev_read_bytes")),
        ));
        // §5.3 and §5.4: members.
        v.push(("member_bad_state", with_member(0, mem("state"), &2u32)));
        v.push((
            "member_instance_with_space",
            with_member(1, mem("instance"), b"v db\0\0\0\0"),
        ));
        v.push((
            "member_empty_instance_with_dimension",
            with_member(1, mem("instance"), &[0u8; 8]),
        ));
        v.push((
            "member_instance_without_dimension",
            with_member(2, mem("instance"), b"x\0\0\0\0\0\0\0"),
        ));
        v.push(("member_reg_id_zero", with_member(0, mem("reg_id"), &0u64)));
        v.push((
            "member_reg_id_twice",
            with_member(1, mem("reg_id"), &100u64),
        ));
        v.push((
            "member_of_freed_family",
            with_member(1, mem("family"), &5u32),
        ));
        v.push(("member_of_no_family", with_member(1, mem("family"), &77u32)));
        v.push((
            "member_past_instances_used",
            with_member(5, mem("value_slot"), &14u32),
        ));
        v.push((
            "member_overlaps_entry",
            with_member(1, mem("value_slot"), &0u32),
        ));
        v.push((
            "member_overlaps_histogram",
            with_member(3, mem("value_slot"), &7u32),
        ));
        v.push((
            "member_instance_twice",
            with_member(1, mem("instance"), b"sda\0\0\0\0\0"),
        ));
        v.push((
            "member_number_twice",
            with_member(1, mem("instance_id"), &0u32),
        ));
        v.push((
            "member_label_key_reserved",
            with_member(0, mem("labels"), b"le\0\0\0\0\0\0"),
        ));
        v.push((
            "member_label_after_a_gap",
            with_member(0, mem("labels"), &[0u8; LABEL_KEY_LEN + LABEL_VALUE_LEN]),
        ));
        v.push((
            "member_label_is_dimension",
            with_member(0, mem("labels"), b"device\0\0"),
        ));
        v.push((
            "member_reserved_not_zero",
            with_member(0, mem("reserved"), &1u64),
        ));
        v.push(("member_freed_may_break_rules", {
            let mut i = base();
            i.member_field(6, mem("instance"), b"not valid\0");
            i
        }));
        // §5.1: in every consistent copy of a CPU's values a histogram's
        // count is the sum of its buckets, modulo 2^64. Member 4 (log2) has
        // its values at 5..11, member 5 (explicit) at 11..17.
        v.push(("histogram_count_not_its_buckets", {
            let mut i = base();
            i.value(1, 5, 2); // CPU 1: count 2, buckets 0, 0, 1, 0
            i
        }));
        let wrapped = |count: u64| {
            let mut i = base();
            // CPU 1: buckets u64::MAX and 2, whose sum wraps to 1.
            for (k, w) in [count, 7, u64::MAX, 2, 0, 0].into_iter().enumerate() {
                i.value(1, 11 + k, w);
            }
            i
        };
        v.push(("histogram_buckets_wrap_to_their_count_is_valid", wrapped(1)));
        v.push(("histogram_count_one_off_its_wrapped_buckets", wrapped(2)));
        // CPU by CPU, on each the members in order: CPU 0's copy of member
        // 5 is named before CPU 1's of member 4.
        v.push(("histogram_two_broken_names_the_first_cpu", {
            let mut i = base();
            i.value(1, 5, 2);
            i.value(0, 11, 3); // CPU 0: count 3, buckets 1, 1, 0, 0
            i
        }));
        // §8 step 14: the tables' geometry.
        v.push((
            "families_misaligned",
            with_tables(|f| f.families_offset += 8),
        ));
        v.push((
            "families_overlap_cpu_area",
            with_tables(|f| f.families_offset -= 4096),
        ));
        v.push((
            "families_table_too_small",
            with_tables(|f| f.families_size = 0),
        ));
        v.push((
            "families_past_end",
            with_tables(|f| f.members_offset = 1 << 40),
        ));
        v.push((
            "members_overlap_families",
            with_tables(|f| f.members_offset = f.families_offset),
        ));
        // Each rule of step 14 at its boundary (`family_every_kind` is at
        // most: the family table starts where the per-CPU area ends and
        // holds exactly max_families entries, the member table starts
        // where it ends and ends at segment_size), and one word, entry or
        // page past it.
        v.push((
            "families_table_one_entry_short",
            with_tables(|f| f.max_families += 1),
        ));
        v.push((
            "families_table_a_word_past_whole_pages",
            with_tables(|f| f.families_size += 8),
        ));
        let without_members = |seg_end: i64| {
            let mut i = with_tables(|f| f.max_members = 0);
            i.set_header(|h| h.segment_size = (h.segment_size as i64 - 4096 + seg_end) as u64);
            i
        };
        v.push(("families_end_at_segment_end_is_valid", without_members(0)));
        v.push(("families_a_word_past_segment_end", without_members(-8)));
        v.push((
            "members_misaligned_by_a_word",
            with_tables(|f| f.members_offset += 8),
        ));
        // 10 members of 384 bytes fit in a page, 11 do not.
        v.push((
            "members_table_full_is_valid",
            with_tables(|f| f.max_members = 10),
        ));
        v.push((
            "members_table_one_entry_short",
            with_tables(|f| f.max_members = 11),
        ));
        v.push(("members_a_word_past_segment_end", {
            let mut i = base();
            i.set_header(|h| h.segment_size -= 8);
            i
        }));
        // §5.3, §5.4 rules 5 and 6: member 5's six values at 13..19 end at
        // instances_used (19); member 5 at 10..16 overlaps member 4's
        // values (5..11) by one word.
        v.push(("member_values_end_at_instances_used_is_valid", {
            let mut i = with_member(5, mem("value_slot"), &13u32);
            for (k, w) in [2u64, 5 + 50, 1, 1, 0, 0].into_iter().enumerate() {
                i.value(0, 13 + k, w);
                i.value(1, 13 + k, 0);
            }
            i
        }));
        v.push((
            "member_overlaps_previous_by_a_word",
            with_member(5, mem("value_slot"), &10u32),
        ));
        v.push((
            "family_entry_size_wrong",
            with_tables(|f| f.family_entry_size = 256),
        ));
        v.push((
            "families_too_many",
            with_tables(|f| f.max_families = MAX_FAMILIES + 1),
        ));
        v.push((
            "members_without_families",
            with_tables(|f| f.max_families = 0),
        ));
        v.push((
            "family_header_too_short",
            with_header(|h| {
                h.abi_minor = 1;
                h.header_size = HEADER_SIZE_V1_0 as u32;
            }),
        ));
        v.push(("family_tables_mid_change", {
            let mut i = base();
            i.set_header(|h| h.gen1 = 10);
            i
        }));
        v.push((
            "family_hostile_used_counts",
            with_tables(|f| {
                f.families_used = u64::MAX;
                f.members_used = u64::MAX;
            }),
        ));
    }

    /// The families of a 1.1 image, as the reference reader presents them.
    pub fn describe(view: &SegmentView, out: &mut String) {
        match view.snapshot(4) {
            Ok(s) => {
                writeln!(out, "families: ok {}", s.families.len()).unwrap();
                for f in &s.families {
                    let buckets = match &f.buckets {
                        None => String::new(),
                        Some(b) => {
                            let bounds: Vec<String> = (0..b.count())
                                .map(|k| b.bound(k).map_or("+Inf".into(), |x| x.to_string()))
                                .collect();
                            format!(" buckets={}", bounds.join(","))
                        }
                    };
                    let buckets = match f.gauge_mode {
                        perfabi::GaugeMode::Sum => buckets,
                        m => format!("{buckets} gauge_mode={}", m.as_str()),
                    };
                    writeln!(
                        out,
                        "family {:?} reg={} {} {} unit={:?} ({:?}) dimension={:?} help={:?}{}",
                        f.origin,
                        f.reg_id,
                        f.name,
                        f.kind.as_str(),
                        f.unit_text,
                        [
                            f.unit.dim_space,
                            f.unit.dim_time,
                            f.unit.dim_count,
                            f.unit.scale_space as i8,
                            f.unit.scale_time as i8,
                            f.unit.scale_count,
                            f.unit.quantity as i8
                        ],
                        f.dimension,
                        f.help,
                        buckets
                    )
                    .unwrap();
                    for m in &f.members {
                        let show = |r: Reading| match r {
                            Reading::Unsigned(v) => v.to_string(),
                            Reading::Signed(v) => v.to_string(),
                            Reading::Histogram(h) => {
                                format!("count={} sum={} buckets={:?}", h.count, h.sum, h.buckets)
                            }
                        };
                        let per: Vec<String> = (0..s.nr_cpus)
                            .map(|c| show(s.reading_on(c, f, m)))
                            .collect();
                        writeln!(
                            out,
                            "  member slot={:?} reg={} instance={:?} number={} labels={:?} values={}+{} total={} per_cpu=[{}]",
                            m.slot,
                            m.reg_id,
                            m.instance,
                            m.instance_id,
                            m.labels,
                            m.value_slot,
                            m.words,
                            show(s.reading(f, m)),
                            per.join("; ")
                        )
                        .unwrap();
                    }
                }
            }
            Err(e) => writeln!(out, "families: error {} ({e})", e.code()).unwrap(),
        }
    }
}
