//! The README's copy-paste examples, held to what CI runs.
//!
//! A README example is a fenced code block preceded by the line
//! `<!-- example: PATH -->`, where `PATH` (relative to the repository root)
//! is a file of the repository that a test compiles or runs. [`example`]
//! returns that file's text after checking that the README shows it
//! verbatim, so the README cannot drift from what CI runs: change one and
//! the test fails until the other matches.

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `tests/harness`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The fenced block that follows `<!-- example: path -->` in `readme`, if
/// any: its lines between the fences, each with a final newline.
pub fn block_after_marker(readme: &str, path: &str) -> Option<String> {
    let marker = format!("<!-- example: {path} -->");
    let mut lines = readme.lines();
    lines.by_ref().find(|l| l.trim() == marker)?;
    let open = lines.by_ref().find(|l| !l.trim().is_empty())?;
    let fence: String = open.chars().take_while(|&c| c == '`').collect();
    if fence.len() < 3 {
        return None;
    }
    let mut body = String::new();
    for l in lines {
        if l.trim_end() == fence {
            return Some(body);
        }
        body.push_str(l);
        body.push('\n');
    }
    None
}

/// The text of the example file `path` (relative to the repository root),
/// after checking that `README.md` shows it verbatim in the block after
/// `<!-- example: path -->`. Panics (the test fails) with what differs.
pub fn example(path: &str) -> String {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let file =
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("example {path}: {e}"));
    let shown = block_after_marker(&readme, path).unwrap_or_else(|| {
        panic!("README.md has no fenced block after `<!-- example: {path} -->`")
    });
    if shown != file {
        let line = shown
            .lines()
            .zip(file.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| shown.lines().count().min(file.lines().count()));
        panic!(
            "README.md's example of {path} differs from the file (first at line {}): \
             copy the file into the README (or the README into the file)",
            line + 1
        );
    }
    file
}

#[cfg(test)]
mod tests {
    use super::block_after_marker;

    #[test]
    fn finds_the_block_after_its_marker_only() {
        let readme = "intro\n<!-- example: a.sh -->\n\n```sh\necho a\n```\n\
                      <!-- example: b.c -->\n````c\nint x;\n```\n````\n";
        assert_eq!(block_after_marker(readme, "a.sh").unwrap(), "echo a\n");
        assert_eq!(block_after_marker(readme, "b.c").unwrap(), "int x;\n```\n");
        assert_eq!(block_after_marker(readme, "c.py"), None);
        assert_eq!(
            block_after_marker("<!-- example: x -->\n```\nopen", "x"),
            None
        );
    }
}
