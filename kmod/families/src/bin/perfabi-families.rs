//! `perfabi-families`: writes or checks the C header generated from the
//! families' definition (`kmod/include/perfabi_families.h`).
//!
//! ```text
//! perfabi-families --check    exit 0 if the header is current, else 1
//! perfabi-families --write    regenerate it
//! ```
//!
//! Exit codes: 0 done (or current), 1 not current, 2 a usage error or a
//! file that cannot be read or written.

use std::path::PathBuf;
use std::process::ExitCode;

use perfabi_families::c_header;

/// The header's path in this source tree.
fn path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../include/perfabi_families.h"
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let write = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--check"] => false,
        ["--write"] => true,
        _ => {
            eprintln!("usage: perfabi-families --check | --write");
            return ExitCode::from(2);
        }
    };
    let text = match c_header::header() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("perfabi-families: the table cannot be written as C: {e}");
            return ExitCode::from(2);
        }
    };
    let path = path();
    if write {
        return match std::fs::write(&path, &text) {
            Ok(()) => {
                println!("wrote {}", c_header::PATH);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("perfabi-families: cannot write {}: {e}", path.display());
                ExitCode::from(2)
            }
        };
    }
    match std::fs::read_to_string(&path) {
        Ok(t) if t == text => {
            println!(
                "FAMILIES-HEADER PASS: {} is current ({} families)",
                c_header::PATH,
                perfabi_families::FAMILIES.len()
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!(
                "FAMILIES-HEADER FAIL: {} is not current: run `cargo run -p perfabi-families -- --write`",
                c_header::PATH
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("perfabi-families: cannot read {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}
