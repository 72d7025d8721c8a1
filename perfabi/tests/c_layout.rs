//! `spec/perfabi.h` and the Rust crate describe one ABI, and the header's
//! canonical placement is Rust's. C programs compiled against the header
//! print what they compute, and each value must equal Rust's:
//!
//! * every field's offset and size, and every struct's size;
//! * every constant (`#define` and enumerator) of the header that has a twin
//!   in `perfabi::layout` — and no constant of either side is left out of
//!   the comparison;
//! * over grids of geometries (page size, CPUs, instances, DAMON capacity,
//!   family and member tables off and on, with every limit and its
//!   neighbours), `perfabi_geometry_init()` against
//!   `perfabi::Geometry::sizes()` (the sizes, or the same error),
//!   `perfabi_header_init()` against `Geometry::header()` and
//!   `perfabi_family_header_init()` against `Sizes::families` field by
//!   field, and the address helpers against `perfabi::Layout` and
//!   `perfabi::FamilyTables`.
//!
//! A failure names the constant, the field or the geometry that differs.
#![cfg(not(loom))]

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use perfabi::layout::*;
use perfabi::unit::{QUANTITY_PAGES, QUANTITY_PLAIN, QUANTITY_RATIO};
use perfabi::{validate_header, Geometry, Layout, WriterIdentity};

/// The folder of `perfabi.h`.
fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec")
}

/// Compiles `source` (a C program including `perfabi.h`) strictly, runs it
/// and returns what it printed.
fn run_c(name: &str, source: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.path().join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(spec_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("C compiler `{cc}` not runnable ({e}); install gcc (apt-get install gcc)")
        });
    assert!(
        out.status.success(),
        "{name}.c against spec/perfabi.h does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "{name} failed: {run:?}");
    String::from_utf8(run.stdout).unwrap()
}

/// Fails listing every difference (the first 40), if there is any.
#[track_caller]
fn assert_no_differences(what: &str, diffs: &[String]) {
    if diffs.is_empty() {
        return;
    }
    let mut msg = format!(
        "{} difference(s) between spec/perfabi.h and Rust ({what}):\n",
        diffs.len()
    );
    for d in diffs.iter().take(40) {
        msg += "  ";
        msg += d;
        msg += "\n";
    }
    if diffs.len() > 40 {
        let _ = writeln!(msg, "  ... and {} more", diffs.len() - 40);
    }
    panic!("{msg}");
}

/// (Rust struct, C struct, field, Rust offset, Rust size)
type Row = (&'static str, &'static str, &'static str, usize, usize);

macro_rules! fields {
    ($rust:ident => $c:literal: $($f:ident),+ $(,)?) => {{
        let z: $rust = bytemuck::Zeroable::zeroed();
        let _ = &z;
        vec![$((stringify!($rust), $c, stringify!($f), offset_of!($rust, $f), std::mem::size_of_val(&z.$f))),+]
    }};
}

fn rows() -> Vec<Row> {
    let mut v = fields!(Header => "perfabi_header":
        magic, abi_major, abi_minor, header_size, byte_order, page_size, nr_cpus, pages_per_cpu,
        max_instances, damon_capacity, instance_entry_size, damon_record_size, counters_offset,
        damon_offset, segment_size, instances_offset, instances_size, cpu_area_offset,
        cpu_block_size, epoch, writer_pid, writer_start_ns, heartbeat_interval_ns, gen1, gen2,
        heartbeat_ns, flags, instances_used, reserved);
    v.extend(fields!(InstanceEntry => "perfabi_instance":
        name, unit, reg_id, state, semantics, value_type, reserved0, reserved));
    v.extend(fields!(CpuBlockHead => "perfabi_cpu_head": seq, seq_pad, damon_next, damon_dropped, reserved));
    v.extend(fields!(DamonRecord => "perfabi_damon_record":
        monitor_id, target_id, aggregation, region_index, nr_regions, start, end, nr_accesses, age,
        sample_us, aggr_us));
    v.extend(fields!(FamilyHeader => "perfabi_family_header":
        families_offset, families_size, members_offset, members_size, max_families, max_members,
        family_entry_size, member_entry_size, families_used, members_used));
    v.extend(fields!(Unit => "perfabi_unit":
        dim_space, dim_time, dim_count, scale_space, scale_time, scale_count, quantity, reserved));
    v.extend(fields!(FamilyEntry => "perfabi_family":
        name, help, dimension, reg_id, state, kind, unit, value_type, nr_buckets, bucket_layout,
        log2_first, bounds));
    v.extend(fields!(Label => "perfabi_label": key, value));
    v.extend(fields!(MemberEntry => "perfabi_member":
        instance, reg_id, state, family, value_slot, instance_id, reserved0, labels, reserved));
    v
}

/// Every struct of `perfabi.h` with its Rust twin's size.
fn structs() -> Vec<(&'static str, usize)> {
    vec![
        ("perfabi_header", size_of::<Header>()),
        ("perfabi_instance", size_of::<InstanceEntry>()),
        ("perfabi_cpu_head", size_of::<CpuBlockHead>()),
        ("perfabi_damon_record", size_of::<DamonRecord>()),
        ("perfabi_family_header", size_of::<FamilyHeader>()),
        ("perfabi_unit", size_of::<Unit>()),
        ("perfabi_family", size_of::<FamilyEntry>()),
        ("perfabi_label", size_of::<Label>()),
        ("perfabi_member", size_of::<MemberEntry>()),
    ]
}

#[test]
fn c_header_matches_rust_layout() {
    let rows = rows();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"perfabi.h\"\nint main(void) {\n",
    );
    for (_, cs, f, _, _) in &rows {
        c += &format!(
            "  printf(\"{cs}.{f} %zu %zu\\n\", offsetof(struct {cs}, {f}), sizeof(((struct {cs} *)0)->{f}));\n"
        );
    }
    let structs = structs();
    for (cs, _) in &structs {
        c += &format!("  printf(\"{cs} %zu\\n\", sizeof(struct {cs}));\n");
    }
    c += "  return 0;\n}\n";
    let text = run_c("layout", &c);
    let mut lines = text.lines();
    for (rs, cs, f, off, size) in &rows {
        let line = lines.next().expect("C program printed too few lines");
        assert_eq!(
            line,
            format!("{cs}.{f} {off} {size}"),
            "C vs Rust {rs}.{f} (offset size)"
        );
    }
    for (cs, size) in &structs {
        assert_eq!(lines.next().unwrap(), format!("{cs} {size}"), "struct size");
    }
    println!(
        "C layout test: {} fields and {} struct sizes of spec/perfabi.h equal the Rust layout",
        rows.len(),
        structs.len()
    );
}

