//! The shared library's soname: C programs link against `libperfabi.so`
//! (the Makefile installs it as `libperfabi.so.0` with that symlink) and
//! load `libperfabi.so.0` at run time, whatever the file Cargo wrote is
//! called (`libperfabi_c.so`).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libperfabi.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
