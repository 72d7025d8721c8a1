//! The axes of the DAMON views drawn as text: which rows or columns carry
//! a tick, and the time axis under a heatmap or a chart (seconds since the
//! window's start, at a few columns, and the end of the range).

/// The positions of `0..n` that carry a tick: every `every`-th from 0, and
/// the last, with the tick before it dropped if it would sit within half
/// a step of it (0 is always kept).
pub fn ticks(n: usize, every: usize) -> Vec<bool> {
    let every = every.max(1);
    let mut t: Vec<bool> = (0..n).map(|i| i % every == 0).collect();
    if let Some(last) = n.checked_sub(1) {
        let near = last.saturating_sub(every.div_ceil(2));
        for tick in t.iter_mut().take(last).skip(near.max(1)) {
            *tick = false;
        }
        t[last] = true;
    }
    t
}

/// `ns` as seconds with `decimals` decimals: `1.25 s`.
pub fn seconds(ns: u64, decimals: usize) -> String {
    format!("{:.decimals$} s", ns as f64 / 1e9)
}

/// The decimals that tell apart times `step_ns` apart: the fewest that
/// show half a step.
fn decimals(step_ns: u64) -> usize {
    let step = (step_ns.max(1) as f64) / 1e9;
    (2.0 / step).log10().ceil().clamp(0.0, 9.0) as usize
}

/// The time at the left edge of column `c` of `cols` over `start..end`.
fn edge(start: u64, end: u64, cols: usize, c: usize) -> u64 {
    start + (u128::from(end - start) * c as u128 / cols.max(1) as u128) as u64
}

/// The axis under `cols` columns of times `start..end` (ns since the
/// window's start), each line `indent` columns in: a rule (`└` at the
/// indent, `┬` under the columns whose start time is labelled, `┘` under
/// the last) and the labels, each starting under its tick, the end time
/// ending under the last column.
pub fn time_axis(start: u64, end: u64, cols: usize, indent: usize) -> (String, String) {
    let cols = cols.max(1);
    let end = end.max(start);
    // The narrowest spacing whose labels fit with a space between them.
    let mut every = 6;
    let (labels, ticked) = loop {
        let d = decimals(edge(start, end, cols, every) - start);
        let ticked = ticks(cols, every);
        let labels: Vec<(usize, String)> = (0..cols)
            .filter(|&c| ticked[c] && c + 1 < cols)
            .map(|c| (c, seconds(edge(start, end, cols, c), d)))
            .chain([(cols, seconds(end, d))])
            .collect();
        let widest = labels.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        if widest + 3 <= every || every >= cols {
            break (labels, ticked);
        }
        every += 2;
    };
    let mut rule = format!("{}└", " ".repeat(indent));
    for c in 0..cols {
        rule.push(match (c + 1 == cols, ticked[c]) {
            (true, _) => '┘',
            (false, true) => '┬',
            (false, false) => '─',
        });
    }
    // Labels left to right; the end's, right-aligned, wins over one it
    // would touch.
    let mut placed: Vec<(usize, String)> = Vec::new();
    for (c, l) in labels {
        let at = if c == cols {
            (cols + 1).saturating_sub(l.chars().count())
        } else {
            c + 1
        };
        while placed
            .last()
            .is_some_and(|(p, pl)| p + pl.chars().count() >= at)
        {
            if c != cols {
                break;
            }
            placed.pop();
        }
        if placed
            .last()
            .is_none_or(|(p, pl)| p + pl.chars().count() < at)
        {
            placed.push((at, l));
        }
    }
    let mut text = " ".repeat(indent);
    let mut col = 0;
    for (at, l) in placed {
        text.push_str(&" ".repeat(at - col));
        col = at + l.chars().count();
        text.push_str(&l);
    }
    (rule, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_every_step_and_the_last() {
        let on = |t: Vec<bool>| -> Vec<usize> { (0..t.len()).filter(|&i| t[i]).collect() };
        assert_eq!(on(ticks(10, 4)), [0, 4, 9]);
        assert_eq!(on(ticks(9, 4)), [0, 4, 8]);
        assert_eq!(on(ticks(10, 3)), [0, 3, 6, 9]);
        assert_eq!(on(ticks(11, 3)), [0, 3, 6, 10]);
        assert_eq!(on(ticks(1, 4)), [0]);
        assert_eq!(on(ticks(2, 4)), [0, 1]);
        assert!(ticks(0, 4).is_empty());
    }

    #[test]
    fn the_time_axis_labels_the_start_and_end_under_their_columns() {
        let (rule, labels) = time_axis(0, 2_000_000_000, 40, 3);
        assert_eq!(rule.chars().count(), 3 + 1 + 40);
        assert!(rule.starts_with("   └┬"));
        assert!(rule.ends_with('┘'));
        assert!(labels.starts_with("    0.0 s"), "{labels:?}");
        assert!(labels.ends_with("2.0 s"), "{labels:?}");
        assert_eq!(labels.chars().count(), 3 + 1 + 40);
        // Every label starts under a tick.
        let r: Vec<char> = rule.chars().collect();
        let l: Vec<char> = labels.chars().collect();
        for i in 1..l.len() {
            if l[i].is_ascii_digit() && l[i - 1] == ' ' && i + 5 < l.len() {
                assert_eq!(r[i], '┬', "{rule}\n{labels}");
            }
        }
        // A range that starts later: its own start, more decimals when
        // ticks are closer.
        let (_, labels) = time_axis(500_000_000, 600_000_000, 72, 0);
        assert!(labels.starts_with(" 0.500 s"), "{labels:?}");
        assert!(labels.ends_with("0.600 s"), "{labels:?}");
        // Too narrow for more than the start and the end.
        let (rule, labels) = time_axis(0, 1_000_000_000, 3, 0);
        assert_eq!(rule, "└┬─┘");
        assert_eq!(labels, " 1 s");
    }
}