/// One constant: its C spelling, a C statement printing it on one line, its
/// Rust name, and the Rust value as the C program prints it.
struct Constant {
    c: &'static str,
    print: String,
    rust: &'static str,
    value: String,
}

/// A numeric constant: the C expression `c` printed as an unsigned 64-bit
/// number.
fn num(c: &'static str, rust: &'static str, value: u64) -> Constant {
    Constant {
        c,
        print: format!("printf(\"%llu\\n\", (unsigned long long)({c}));"),
        rust,
        value: value.to_string(),
    }
}

/// A unit initializer of `perfabi.h` (`PERFABI_UNIT_*`) against a
/// `perfabi::Unit`, both as the native 8-byte word they are.
fn unit(c: &'static str, rust: &'static str, u: Unit) -> Constant {
    Constant {
        c,
        print: format!(
            "{{ struct perfabi_unit u = {c}; unsigned long long w; memcpy(&w, &u, sizeof(w)); \
             printf(\"%llu\\n\", w); }}"
        ),
        rust,
        value: u64::from_ne_bytes(bytemuck::cast(u)).to_string(),
    }
}

/// `C expression => Rust constant` pairs, as [`num`] rows.
macro_rules! numbers {
    ($($c:literal => $rust:path),+ $(,)?) => {
        vec![$(num($c, stringify!($rust), $rust as u64)),+]
    };
}

