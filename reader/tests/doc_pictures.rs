//! The README's pictures of perfabi-cat are the program's own output, not
//! drawings: `reader/cat/doc/regenerate` is run into a fresh folder, the
//! DAMON pictures it makes of the shipped record (a function of the record
//! alone) must equal the committed ones byte for byte, the live view it
//! captures from a tmux pane must have a live view's shape (its numbers are
//! this machine's), and the README must show the committed text captures
//! verbatim and embed the images.

use std::path::Path;
use std::process::Command;

use perfabi_test_harness::readme::{example, repo_root};
use perfabi_test_harness::workspace::target_dir;

const TEST: &str = "doc_pictures";

#[test]
fn the_readme_pictures_are_what_regenerate_makes_now() {
    if !perfabi_test_harness::tmux::have_tmux(TEST) {
        return;
    }
    let root = repo_root();
    let doc = root.join("reader/cat/doc");
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(doc.join("regenerate"))
        .arg(out.path())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run reader/cat/doc/regenerate");
    assert!(
        run.status.success(),
        "regenerate failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );

    // The DAMON pictures: exactly the committed ones.
    for name in ["heatmap.txt", "heatmap.svg", "wss.svg"] {
        let made = std::fs::read(out.path().join(name)).unwrap();
        let committed = std::fs::read(doc.join(name)).unwrap();
        assert!(
            made == committed,
            "reader/cat/doc/{name} is not what perfabi-cat makes of the shipped record now: \
             run reader/cat/doc/regenerate and commit the result"
        );
    }

    // The live view: its shape, fresh and committed alike.
    for dir in [out.path(), doc.as_path()] {
        check_live_view(&dir.join("live-view.txt"));
    }

    // The documentation shows the text captures verbatim and embeds the
    // images: the README its picture, perfabi-cat's page both.
    example("reader/cat/doc/live-view.txt");
    example("reader/cat/doc/heatmap.txt");
    let embeds = |page: &str, image: &str| {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let from = if page.starts_with("docs/") { "../" } else { "" };
        assert!(
            text.contains(&format!("]({from}{image})")),
            "{page} does not embed {image}"
        );
    };
    embeds("README.md", "reader/cat/doc/heatmap.svg");
    for image in ["reader/cat/doc/heatmap.svg", "reader/cat/doc/wss.svg"] {
        embeds("docs/reading.md", image);
    }
}

/// A capture of the live view in a 100×24 pane: 24 rows at most 100
/// columns wide, the status line with a live writer, the table's header,
/// rows of rates and the keys in the footer.
fn check_live_view(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    let shown = || format!("{}:\n{text}", path.display());
    assert_eq!(rows.len(), 24, "{}", shown());
    assert!(rows.iter().all(|r| r.chars().count() <= 100), "{}", shown());
    assert!(
        rows[0].trim_start().starts_with("perfabi.seg") && rows[0].contains("writer alive"),
        "{}",
        shown()
    );
    let head: Vec<&str> = rows[1].split_whitespace().collect();
    assert_eq!(head, ["NAME", "KIND", "VALUE"], "{}", shown());
    assert!(
        rows[2..23]
            .iter()
            .filter(|r| r.ends_with("/s") || r.ends_with('%') || r.ends_with("CPU"))
            .count()
            >= 10,
        "{}",
        shown()
    );
    assert!(rows[23].trim_start().starts_with("q quit"), "{}", shown());
}
