//! `spec/perfabi.h` and the Rust layout describe the same bytes: a C program
//! compiled against the header prints every field's offset and size and
//! every struct's size, and they must equal Rust's.
#![cfg(not(loom))]

use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use perfabi::layout::{CpuBlockHead, DamonRecord, Header, InstanceEntry};

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
    v
}

#[test]
fn c_header_matches_rust_layout() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec");
    let dir = tempfile::tempdir().unwrap();
    let rows = rows();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"perfabi.h\"\nint main(void) {\n",
    );
    for (_, cs, f, _, _) in &rows {
        c += &format!(
            "  printf(\"{cs}.{f} %zu %zu\\n\", offsetof(struct {cs}, {f}), sizeof(((struct {cs} *)0)->{f}));\n"
        );
    }
    let structs = [
        ("perfabi_header", size_of::<Header>()),
        ("perfabi_instance", size_of::<InstanceEntry>()),
        ("perfabi_cpu_head", size_of::<CpuBlockHead>()),
        ("perfabi_damon_record", size_of::<DamonRecord>()),
    ];
    for (cs, _) in structs {
        c += &format!("  printf(\"{cs} %zu\\n\", sizeof(struct {cs}));\n");
    }
    c += "  return 0;\n}\n";
    let src = dir.path().join("layout.c");
    std::fs::write(&src, c).unwrap();
    let exe = dir.path().join("layout");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&spec)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("C compiler `{cc}` not runnable ({e}); install gcc (apt-get install gcc)")
        });
    assert!(
        out.status.success(),
        "perfabi.h does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(run.stdout).unwrap();
    let mut lines = text.lines();
    for (rs, cs, f, off, size) in &rows {
        let line = lines.next().expect("C program printed too few lines");
        assert_eq!(
            line,
            format!("{cs}.{f} {off} {size}"),
            "C vs Rust {rs}.{f} (offset size)"
        );
    }
    for (cs, size) in structs {
        assert_eq!(lines.next().unwrap(), format!("{cs} {size}"), "struct size");
    }
    println!(
        "C layout test: {} fields and 4 struct sizes of spec/perfabi.h equal the Rust layout",
        rows.len()
    );
}