/// Every constant of `perfabi.h` with a Rust twin in `perfabi::layout`.
fn constants() -> Vec<Constant> {
    let mut v = vec![
        Constant {
            c: "PERFABI_MAGIC",
            // Every byte of the literal, its NUL included.
            print: "{ size_t i; for (i = 0; i < sizeof(PERFABI_MAGIC); i++) \
                    printf(\"%02x\", (unsigned char)PERFABI_MAGIC[i]); printf(\"\\n\"); }"
                .into(),
            rust: "MAGIC",
            value: MAGIC.iter().map(|b| format!("{b:02x}")).collect(),
        },
        Constant {
            c: "PERFABI_MAGIC as a native word",
            print: "{ unsigned long long m; memcpy(&m, PERFABI_MAGIC, sizeof(m)); \
                    printf(\"%llu\\n\", m); }"
                .into(),
            rust: "MAGIC_WORD",
            value: MAGIC_WORD.to_string(),
        },
    ];
    v.extend(numbers![
        "PERFABI_ABI_MAJOR" => ABI_MAJOR,
        "PERFABI_BYTE_ORDER_MARK" => BYTE_ORDER_MARK,
        "PERFABI_CACHE_LINE" => CACHE_LINE,
        "PERFABI_NAME_LEN" => NAME_LEN,
        "PERFABI_UNIT_LEN" => UNIT_LEN,
        "PERFABI_MIN_PAGE_SIZE" => MIN_PAGE_SIZE,
        "PERFABI_MAX_PAGE_SIZE" => MAX_PAGE_SIZE,
        "PERFABI_MAX_CPUS" => MAX_CPUS,
        "PERFABI_MAX_INSTANCES" => MAX_INSTANCES,
        "PERFABI_MAX_DAMON_CAPACITY" => MAX_DAMON_CAPACITY,
        "PERFABI_FLAG_CLOSED" => FLAG_CLOSED,
        "PERFABI_FLAG_KERNEL" => FLAG_KERNEL,
        "PERFABI_FLAG_LIVE_LOCK" => FLAG_LIVE_LOCK,
        "PERFABI_SLOT_FREE" => SlotState::Free,
        "PERFABI_SLOT_LIVE" => SlotState::Live,
        "PERFABI_COUNTER" => Semantics::Counter,
        "PERFABI_INSTANT" => Semantics::Instant,
        "PERFABI_TYPE_U64" => ValueType::U64,
        "PERFABI_TYPE_I64" => ValueType::I64,
        "sizeof(struct perfabi_header)" => HEADER_SIZE_V1_0,
        "sizeof(struct perfabi_instance)" => INSTANCE_ENTRY_SIZE,
        "sizeof(struct perfabi_damon_record)" => DAMON_RECORD_SIZE,
        "sizeof(struct perfabi_cpu_head)" => CPU_BLOCK_HEAD_SIZE,
        "sizeof(struct perfabi_header) / 8" => HEADER_WORDS,
        "sizeof(struct perfabi_instance) / 8" => INSTANCE_ENTRY_WORDS,
        "sizeof(struct perfabi_damon_record) / 8" => DAMON_RECORD_WORDS,
        "offsetof(struct perfabi_header, epoch) / 8" => HEADER_EPOCH_WORD,
        "offsetof(struct perfabi_header, gen1) / 8" => HEADER_GEN1_WORD,
        "offsetof(struct perfabi_header, gen2) / 8" => HEADER_GEN2_WORD,
        "offsetof(struct perfabi_header, heartbeat_ns) / 8" => HEADER_HEARTBEAT_WORD,
        "offsetof(struct perfabi_header, flags) / 8" => HEADER_FLAGS_WORD,
        "offsetof(struct perfabi_header, instances_used) / 8" => HEADER_USED_WORD,
        "offsetof(struct perfabi_cpu_head, seq) / 8" => CPU_SEQ_WORD,
        "offsetof(struct perfabi_cpu_head, damon_next) / 8" => CPU_DAMON_NEXT_WORD,
        "offsetof(struct perfabi_cpu_head, damon_dropped) / 8" => CPU_DAMON_DROPPED_WORD,
        // ABI 1.1
        "PERFABI_HEADER_SIZE_V1_0" => HEADER_SIZE_V1_0,
        "PERFABI_HEADER_SIZE_V1_1" => HEADER_SIZE_V1_1,
        "sizeof(struct perfabi_header) + sizeof(struct perfabi_family_header)" => HEADER_SIZE_V1_1,
        "sizeof(struct perfabi_family)" => FAMILY_ENTRY_SIZE,
        "sizeof(struct perfabi_member)" => MEMBER_ENTRY_SIZE,
        "sizeof(struct perfabi_family) / 8" => FAMILY_ENTRY_WORDS,
        "sizeof(struct perfabi_member) / 8" => MEMBER_ENTRY_WORDS,
        "sizeof(struct perfabi_family_header) / 8" => FAMILY_HEADER_WORDS,
        "(sizeof(struct perfabi_header) + offsetof(struct perfabi_family_header, families_used)) / 8"
            => HEADER_FAMILIES_USED_WORD,
        "(sizeof(struct perfabi_header) + offsetof(struct perfabi_family_header, members_used)) / 8"
            => HEADER_MEMBERS_USED_WORD,
        "PERFABI_HELP_LEN" => HELP_LEN,
        "PERFABI_DIMENSION_LEN" => DIMENSION_LEN,
        "PERFABI_INSTANCE_LEN" => INSTANCE_LEN,
        "PERFABI_MAX_LABELS" => MAX_LABELS,
        "PERFABI_LABEL_KEY_LEN" => LABEL_KEY_LEN,
        "PERFABI_LABEL_VALUE_LEN" => LABEL_VALUE_LEN,
        "PERFABI_MIN_BUCKETS" => MIN_BUCKETS,
        "PERFABI_MAX_BUCKETS" => MAX_BUCKETS,
        "PERFABI_MAX_FAMILIES" => MAX_FAMILIES,
        "PERFABI_MAX_MEMBERS" => MAX_MEMBERS,
        "PERFABI_KIND_COUNTER" => Kind::Counter,
        "PERFABI_KIND_GAUGE" => Kind::Gauge,
        "PERFABI_KIND_PEAK" => Kind::Peak,
        "PERFABI_KIND_HISTOGRAM" => Kind::Histogram,
        "PERFABI_BUCKETS_NONE" => BucketLayout::None,
        "PERFABI_BUCKETS_LOG2" => BucketLayout::Log2,
        "PERFABI_BUCKETS_EXPLICIT" => BucketLayout::Explicit,
        "PERFABI_GAUGE_SUM" => GaugeMode::Sum,
        "PERFABI_GAUGE_MAX" => GaugeMode::Max,
        "PERFABI_GAUGE_MIN" => GaugeMode::Min,
        "PERFABI_GAUGE_ALL" => GaugeMode::All,
        "PERFABI_QUANTITY_PLAIN" => QUANTITY_PLAIN,
        "PERFABI_QUANTITY_PAGES" => QUANTITY_PAGES,
        "PERFABI_QUANTITY_RATIO" => QUANTITY_RATIO,
    ]);
    // The minor of a segment with family tables (a known core defect, see
    v.push(num("PERFABI_ABI_MINOR", "ABI_MINOR", ABI_MINOR.into()));
    v.extend([
        unit("PERFABI_UNIT_NONE", "Unit::NONE", Unit::NONE),
        unit("PERFABI_UNIT_BYTES", "Unit::BYTES", Unit::BYTES),
        unit("PERFABI_UNIT_KIB", "Unit::KIB", Unit::KIB),
        unit("PERFABI_UNIT_NS", "Unit::NS", Unit::NS),
        unit("PERFABI_UNIT_US", "Unit::US", Unit::US),
        unit("PERFABI_UNIT_MS", "Unit::MS", Unit::MS),
        unit("PERFABI_UNIT_SECONDS", "Unit::SECONDS", Unit::SECONDS),
        unit("PERFABI_UNIT_COUNT", "Unit::COUNT", Unit::COUNT),
        unit("PERFABI_UNIT_PAGES", "Unit::PAGES", Unit::PAGES),
        unit("PERFABI_UNIT_RATIO", "Unit::RATIO", Unit::RATIO),
        unit(
            "PERFABI_UNIT_BYTES_PER_SECOND",
            "Unit::BYTES_PER_SECOND",
            Unit::BYTES_PER_SECOND,
        ),
        unit(
            "(struct perfabi_unit)PERFABI_UNIT(-3, 3, -2, 6, 5, -8, PERFABI_QUANTITY_PLAIN)",
            "Unit::new(-3, 3, -2, 6, 5, -8, 0)",
            Unit::new(-3, 3, -2, 6, 5, -8, 0),
        ),
    ]);
    v
}

