//! Writes `spec/vectors/*.bin` and their `.expect` files.
//!
//! `cargo run -p perfabi --example make_vectors [OUT_DIR]` (default:
//! `spec/vectors` of this repository). `tests/vectors.rs` checks that the
//! committed files equal what this produces and decode as expected.

#[path = "../tests/support/vectors.rs"]
mod vectors;

fn main() -> std::io::Result<()> {
    let out = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
        });
    std::fs::create_dir_all(&out)?;
    for (name, bytes) in vectors::all() {
        std::fs::write(out.join(format!("{name}.bin")), &bytes)?;
        std::fs::write(
            out.join(format!("{name}.expect")),
            vectors::describe(&bytes),
        )?;
        println!("{name}: {} bytes", bytes.len());
    }
    Ok(())
}
