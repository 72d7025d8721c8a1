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
