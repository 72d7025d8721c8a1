//! `include/perfabi.h` is what cbindgen makes of this crate: regenerated
//! in memory and compared with the checked-in file, which is written
//! instead when `PERFABI_REGENERATE_HEADER` is set
//! (`reader/capi/regenerate-header`).

use std::path::Path;

#[test]
fn checked_in_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("include/perfabi.h");
    if std::env::var_os("PERFABI_REGENERATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write include/perfabi.h");
        println!("wrote {}", path.display());
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        panic!(
            "reader/capi/include/perfabi.h is stale (first difference at line {}): \
             run reader/capi/regenerate-header and commit the header",
            perfabi_test_harness::readme::first_difference(&checked_in, &generated)
        );
    }
}

/// Each function's `Context:` line in the header agrees with what it
/// takes: a segment, a counter or a family handle is used by the thread
/// using the segment (perfabi_read() and
/// perfabi_family_read() change the handle, so even a `const` one read on
/// another thread meanwhile is a data race); a family may be a handle's
/// (perfabi_family_handle_info(), replaced by its next read), so its
/// accessors must say so. perfabi_counter_kind() and
/// perfabi_counter_value_type() said "any thread".
#[test]
fn context_lines_say_which_thread_may_use_a_handle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/perfabi.h")).unwrap();
    let (mut checked, mut wrong) = (0, Vec::new());
    for block in header.split("/**").skip(1) {
        let Some((doc, decl)) = block.split_once("*/") else {
            continue;
        };
        let Some((name, params)) = decl.split_once('(') else {
            continue; // not a function
        };
        let name = name
            .split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches('*');
        let params = params.split(')').next().unwrap();
        let context = doc
            .lines()
            .map(|l| l.trim_start_matches([' ', '*']))
            .skip_while(|l| !l.starts_with("Context:"))
            .take_while(|l| !l.is_empty() && !l.starts_with("Return:"))
            .collect::<Vec<_>>()
            .join(" ");
        let takes = |ty: &str| {
            params.contains(&format!("struct {ty} *"))
                && !params.contains(&format!("struct {ty} **"))
        };
        if [
            "perfabi_segment",
            "perfabi_counter",
            "perfabi_family_handle",
            "perfabi_directory",
        ]
        .iter()
        .any(|ty| takes(ty))
        {
            checked += 1;
            if !context.starts_with("Context: the thread using") {
                wrong.push(format!("{name}: {context}"));
            }
        }
        // A snapshot's (a directory read's) accessors find `f` among its
        // families by address
        // before reading it: any thread.
        if takes("perfabi_family_info") && !takes("perfabi_snapshot") && !takes("perfabi_scrape") {
            checked += 1;
            if !(context.contains("perfabi_family_handle_info()")
                && context.contains("the thread using"))
            {
                wrong.push(format!("{name}: {context}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked > 30, "{checked} functions checked");
}
