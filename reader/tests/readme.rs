//! The README's writer example, exactly as the README shows it, keeps its
//! writer alive under a reader with no help from the application: the
//! writer's own thread sends the heartbeat it promises.

use std::time::{Duration, Instant};

use perfabi_reader::{Liveness, Segment};

/// The writer example of the README's "Using the writer", between the
/// markers (a test below checks that it is the README's text, verbatim).
#[rustfmt::skip]
fn writer_example() -> Result<perfabi_shm::writer::Writer, Box<dyn std::error::Error>> {
    // README BEGIN
    use perfabi_shm::writer::{Config, Writer};
    use perfabi::Semantics;

    let w = Writer::create("/dev/shm/myapp.perfabi", &Config::default())?;
    let rx = w.add("net.rx_bytes", "bytes", Semantics::Counter)?;
    w.adjust(rx, 1500)?;                        // a few ns, from any thread, never blocks
    let s = w.snapshot()?;                      // what any reader sees
    println!("{}", s.total(s.find("net.rx_bytes").unwrap()));
    // README END
    Ok(w)
}

/// The code block after `heading` in the README.
fn readme_block(heading: &str) -> String {
    let readme = include_str!("../../docs/writing.md");
    let after = &readme[readme.find(heading).expect("heading in docs/writing.md")..];
    let start = after.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let len = after[start..].find("```").unwrap();
    after[start..start + len].to_string()
}

#[test]
fn the_test_holds_the_readme_writer_example_verbatim() {
    let me = include_str!("readme.rs");
    let start = me.find("    // README BEGIN\n").unwrap() + "    // README BEGIN\n".len();
    let end = me.find("    // README END\n").unwrap();
    let copy: String = me[start..end]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(copy, readme_block("## Using the writer"));
}

#[test]
fn the_readme_writer_example_stays_alive_for_10_s_under_a_reader() {
    let w = writer_example().unwrap();
    let mut seg = Segment::open("/dev/shm/myapp.perfabi").unwrap();
    let start = Instant::now();
    let mut checks = 0;
    while start.elapsed() < Duration::from_secs(10) {
        let info = seg.info().unwrap();
        assert_eq!(
            info.liveness,
            Liveness::Alive,
            "after {:?}",
            start.elapsed()
        );
        assert_eq!(seg.counter("net.rx_bytes").unwrap().total, 1500);
        checks += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    println!("the README writer was alive at {checks} checks over 10 s");
    drop(w);
    assert_eq!(seg.info().unwrap().liveness, Liveness::Closed);
    let _ = std::fs::remove_file("/dev/shm/myapp.perfabi");
}

/// The README's reader example (`reader/examples/read_counters.rs`, shown
/// verbatim in "Reading a segment") run on a live `perfabi-exportd`: it
/// lists the families and prints a rate of context switches that moves.
#[test]
fn the_readme_reader_example_reads_a_live_exporter() {
    use perfabi_test_harness::{readme, workspace, KillOnDrop};
    use std::process::{Command, Stdio};
    readme::example("reader/examples/read_counters.rs");
    let profile = workspace::profile_dir();
    let exportd = workspace::workspace_bin(&profile, "perfabi-exportd", "perfabi-exportd");
    let example = profile.join("examples/read_counters");
    assert!(
        example.exists(),
        "{} (cargo test builds examples)",
        example.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("perfabi.seg");
    let _w = KillOnDrop(
        Command::new(exportd)
            .arg("--path")
            .arg(&seg)
            .args(["--interval", "0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let end = Instant::now() + Duration::from_secs(10);
    while Segment::open(&seg)
        .and_then(|mut s| s.family("kernel.all.pswitch"))
        .is_err()
    {
        assert!(
            Instant::now() < end,
            "perfabi-exportd published no kernel.all.pswitch"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new(&example).arg(&seg).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("READER-EXAMPLE {}", text.replace('\n', " | "));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("kernel.all.pswitch (counter, ")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("mem.physmem (")),
        "{text}"
    );
    let rates: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("kernel.all.pswitch: ")?
                .strip_suffix("/s")?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(rates.len(), 2, "{text}");
    assert!(
        rates.iter().all(|&r| r > 0.0),
        "context switches stood still: {text}"
    );
}