/// Names of `perfabi.h` without a Rust constant twin. The enumerators of
/// `perfabi_geometry_status` stand for error codes: the geometry grid
/// compares the code of each result (`perfabi_geometry_status_code()`) with
/// the code of `Geometry::sizes()`'s error. `_STATUS_MAX` is a non-ABI
/// sentinel.
const C_COMPARED_ELSEWHERE: &[&str] = &[
    "PERFABI_GEOMETRY_OK",
    "PERFABI_GEOMETRY_BAD_PAGE_SIZE",
    "PERFABI_GEOMETRY_BAD_CPU_COUNT",
    "PERFABI_GEOMETRY_BAD_CAPACITY",
    "PERFABI_GEOMETRY_STATUS_MAX",
];

/// The identifier at the start of `s`.
fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The `PERFABI_*` names `perfabi.h` defines: macros and enumerators.
fn c_header_names() -> Vec<String> {
    let text = std::fs::read_to_string(spec_dir().join("perfabi.h")).unwrap();
    let mut names = Vec::new();
    let mut in_enum = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("#define ") {
            names.push(ident(rest.trim_start()));
        } else if t.starts_with("enum perfabi_") && t.ends_with('{') {
            in_enum = true;
        } else if in_enum && t.starts_with('}') {
            in_enum = false;
        } else if in_enum && t.starts_with("PERFABI_") {
            names.push(ident(t));
        }
    }
    names.retain(|n| n.starts_with("PERFABI_"));
    names
}

/// The constants `perfabi/src/layout.rs` defines: `pub const` items and the
/// variants of its `#[repr(u32)]` enums (as `Enum::Variant`).
fn rust_layout_names() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layout.rs");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (moved? update this test)", path.display()));
    let mut names = Vec::new();
    let mut in_enum: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("pub const ") {
            if !rest.starts_with("fn ") {
                names.push(ident(rest));
            }
        } else if let Some(rest) = line.strip_prefix("pub enum ") {
            in_enum = Some(ident(rest));
        } else if line.starts_with('}') {
            in_enum = None;
        } else if let Some(e) = &in_enum {
            let t = line.trim();
            if !t.starts_with("//") && t.contains(" = ") && t.ends_with(',') {
                names.push(format!("{e}::{}", ident(t)));
            }
        }
    }
    names
}

