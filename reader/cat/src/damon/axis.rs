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

/// The decimals that show multiples of `step_ns` exactly (a step of
/// 500 ms: one).
fn decimals(step_ns: u64) -> usize {
    (0..9)
        .find(|&d| step_ns.is_multiple_of(10u64.pow(9 - d as u32)))
        .unwrap_or(9)
}

/// Round steps: 1, 2 and 5 times a power of ten, in ns, from 1 ns.
fn round_steps() -> impl Iterator<Item = u64> {
    (0..19u32).flat_map(|k| [1, 2, 5].map(|m| m * 10u64.pow(k)))
}

/// The axis under `cols` columns of times `start..end` (ns since the
/// window's start), each line `indent` columns in: a rule (`└` at the
/// indent, `┬` under the columns where round times fall (every 1, 2 or 5
/// times a power of ten seconds, as far apart as their labels need),
/// `┘` under the last column) and the labels, each starting under its
/// tick, the end time ending under the last column.
pub fn time_axis(start: u64, end: u64, cols: usize, indent: usize) -> (String, String) {
    let cols = cols.max(1);
    let span = end.saturating_sub(start).max(1);
    let per_col = span as f64 / cols as f64;
    let at = |t: u64| ((t - start) as f64 / per_col).round() as usize;
    // The shortest round step whose labels fit with spaces between.
    let fit = round_steps()
        .map(|step| (step, decimals(step)))
        .find(|&(step, d)| {
            let widest = seconds(start, d).len().max(seconds(end, d).len());
            step as f64 / per_col >= (widest + 3) as f64
        });
    let mut labels: Vec<(usize, String)> = Vec::new();
    if let Some((step, d)) = fit {
        let mut t = start.div_ceil(step).saturating_mul(step);
        while t < end && at(t) < cols {
            labels.push((at(t), seconds(t, d)));
            t = t.saturating_add(step);
        }
    }
    let d = fit.map_or(0, |(_, d)| d);
    let mut rule = format!("{}└", " ".repeat(indent));
    for c in 0..cols {
        rule.push(if c + 1 == cols {
            '┘'
        } else if labels.iter().any(|(l, _)| *l == c) {
            '┬'
        } else {
            '─'
        });
    }
    // Labels left to right, each after the one before and a space; the
    // end's, right-aligned, wins over those it would touch.
    let end_label = seconds(end, d);
    let end_at = (cols + 1).saturating_sub(end_label.chars().count());
    let mut placed: Vec<(usize, String)> = Vec::new();
    for (c, l) in labels {
        let free = placed.last().is_none_or(|(p, pl)| p + pl.len() < c + 1);
        if free && c + 1 + l.len() < end_at {
            placed.push((c + 1, l));
        }
    }
    placed.push((end_at, end_label));
    let mut text = " ".repeat(indent);
    let mut col = 0;
    for (at, l) in placed {
        text.push_str(&" ".repeat(at.saturating_sub(col)));
        col = at.max(col) + l.chars().count();
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
    fn the_time_axis_labels_round_times_under_their_columns_and_the_end() {
        let (rule, labels) = time_axis(0, 3_006_000_000, 72, 3);
        assert_eq!(rule.chars().count(), 3 + 1 + 72);
        assert!(rule.starts_with("   └┬"));
        assert!(rule.ends_with('┘'));
        assert_eq!(labels.chars().count(), 3 + 1 + 72, "{labels:?}");
        assert!(labels.starts_with("    0.0 s"), "{labels:?}");
        assert!(labels.contains(" 1.0 s "), "{labels:?}");
        assert!(labels.ends_with("3.0 s"), "{labels:?}");
        // Every label but the end's starts under a tick, at the column
        // nearest its time.
        let r: Vec<char> = rule.chars().collect();
        let l: Vec<char> = labels.chars().collect();
        let mut seen = 0;
        for i in 1..l.len() - 5 {
            if l[i].is_ascii_digit() && l[i - 1] == ' ' {
                assert_eq!(r[i], '┬', "{rule}\n{labels}");
                let t: f64 = labels[labels.char_indices().nth(i).unwrap().0..]
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let col = (i - 4) as f64;
                assert!((t / 3.006 * 72.0 - col).abs() <= 0.5, "{t} at {col}");
                seen += 1;
            }
        }
        assert!(seen >= 4, "{labels}");
        // A range that starts later: round times in it, more decimals when
        // they are closer.
        let (_, labels) = time_axis(500_000_000, 600_000_000, 72, 0);
        assert!(labels.starts_with(" 0.50 s"), "{labels:?}");
        assert!(labels.ends_with("0.60 s"), "{labels:?}");
        // Too narrow for a label but the end's.
        let (rule, labels) = time_axis(0, 1_000_000_000, 3, 0);
        assert_eq!(rule, "└┬─┘");
        assert_eq!(labels, " 1 s");
    }
}
