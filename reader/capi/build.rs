//! The shared library's soname: C programs link against `libperfabi.so`
//! (the Makefile installs the library as `libperfabi.so.MAJOR` with that
//! link) and load `libperfabi.so.MAJOR` at run time, whatever the file
//! Cargo wrote is called (`libperfabi_c.so`). MAJOR is the crate's major
//! version (the header's `PERFABI_CAPI_VERSION_MAJOR`).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("Cargo sets it");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libperfabi.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
