//! The working set size drawn as text: the percentiles and the mean as a
//! table (as damo's `report wss` prints them), and the size over time as
//! a bar chart of block characters, eighths of a line high, on the time
//! axis of the heatmap.

use std::fmt::Write as _;

use super::axis;
use crate::human;

/// Blocks from empty to full, by eighths.
const BLOCKS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The table of `percentiles` (`(p, bytes)`) and `mean`, a line each.
pub fn table(percentiles: &[(u32, u64)], mean: Option<f64>) -> String {
    let mut out = String::from("percentile  working set\n");
    for &(p, v) in percentiles {
        let _ = writeln!(out, "{p:>10}  {:>11}", human::bytes(v as f64));
    }
    if let Some(m) = mean {
        let _ = writeln!(out, "{:>10}  {:>11}", "mean", human::bytes(m));
    }
    out
}

/// The size each of `cols` columns over `time` (ns, half-open) shows: the
/// latest point of `series` before the column's end (a working set size
/// holds until the next aggregation), `None` before the first.
fn columns(series: &[(u64, u64)], time: (u64, u64), cols: usize) -> Vec<Option<u64>> {
    let span = u128::from(time.1.saturating_sub(time.0));
    (1..=cols)
        .map(|c| {
            let end = time.0 + (span * c as u128 / cols as u128) as u64;
            let k = series.partition_point(|&(t, _)| t < end);
            k.checked_sub(1).map(|k| series[k].1)
        })
        .collect()
}

/// The chart of `series` (`(t_ns, bytes)` in time order) over `time`,
/// `rows` lines high and `cols` columns wide (each at least 1), sizes
/// labelled on the left, times under it; every line ends with a newline.
pub fn chart(series: &[(u64, u64)], time: (u64, u64), rows: usize, cols: usize) -> String {
    let (rows, cols) = (rows.max(1), cols.max(1));
    let values = columns(series, time, cols);
    let top = values.iter().flatten().copied().max().unwrap_or(0);
    // The size at the top of line `i` (0 the top line).
    let at = |i: usize| (u128::from(top) * (rows - i) as u128 / rows as u128) as f64;
    let labels: Vec<Option<String>> = (0..rows)
        .map(|i| (i == 0 || i == rows / 2).then(|| human::bytes(at(i))))
        .collect();
    let zero = human::bytes(0.0);
    let width = labels
        .iter()
        .flatten()
        .chain([&zero])
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (i, label) in labels.iter().enumerate() {
        let line: String = values
            .iter()
            .map(|v| {
                let eighths = match (v, top) {
                    (Some(v), 1..) => (u128::from(*v) * rows as u128 * 8)
                        .div_ceil(u128::from(top))
                        .min(rows as u128 * 8) as usize,
                    _ => 0,
                };
                let base = (rows - 1 - i) * 8;
                BLOCKS[eighths.saturating_sub(base).min(8)]
            })
            .collect();
        let (label, mark) = match label {
            Some(l) => (l.as_str(), '┤'),
            None => ("", '│'),
        };
        let _ = writeln!(out, "{label:>width$} {mark}{line}");
    }
    let (rule, times) = axis::time_axis(time.0, time.1, cols, width + 1);
    let _ = writeln!(out, "{zero:>width$} {}", rule.trim_start());
    let _ = writeln!(out, "{times}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_percentiles_then_the_mean() {
        let t = table(
            &[(0, 1 << 20), (100, 4 << 20)],
            Some(2.5 * (1 << 20) as f64),
        );
        assert_eq!(
            t,
            "percentile  working set\n         0      1.0 MiB\n       100      4.0 MiB\n      mean      2.5 MiB\n"
        );
    }

    #[test]
    fn bars_hold_each_size_until_the_next_aggregation() {
        // 1, 2, 4 MiB at 0, 1, 2 s over 0..4 s, 8 columns of half a
        // second, 2 lines high.
        let s = [
            (0, 1 << 20),
            (1_000_000_000, 2 << 20),
            (2_000_000_000, 4 << 20),
        ];
        let text = chart(&s, (0, 4_000_000_000), 2, 8);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let bars = |l: &str| -> String { l.split_once(['┤', '│']).unwrap().1.to_string() };
        // Top line: the upper half, 4 MiB full from 2 s on.
        assert_eq!(bars(lines[0]), "    ████");
        // Bottom line: 1 MiB is a half line (▄), 2 MiB a full one.
        assert_eq!(bars(lines[1]), "▄▄██████");
        assert!(lines[0].starts_with("4.0 MiB ┤"), "{text}");
        assert!(lines[1].starts_with("2.0 MiB ┤"), "{text}");
        assert!(lines[2].trim_start().starts_with("0 B └┬"), "{text}");
        assert_eq!(lines[3].trim(), "0 s  4 s");
        // Before the first point: nothing.
        let text = chart(&s[1..], (0, 4_000_000_000), 1, 8);
        assert_eq!(text.lines().next(), Some("4.0 MiB ┤  ▄▄████"));
    }
}
