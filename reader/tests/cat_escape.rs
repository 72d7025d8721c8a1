//! Untrusted text never reaches a terminal raw (`spec/PERFABI.md` §11.7):
//! a path named with terminal controls in perfabi-cat's errors, `--info`
//! and `--info --json`, and a check that no log line or terminal output of
//! perfabi-cat, the reader, perfabi-exportd or pmdaperfabi prints a path
//! with `Path::display` (which prints its bytes as they are) instead of
//! `perfabi::text::escape`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use perfabi::Semantics;
use perfabi_shm::writer::{Config, Writer};

fn cat(args: &[&OsStr]) -> Output {
    Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat")
}

/// A file name that retitles a terminal (`ESC ] 0 ; pwn BEL`), clears it
/// (`ESC [ 2 J`), holds DEL, a C1 CSI (U+009B), a bidirectional override
/// and a byte that is not UTF-8.
const HOSTILE: &[u8] = b"seg\x1b]0;pwn\x07\x1b[2J\x7f\xc2\x9b\xe2\x80\xae\xff";

/// What perfabi::text::escape makes of it.
const SHOWN: &str = "seg\\u{1b}]0;pwn\\u{7}\\u{1b}[2J\\u{7f}\\u{9b}\\u{202e}\\xff";

/// Bytes a terminal would act on: C0 controls but the line feed, DEL, and
/// the C1 controls and U+202E as UTF-8.
fn controls(out: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(out);
    text.chars()
        .filter(|&c| c != '\n' && !perfabi::text::harmless(c))
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect()
}

#[test]
fn a_path_named_with_terminal_controls_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join(OsStr::from_bytes(HOSTILE));
    // No segment there: exit 3, one escaped line.
    let out = cat(&[missing.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(SHOWN), "{err:?}");
    assert!(controls(&out.stderr).is_empty(), "{err:?}");
    // Not a segment (an empty file): exit 4, one escaped line.
    std::fs::write(&missing, b"").unwrap();
    let out = cat(&[missing.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(SHOWN), "{err:?}");
    assert!(controls(&out.stderr).is_empty(), "{err:?}");
    std::fs::remove_file(&missing).unwrap();

    // A real segment at that name: --info shows the path escaped, and
    // --info --json holds it in JSON escapes that decode to the name.
    let w = Writer::create(
        &missing,
        &Config {
            max_instances: 4,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    w.add("x", "", Semantics::Counter).unwrap();
    let out = cat(&[missing.as_os_str(), OsStr::new("--info")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(SHOWN), "{text:?}");
    assert!(controls(&out.stdout).is_empty(), "{text:?}");
    let out = cat(&[
        missing.as_os_str(),
        OsStr::new("--info"),
        OsStr::new("--json"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        controls(&out.stdout).is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The path as JSON can carry it: its UTF-8, the last byte replaced.
    assert_eq!(
        doc["path"].as_str(),
        Some(missing.to_string_lossy().as_ref())
    );
    drop(w);
}

/// The sources of the programs that write log lines or a terminal: every
/// `.rs` file under these folders of the workspace.
const SOURCES: [&str; 4] = [
    "reader/src",
    "reader/cat/src",
    "exportd/src",
    "pcp-agent/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension() == Some(OsStr::new("rs")) {
            out.push(p);
        }
    }
}

/// No message, log line or terminal output prints a path with
/// `Path::display()` (its bytes as they are: a file named with ESC would
/// reach the terminal), nor with `to_string_lossy` (the same, less the
/// bytes that are not UTF-8): each goes through `perfabi::text::escape`.
/// A use that builds a path rather than a message says `// not raw` and why on
/// its line or the line before. Test modules and comments are not looked
/// at.
#[test]
fn no_source_prints_a_path_unescaped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for d in SOURCES {
        rust_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 50, "{} files under {SOURCES:?}", files.len());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]")
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("mod tests"))
            {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            let exempt = line.contains("// not raw")
                || i > 0 && lines[i - 1].trim_start().starts_with("// not raw");
            if (code.contains(".display()") || code.contains("to_string_lossy")) && !exempt {
                found.push(format!(
                    "{}:{}: {}",
                    f.strip_prefix(&root).unwrap_or(f).display(),
                    i + 1,
                    code
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "paths printed without perfabi::text::escape:\n{}",
        found.join("\n")
    );
}
