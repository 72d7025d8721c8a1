//! Parsers of the `/proc` text the exporter publishes: per-CPU times of
//! `/proc/stat`, `/proc/softirqs` and `/proc/vmstat`.

use std::collections::BTreeMap;

/// The per-CPU time fields of `/proc/stat`, in its order.
pub const CPU_FIELDS: [&str; 10] = [
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
];

/// Per-CPU times of `/proc/stat`: `times[cpu][field]` in clock ticks
/// (`USER_HZ`); CPUs missing from the text (offline) are absent.
pub fn stat_times(text: &str) -> BTreeMap<usize, [u64; 10]> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        // Per-CPU lines only: "cpuN ..."; the aggregate line is "cpu  ...".
        let Some(rest) = line
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let Some(cpu) = fields.next().and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        let mut v = [0u64; 10];
        for (slot, f) in v.iter_mut().zip(fields) {
            *slot = f.parse().unwrap_or(0);
        }
        out.insert(cpu, v);
    }
    out
}

/// Per-CPU softirq counts of `/proc/softirqs`: name (lower case) to
/// `counts[cpu]`.
pub fn softirqs(text: &str) -> BTreeMap<String, BTreeMap<usize, u64>> {
    let mut lines = text.lines();
    let cpus: Vec<usize> = lines
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .filter_map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((name, counts)) = line.split_once(':') else {
            continue;
        };
        let per: BTreeMap<usize, u64> = cpus
            .iter()
            .zip(counts.split_ascii_whitespace())
            .map(|(&c, v)| (c, v.parse().unwrap_or(0)))
            .collect();
        out.insert(name.trim().to_ascii_lowercase(), per);
    }
    out
}

/// `/proc/vmstat`: name to value.
pub fn vmstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_files() {
        let stat = "cpu  10 0 5 100 1 0 2 0 0 0\ncpu0 4 0 2 50 1 0 1 0 0 0\ncpu1 6 0 3 50 0 0 1 0 0 0\nintr 99\n";
        let t = stat_times(stat);
        assert_eq!(t.len(), 2);
        assert_eq!(t[&1][0], 6);
        assert_eq!(t[&0][3], 50);
        let sirq = "                    CPU0       CPU1\n          HI:          1          2\n      NET_RX:         30         40\n";
        let s = softirqs(sirq);
        assert_eq!(s["net_rx"][&1], 40);
        assert_eq!(s["hi"][&0], 1);
        let v = vmstat("nr_free_pages 1234\npgfault 99\n");
        assert_eq!(v["pgfault"], 99);
    }
}
