//! The heatmap drawn as text for a terminal: one line per address row,
//! HIGH addresses at the top (as an image's y axis), one character per
//! time column, the oldest on the left.
//!
//! Cells are coloured blanks (viridis backgrounds, see [`palette`]) with
//! colour, or characters of [`palette::RAMP`] without; a cell nothing
//! monitored covers is [`palette::UNMONITORED`] in both. Both draw the
//! same lines of the same widths: the left axis (hexadecimal addresses,
//! the start of the row, at a few rows; the caption `address`), the time
//! axis under the cells (see [`axis::time_axis`]) and a legend of the
//! scale.

use std::fmt::Write as _;

use crossterm::style::{Color, ResetColor, SetBackgroundColor};

use super::axis;
use super::grid::Grid;
use super::palette::{self, RAMP, UNMONITORED};

/// How cells are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    /// Characters of the ramp, no escape sequences.
    Off,
    /// Backgrounds from the 256-colour palette.
    Indexed,
    /// 24-bit backgrounds (terminals that say `COLORTERM=truecolor`).
    Rgb,
}

impl Colour {
    /// The background escape of frequency `f`, `None` without colour.
    fn background(self, f: f64) -> Option<String> {
        let rgb = palette::rgb(f);
        let c = match self {
            Colour::Off => return None,
            Colour::Indexed => Color::AnsiValue(palette::ansi256(rgb)),
            Colour::Rgb => Color::Rgb {
                r: rgb.0,
                g: rgb.1,
                b: rgb.2,
            },
        };
        Some(SetBackgroundColor(c).to_string())
    }
}

/// One line of cells: `cells` in order, each a character (no colour) or
/// a coloured blank, escapes only where the colour changes.
fn cells(values: impl Iterator<Item = Option<f64>>, colour: Colour) -> String {
    let mut out = String::new();
    let mut current: Option<String> = None;
    for v in values {
        let bg = v.and_then(|f| colour.background(f));
        if bg != current {
            if bg.is_none() {
                let _ = write!(out, "{ResetColor}");
            }
            if let Some(b) = &bg {
                out.push_str(b);
            }
            current = bg;
        }
        out.push(match (v, colour) {
            (None, _) => UNMONITORED,
            (Some(_), Colour::Indexed | Colour::Rgb) => ' ',
            (Some(f), Colour::Off) => palette::char_of(f),
        });
    }
    if current.is_some() {
        let _ = write!(out, "{ResetColor}");
    }
    out
}

/// Rows between two address labels: about six labels on the axis.
fn label_every(rows: usize) -> usize {
    rows.div_ceil(6).max(2)
}

/// The heatmap of `grid` under the lines of `header`, cells drawn with
/// `colour`; every line ends with a newline.
pub fn heatmap(grid: &Grid, header: &[String], colour: Colour) -> String {
    let (rows, cols) = (grid.rows(), grid.cols());
    let ticked = axis::ticks(rows, label_every(rows));
    let labels: Vec<Option<String>> = (0..rows)
        .map(|r| ticked[r].then(|| format!("{:#x}", grid.addrs[r])))
        .collect();
    // The caption on the unlabelled row nearest the middle.
    let caption = (0..rows)
        .filter(|&r| labels[r].is_none())
        .min_by_key(|&r| r.abs_diff(rows / 2));
    let width = labels
        .iter()
        .flatten()
        .map(String::len)
        .chain([if caption.is_some() {
            "address".len()
        } else {
            0
        }])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for h in header {
        let _ = writeln!(out, "{h}");
    }
    for r in (0..rows).rev() {
        let (label, mark) = match (&labels[r], caption == Some(r)) {
            (Some(l), _) => (l.as_str(), '┤'),
            (None, true) => ("address", '│'),
            (None, false) => ("", '│'),
        };
        let line = cells((0..cols).map(|c| grid.get(r, c)), colour);
        let _ = writeln!(out, "{label:>width$} {mark}{line}");
    }
    let (rule, times) = axis::time_axis(grid.times[0], grid.times[cols], cols, width + 1);
    let _ = writeln!(out, "{rule}");
    let _ = writeln!(out, "{times}");
    let steps = RAMP.len() - 1;
    let scale = match colour {
        Colour::Off => format!("'{RAMP}'"),
        // As wide as the ramp in its quotes.
        _ => format!(
            " {} ",
            cells((0..=steps).map(|k| Some(k as f64 / steps as f64)), colour)
        ),
    };
    let _ = writeln!(
        out,
        "scale: 0% {scale} 100% access frequency, {UNMONITORED} not monitored; time since the window's start"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 rows over 0x10000..0x18000, 20 columns over 2 s: the lowest two
    /// rows hot, the row above half, a column in the middle unmonitored.
    fn grid() -> Grid {
        let (rows, cols) = (8, 20);
        let mut cells = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                cells.push(match (r, c) {
                    (_, 10) => None,
                    (0 | 1, _) => Some(1.0),
                    (2, _) => Some(0.5),
                    _ => Some(0.0),
                });
            }
        }
        Grid {
            times: (0..=cols as u64).map(|c| c * 100_000_000).collect(),
            addrs: (0..=rows as u64).map(|r| 0x10000 + r * 0x1000).collect(),
            cells,
        }
    }

    /// `text` without escape sequences.
    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for e in chars.by_ref() {
                    if e.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn high_addresses_on_top_hot_rows_at_the_bottom_and_axes_labelled() {
        let text = heatmap(&grid(), &["head".into()], Colour::Off);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 8 + 3, "{text}");
        assert_eq!(lines[0], "head");
        let cells = |l: &str| -> String { l.split_once(['┤', '│']).unwrap().1.to_string() };
        let row = |r: usize| cells(lines[1 + 7 - r]);
        let mut hot = "@".repeat(10) + "░" + &"@".repeat(9);
        assert_eq!(row(0), hot);
        assert_eq!(row(1), hot);
        hot = "+".repeat(10) + "░" + &"+".repeat(9);
        assert_eq!(row(2), hot);
        assert_eq!(row(7), " ".repeat(10) + "░" + &" ".repeat(9));
        // Labels: the start of the row, the lowest at the bottom.
        assert!(lines[8].starts_with("0x10000 ┤"), "{text}");
        assert!(lines[1].starts_with("0x17000 ┤"), "{text}");
        assert!(lines
            .iter()
            .any(|l| l.trim_start().starts_with("address │")));
        assert!(lines[9].trim_start().starts_with("└┬"));
        assert_eq!(lines[10].trim(), "0 s       1 s    2 s");
        assert!(lines[11].contains("0% ' .:-=+*#%@' 100%"));
    }

    #[test]
    fn colour_draws_the_same_geometry_with_backgrounds() {
        let off = heatmap(&grid(), &[], Colour::Off);
        for colour in [Colour::Indexed, Colour::Rgb] {
            let on = heatmap(&grid(), &[], colour);
            let (a, b) = (off.lines(), plain(&on));
            let b: Vec<&str> = b.lines().collect();
            for (x, y) in a.zip(&b) {
                assert_eq!(x.chars().count(), y.chars().count(), "{x:?}\n{y:?}");
            }
            let hottest = colour.background(1.0).unwrap();
            let coldest = colour.background(0.0).unwrap();
            let lines: Vec<&str> = on.lines().collect();
            // The lowest row (line 7): hot from its first cell; the top: cold.
            assert!(lines[7].contains(&format!("{hottest}          ")));
            assert!(lines[0].contains(&format!("{coldest}          ")));
            assert!(!lines[0].contains(&hottest));
        }
        assert!(!off.contains('\x1b'));
    }
}