#[test]
fn c_constants_match_rust() {
    let consts = constants();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n\
         #include \"perfabi.h\"\nint main(void) {\n",
    );
    for k in &consts {
        let _ = writeln!(c, "  {}", k.print);
    }
    c += "  return 0;\n}\n";
    let text = run_c("constants", &c);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), consts.len(), "the C program printed:\n{text}");
    let mut diffs = Vec::new();
    for (k, line) in consts.iter().zip(&lines) {
        if *line != k.value {
            diffs.push(format!(
                "constant {} (Rust {}): C {line}, Rust {}",
                k.c, k.rust, k.value
            ));
        }
    }
    // Nothing left out: every PERFABI_ name of the header is compared here
    // or in the geometry grid, and every Rust constant of the layout here.
    let (c_names, rust_names) = (c_header_names(), rust_layout_names());
    assert!(
        c_names.iter().any(|n| n == "PERFABI_TYPE_I64")
            && rust_names.iter().any(|n| n == "ValueType::I64"),
        "the scan of perfabi.h or layout.rs finds nothing: {c_names:?} {rust_names:?}"
    );
    for name in &c_names {
        let compared = consts.iter().any(|k| {
            k.c.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .any(|tok| tok == name)
        }) || C_COMPARED_ELSEWHERE.contains(&name.as_str());
        if !compared {
            diffs.push(format!(
                "constant {name}: defined in perfabi.h, but no Rust twin is compared \
                 (add it to constants() in perfabi/tests/c_layout.rs)"
            ));
        }
    }
    for name in &rust_names {
        if !consts.iter().any(|k| k.rust == name) {
            diffs.push(format!(
                "constant {name}: defined in perfabi/src/layout.rs, but no C twin is compared \
                 (add it to perfabi.h and to constants() in perfabi/tests/c_layout.rs)"
            ));
        }
    }
    assert_no_differences("constants", &diffs);
    println!(
        "C constants test: {} constants of spec/perfabi.h equal their Rust twins \
         ({} PERFABI_ names in the header, {} constants in layout.rs, none left out)",
        consts.len(),
        c_names.len(),
        rust_names.len()
    );
}

/// One grid of geometries: the cross product of its lists.
struct Grid {
    page_size: Vec<u32>,
    nr_cpus: Vec<u32>,
    max_instances: Vec<u32>,
    damon_capacity: Vec<u32>,
    /// (max_families, max_members): (0, 0) is a 1.0 segment.
    families: Vec<(u32, u32)>,
}

impl Grid {
    /// Every geometry of the grid, in the order the C program visits them
    /// (page size outermost, the family tables innermost).
    fn geometries(&self) -> Vec<Geometry> {
        let mut v = Vec::new();
        for &page_size in &self.page_size {
            for &nr_cpus in &self.nr_cpus {
                for &max_instances in &self.max_instances {
                    for &damon_capacity in &self.damon_capacity {
                        for &(max_families, max_members) in &self.families {
                            v.push(Geometry {
                                page_size,
                                nr_cpus,
                                max_instances,
                                damon_capacity,
                                max_families,
                                max_members,
                            });
                        }
                    }
                }
            }
        }
        v
    }
}

/// The grids: every limit with its neighbours on both sides, odd and
/// boundary values in between, family tables off and on; then every CPU
/// count from 1 to 1024, off and on; then the family and member table
/// limits with their neighbours over a few placements.
fn grids() -> Vec<Grid> {
    let m = u32::MAX;
    vec![
        Grid {
            page_size: vec![
                0,
                1,
                2048,
                4095,
                4096,
                8192,
                12288,
                16384,
                32768,
                65536,
                131072,
                1 << 31,
                m,
            ],
            nr_cpus: vec![0, 1, 2, 3, 64, 1024, 8191, 8192, 8193, m],
            max_instances: vec![
                0, 1, 2, 7, 8, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1000, 1024, 4080, 4096,
                32767, 65535, 65536, 65537, m,
            ],
            damon_capacity: vec![
                0,
                1,
                2,
                63,
                64,
                65,
                4095,
                4096,
                100_000,
                1 << 19,
                (1 << 20) - 1,
                1 << 20,
                (1 << 20) + 1,
                m,
            ],
            families: vec![(0, 0), (64, 1024)],
        },
        Grid {
            page_size: vec![4096, 16384, 65536],
            nr_cpus: (1..=1024).collect(),
            max_instances: vec![1, 65536],
            damon_capacity: vec![0, 1 << 20],
            families: vec![(0, 0), (7, 11)],
        },
        Grid {
            page_size: vec![0, 4096, 16384, 65536, 131072],
            nr_cpus: vec![0, 1, 2, 8192, 8193],
            max_instances: vec![0, 1, 4080, 65536, 65537],
            damon_capacity: vec![0, 4096, 1 << 20, (1 << 20) + 1],
            families: vec![
                (0, 0),
                (0, 1),
                (0, m),
                (1, 0),
                (1, 1),
                (2, 3),
                (7, 10),
                (8, 10),
                (9, 11),
                (10, 32),
                (11, 33),
                (64, 1024),
                (128, 170),
                (129, 171),
                (1000, 4000),
                (65535, 65535),
                (65536, 65536),
                (65537, 0),
                (65537, 1),
                (1, 65537),
                (m, 0),
                (1, m),
                (m, m),
            ],
        },
    ]
}

