//! The documentation's copy-paste examples, held to what CI runs.
//!
//! The documentation is `README.md` and the pages of `docs/`
//! ([`documents`]). An example is a fenced code block preceded by the line
//! `<!-- example: PATH -->`, where `PATH` (relative to the repository root)
//! is a file of the repository that a test compiles or runs. [`example`]
//! returns that file's text after checking that a document shows it
//! verbatim, so the documentation cannot drift from what CI runs: change
//! one and the test fails until the other matches.

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

/// The documentation: `README.md` first, then every `docs/*.md` in name
/// order, each as (its path relative to the repository root, its text).
pub fn documents() -> Vec<(String, String)> {
    let root = repo_root();
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("a docs/ entry").file_name())
        .filter_map(|n| n.to_str().map(str::to_string))
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    std::iter::once("README.md".to_string())
        .chain(pages)
        .map(|p| {
            let text =
                std::fs::read_to_string(root.join(&p)).unwrap_or_else(|e| panic!("read {p}: {e}"));
            (p, text)
        })
        .collect()
}

/// The document (path and text) that holds `<!-- example: path -->`.
/// Panics (the test fails) if none does.
pub fn document_showing(path: &str) -> (String, String) {
    let marker = format!("<!-- example: {path} -->");
    documents()
        .into_iter()
        .find(|(_, text)| text.lines().any(|l| l.trim() == marker))
        .unwrap_or_else(|| panic!("no document (README.md, docs/*.md) has `{marker}`"))
}

/// The text of the example file `path` (relative to the repository root),
/// after checking that the document holding `<!-- example: path -->`
/// ([`document_showing`]) shows it verbatim in the block after the marker.
/// Panics (the test fails) with what differs.
pub fn example(path: &str) -> String {
    let root = repo_root();
    let (doc, text) = document_showing(path);
    let file =
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("example {path}: {e}"));
    let shown = block_after_marker(&text, path)
        .unwrap_or_else(|| panic!("{doc} has no fenced block after `<!-- example: {path} -->`"));
    if shown != file {
        panic!(
            "{doc}'s example of {path} differs from the file (first at line {}): \
             copy the file into {doc} (or {doc} into the file)",
            first_difference(&shown, &file)
        );
    }
    file
}

/// A heading's anchor as GitHub makes it: lower case, the characters
/// other than letters, digits, `-`, `_` and spaces dropped, spaces made
/// `-`.
pub fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of `text` outside its fenced blocks (a block closes at a
/// line equal to its opening run of backticks).
fn outside_fences(text: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<String> = None;
    text.lines().filter(move |l| {
        let t = l.trim();
        if t.starts_with("```") {
            match &fence {
                None => fence = Some(t.chars().take_while(|&c| c == '`').collect()),
                Some(open) if t == open => fence = None,
                Some(_) => {}
            }
            return false;
        }
        fence.is_none()
    })
}

/// The anchors of `text`'s headings (outside fenced blocks), with GitHub's
/// `-1`, `-2` … for a repeated one.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for l in outside_fences(text) {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && l[hashes..].starts_with(' ') {
            let base = anchor(l[hashes..].trim());
            let n = seen
                .iter()
                .filter(|a| {
                    **a == base
                        || a.strip_prefix(&format!("{base}-"))
                            .is_some_and(|r| r.parse::<u32>().is_ok())
                })
                .count();
            seen.push(if n == 0 { base } else { format!("{base}-{n}") });
        }
    }
    seen
}

/// The relative links of `text` (`[label](target)` outside fenced blocks,
/// images included), without `http:`, `https:` or `mailto:` ones.
pub fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    for l in outside_fences(text) {
        let mut rest = l;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = &after[..end];
            if !target.contains(':') && !target.contains(' ') {
                links.push(target.to_string());
            }
            rest = &after[end..];
        }
    }
    links
}

/// The first line (from 1) where texts `a` and `b` differ, for a test that
/// says where a checked-in file and what it should be part; one past the
/// shorter text's last line when one text only extends the other.
pub fn first_difference(a: &str, b: &str) -> usize {
    a.lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.lines().count().min(b.lines().count()))
        + 1
}

#[cfg(test)]
mod tests {
    use super::{anchors, block_after_marker, documents, relative_links, repo_root};

    /// Every relative link of README.md and docs/*.md names a file or
    /// folder of the repository, and every `#anchor` one of that document's
    /// headings: the split into docs/ left no link behind.
    #[test]
    fn every_link_of_the_documentation_resolves() {
        let root = repo_root();
        let docs = documents();
        let mut broken = Vec::new();
        for (doc, text) in &docs {
            let dir = std::path::Path::new(doc).parent().unwrap().to_path_buf();
            for link in relative_links(text) {
                let (path, frag) = link.split_once('#').unwrap_or((&link, ""));
                let target = if path.is_empty() {
                    doc.clone()
                } else {
                    let joined = root.join(&dir).join(path);
                    match joined.canonicalize() {
                        Ok(p) => p
                            .strip_prefix(&root)
                            .map(|p| p.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        Err(_) => {
                            broken.push(format!("{doc}: {link}: no such file"));
                            continue;
                        }
                    }
                };
                if frag.is_empty() {
                    continue;
                }
                let Some((_, t)) = docs.iter().find(|(d, _)| *d == target) else {
                    broken.push(format!(
                        "{doc}: {link}: an anchor into a file that is not a document"
                    ));
                    continue;
                };
                if !anchors(t).iter().any(|a| a == frag) {
                    broken.push(format!("{doc}: {link}: no heading #{frag} in {target}"));
                }
            }
        }
        assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    }

    #[test]
    fn anchors_are_githubs() {
        let text = "# A b\n```sh\n# not a heading\n```\n## Install: the `x` (y)\n## A b\n";
        assert_eq!(anchors(text), ["a-b", "install-the-x-y", "a-b-1"]);
    }

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
