//! Writes the segment-directory vectors `spec/vectors/dir_*/` and their
//! `merged.expect` (`spec/PERFABI.md` §15.6).
//!
//! `cargo run -p perfabi-reader --example make_dir_vectors [OUT_DIR]`
//! (default: `spec/vectors` of this repository, whose segment vectors the
//! directories are made of). `tests/spec_oracle_directory.rs` checks that
//! the committed files equal what this produces.

#[path = "../tests/support/dir_vectors.rs"]
mod dir_vectors;

fn main() {
    let vectors = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors");
    let out = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| vectors.clone());
    for (name, files) in dir_vectors::ALL {
        dir_vectors::make(&vectors, &out, name, files);
        let merged = dir_vectors::describe(&dir_vectors::read(&out.join(name)));
        std::fs::write(out.join(format!("{name}.expect")), &merged).unwrap();
        println!("{name}: {} files", files.len());
    }
}