/// The writer identity both sides put in the header.
const ID: WriterIdentity = WriterIdentity {
    epoch: 0x0123_4567_89ab_cdef,
    pid: 4242,
    start_ns: 1_000_000_007,
    heartbeat_interval_ns: 250_000_000,
    first_heartbeat_ns: 1_000_000_009,
};

/// Names (and C expressions over `h`) of every scalar header field, in order.
macro_rules! header_fields {
    ($($f:ident),+ $(,)?) => {
        /// Every header field, as (name, C expression, Rust value).
        fn header_values(h: &Header) -> Vec<(String, String, u64)> {
            let mut v = vec![(
                "magic".to_string(),
                "magic_word(&h)".to_string(),
                u64::from_ne_bytes(h.magic),
            )];
            $(v.push((stringify!($f).to_string(), format!("h.{}", stringify!($f)), u64::from(h.$f)));)+
            for (i, r) in h.reserved.iter().enumerate() {
                v.push((format!("reserved[{i}]"), format!("h.reserved[{i}]"), *r));
            }
            v
        }
    };
}
header_fields!(
    abi_major,
    abi_minor,
    header_size,
    byte_order,
    page_size,
    nr_cpus,
    pages_per_cpu,
    max_instances,
    damon_capacity,
    instance_entry_size,
    damon_record_size,
    counters_offset,
    damon_offset,
    segment_size,
    instances_offset,
    instances_size,
    cpu_area_offset,
    cpu_block_size,
    epoch,
    writer_pid,
    writer_start_ns,
    heartbeat_interval_ns,
    gen1,
    gen2,
    heartbeat_ns,
    flags,
    instances_used,
);

/// Every field of the ABI 1.1 header fields (C: `fh`, filled in by
/// `perfabi_family_header_init()`), as (name, C expression, Rust value).
macro_rules! family_header_fields {
    ($($f:ident),+ $(,)?) => {
        fn family_header_values(fh: &FamilyHeader) -> Vec<(String, String, u64)> {
            vec![$((
                stringify!($f).to_string(),
                format!("fh.{}", stringify!($f)),
                u64::from(fh.$f),
            )),+]
        }
    };
}
family_header_fields!(
    families_offset,
    families_size,
    members_offset,
    members_size,
    max_families,
    max_members,
    family_entry_size,
    member_entry_size,
    families_used,
    members_used,
);

/// The geometry fields and Rust's values: the inputs, then `Sizes` (its
/// `families` last).
fn geometry_values(g: &Geometry) -> Result<Vec<(&'static str, u64)>, &'static str> {
    let s = g.sizes().map_err(|e| e.code())?;
    Ok(vec![
        ("page_size", g.page_size.into()),
        ("nr_cpus", g.nr_cpus.into()),
        ("max_instances", g.max_instances.into()),
        ("damon_capacity", g.damon_capacity.into()),
        ("max_families", g.max_families.into()),
        ("max_members", g.max_members.into()),
        ("pages_per_cpu", s.pages_per_cpu.into()),
        ("counters_offset", s.counters_offset.into()),
        ("damon_offset", s.damon_offset.into()),
        ("instances_offset", s.instances_offset),
        ("instances_size", s.instances_size),
        ("cpu_area_offset", s.cpu_area_offset),
        ("cpu_block_size", s.cpu_block_size),
        ("segment_size", s.segment_size),
        ("families_offset", s.families.families_offset),
        ("families_size", s.families.families_size),
        ("members_offset", s.families.members_offset),
        ("members_size", s.families.members_size),
    ])
}

/// The (cpu, slot) pairs whose addresses are compared: the first and the
/// last of each.
fn corners(g: &Geometry) -> [(u32, u32, u32); 2] {
    [
        (0, 0, 0),
        (
            g.nr_cpus - 1,
            g.max_instances - 1,
            g.damon_capacity.saturating_sub(1),
        ),
    ]
}

/// The (family, member) slots whose addresses are compared: the first and
/// the last of each table (slot 0 of an empty member table).
fn family_corners(g: &Geometry) -> [(u32, u32); 2] {
    [
        (0, 0),
        (
            g.max_families.saturating_sub(1),
            g.max_members.saturating_sub(1),
        ),
    ]
}

/// The addresses Rust's `Layout` (and its `FamilyTables`, when the
/// segment has them) gives, in bytes, as (name, value).
fn address_values(l: &Layout, g: &Geometry) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for (cpu, slot, ring) in corners(g) {
        let (c, s, r) = (cpu as usize, slot as usize, ring as usize);
        v.push((format!("instance_offset({s})"), l.instance_word(s)));
        v.push((format!("cpu_block_offset({c})"), l.cpu_block_word(c)));
        v.push((format!("counter_offset({c}, {s})"), l.counter_word(c, s)));
        v.push((format!("damon_record_offset({c}, {r})"), l.damon_word(c, r)));
    }
    if let Some(t) = l.families {
        for (f, m) in family_corners(g) {
            let (f, m) = (f as usize, m as usize);
            v.push((format!("family_offset({f})"), t.family_word(f)));
            v.push((format!("member_offset({m})"), t.member_word(m)));
        }
    }
    v.into_iter().map(|(n, w)| (n, w as u64 * 8)).collect()
}

/// A C array of `u32` named `name`.
fn c_array(name: &str, values: &[u32]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("{v}u")).collect();
    format!(
        "static const unsigned int {name}[] = {{ {} }};\n",
        items.join(", ")
    )
}

#[test]
fn c_geometry_matches_rust() {
    let grids = grids();
    let probe = Geometry {
        page_size: 4096,
        nr_cpus: 1,
        max_instances: 1,
        damon_capacity: 0,
        max_families: 0,
        max_members: 0,
    };
    let header_names = header_values(&probe.header(&ID).unwrap());
    let family_header_names = family_header_values(&FamilyHeader::default());
    let geometry_names = geometry_values(&probe).unwrap();

    let mut c = String::from(
        "#include <stdio.h>\n#include <string.h>\n#include \"perfabi.h\"\n\n\
         static unsigned long long magic_word(const struct perfabi_header *h)\n{\n\
         \tunsigned long long m;\n\n\tmemcpy(&m, h->magic, sizeof(m));\n\treturn m;\n}\n\n",
    );
    c += "static void one(unsigned int p, unsigned int c, unsigned int i, unsigned int d,\n\
          \t\tunsigned int f, unsigned int m)\n{\n\
          \tstruct perfabi_geometry g;\n\tstruct perfabi_header h;\n\
          \tstruct perfabi_family_header fh;\n\
          \tenum perfabi_geometry_status st;\n\n\
          \t/* Garbage first: a field the helpers forget shows up. */\n\
          \tmemset(&g, 0xa5, sizeof(g));\n\tmemset(&h, 0xa5, sizeof(h));\n\
          \tmemset(&fh, 0xa5, sizeof(fh));\n\
          \tst = perfabi_geometry_init(&g, p, c, i, d, f, m);\n\
          \tprintf(\"%u %u %u %u %u %u %s\", p, c, i, d, f, m, perfabi_geometry_status_code(st));\n\
          \tif (st != PERFABI_GEOMETRY_OK) {\n\t\tputchar('\\n');\n\t\treturn;\n\t}\n";
    for (f, _) in &geometry_names {
        let _ = writeln!(c, "\tprintf(\" %llu\", (unsigned long long)g.{f});");
    }
    let _ = writeln!(
        c,
        "\tperfabi_header_init(&h, &g, {}ull, {}ull, {}ull, {}ull, {}ull);",
        ID.epoch, ID.pid, ID.start_ns, ID.heartbeat_interval_ns, ID.first_heartbeat_ns
    );
    c += "\tperfabi_family_header_init(&fh, &g);\n";
    for (_, expr, _) in header_names.iter().chain(&family_header_names) {
        let _ = writeln!(c, "\tprintf(\" %llu\", (unsigned long long){expr});");
    }
    c += "\t{\n\t\tunsigned int k;\n\t\tconst unsigned int cpu[2] = { 0, c - 1 }, slot[2] = { 0, i - 1 },\n\
          \t\t\tring[2] = { 0, d ? d - 1 : 0 }, fam[2] = { 0, f ? f - 1 : 0 },\n\
          \t\t\tmem[2] = { 0, m ? m - 1 : 0 };\n\n\t\tfor (k = 0; k < 2; k++)\n\
          \t\t\tprintf(\" %llu %llu %llu %llu\",\n\
          \t\t\t       (unsigned long long)perfabi_instance_offset(&h, slot[k]),\n\
          \t\t\t       (unsigned long long)perfabi_cpu_block_offset(&h, cpu[k]),\n\
          \t\t\t       (unsigned long long)perfabi_counter_offset(&h, cpu[k], slot[k]),\n\
          \t\t\t       (unsigned long long)perfabi_damon_record_offset(&h, cpu[k], ring[k]));\n\
          \t\tfor (k = 0; perfabi_geometry_has_families(&g) && k < 2; k++)\n\
          \t\t\tprintf(\" %llu %llu\",\n\
          \t\t\t       (unsigned long long)perfabi_family_offset(&fh, fam[k]),\n\
          \t\t\t       (unsigned long long)perfabi_member_offset(&fh, mem[k]));\n\
          \t}\n\tputchar('\\n');\n}\n\n";
    let mut main = String::from("int main(void)\n{\n\tsize_t a, b, x, y, z;\n\n");
    for (n, g) in grids.iter().enumerate() {
        c += &c_array(&format!("page_size_{n}"), &g.page_size);
        c += &c_array(&format!("nr_cpus_{n}"), &g.nr_cpus);
        c += &c_array(&format!("max_instances_{n}"), &g.max_instances);
        c += &c_array(&format!("damon_capacity_{n}"), &g.damon_capacity);
        let (fs, ms): (Vec<u32>, Vec<u32>) = g.families.iter().copied().unzip();
        c += &c_array(&format!("max_families_{n}"), &fs);
        c += &c_array(&format!("max_members_{n}"), &ms);
        let len = |a: &str| format!("sizeof({a}_{n}) / sizeof({a}_{n}[0])");
        let _ = write!(
            main,
            "\tfor (a = 0; a < {}; a++)\n\t\tfor (b = 0; b < {}; b++)\n\
             \t\t\tfor (x = 0; x < {}; x++)\n\t\t\t\tfor (y = 0; y < {}; y++)\n\
             \t\t\t\t\tfor (z = 0; z < {}; z++)\n\
             \t\t\t\t\t\tone(page_size_{n}[a], nr_cpus_{n}[b], max_instances_{n}[x],\n\
             \t\t\t\t\t\t    damon_capacity_{n}[y], max_families_{n}[z], max_members_{n}[z]);\n",
            len("page_size"),
            len("nr_cpus"),
            len("max_instances"),
            len("damon_capacity"),
            len("max_families"),
        );
    }
    main += "\treturn 0;\n}\n";
    c += "\n";
    c += &main;
    let text = run_c("geometry", &c);

    let mut lines = text.lines();
    let mut diffs = Vec::new();
    let (mut total, mut accepted, mut with_families) = (0usize, 0usize, 0usize);
    for g in grids.iter().flat_map(Grid::geometries) {
        total += 1;
        let at = format!(
            "geometry page_size={} nr_cpus={} max_instances={} damon_capacity={} \
             max_families={} max_members={}",
            g.page_size,
            g.nr_cpus,
            g.max_instances,
            g.damon_capacity,
            g.max_families,
            g.max_members
        );
        let Some(line) = lines.next() else {
            diffs.push(format!("{at}: the C program printed nothing for it"));
            break;
        };
        let tok: Vec<&str> = line.split(' ').collect();
        let inputs = format!(
            "{} {} {} {} {} {}",
            g.page_size,
            g.nr_cpus,
            g.max_instances,
            g.damon_capacity,
            g.max_families,
            g.max_members
        );
        if tok.len() < 7 || tok[..6].join(" ") != inputs {
            diffs.push(format!("{at}: the C program is out of step: {line}"));
            break;
        }
        let rust = geometry_values(&g);
        let c_code = tok[6];
        let rust_code = rust.as_ref().map_or_else(|e| *e, |_| "ok");
        if c_code != rust_code {
            diffs.push(format!(
                "{at}: result: C {c_code}, Rust {rust_code} (Geometry::sizes)"
            ));
            continue;
        }
        let Ok(sizes) = rust else { continue };
        accepted += 1;
        let families = g.sizes().expect("accepted").families;
        let header = g.header(&ID).expect("sizes() accepted it");
        let layout = match validate_header(&header, &families, header.segment_size) {
            Ok(l) => l,
            Err(e) => {
                diffs.push(format!(
                    "{at}: Rust's validate_header refuses Geometry::header(): {e}"
                ));
                continue;
            }
        };
        if layout.families.is_some() != g.has_families() {
            diffs.push(format!(
                "{at}: Rust's validated layout has family tables: {}, the geometry: {}",
                layout.families.is_some(),
                g.has_families()
            ));
            continue;
        }
        with_families += usize::from(g.has_families());
        let expected: Vec<(String, u64)> = sizes
            .into_iter()
            .map(|(n, v)| (format!("perfabi_geometry_init: {n}"), v))
            .chain(
                header_values(&header)
                    .into_iter()
                    .map(|(n, _, v)| (format!("perfabi_header_init: {n}"), v)),
            )
            .chain(
                family_header_values(&families)
                    .into_iter()
                    .map(|(n, _, v)| (format!("perfabi_family_header_init: {n}"), v)),
            )
            .chain(
                address_values(&layout, &g)
                    .into_iter()
                    .map(|(n, v)| (format!("perfabi_{n}"), v)),
            )
            .collect();
        let values = &tok[7..];
        if values.len() != expected.len() {
            diffs.push(format!(
                "{at}: C printed {} values, Rust has {}: {line}",
                values.len(),
                expected.len()
            ));
            continue;
        }
        for ((name, want), got) in expected.iter().zip(values) {
            if *got != want.to_string() {
                diffs.push(format!("{at}: {name}: C {got}, Rust {want}"));
            }
        }
    }
    if lines.next().is_some() {
        diffs.push("the C program printed more geometries than Rust has".into());
    }
    assert_no_differences("geometry", &diffs);
    println!(
        "C geometry test: {total} geometries ({accepted} accepted, {with_families} of them with \
         family tables; {} refused with the same error); for each accepted one {} geometry \
         values, {} header fields, {} family header fields and {} addresses ({} more with \
         family tables) equal Rust's",
        total - accepted,
        geometry_names.len(),
        header_names.len(),
        family_header_names.len(),
        corners(&probe).len() * 4,
        family_corners(&probe).len() * 2,
    );
}
