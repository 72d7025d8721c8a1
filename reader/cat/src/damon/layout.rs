//! How large the views over time are drawn: the rows and columns of the
//! heatmap and the lines of the working set's chart, from `--rows` and
//! `--cols`, else what fits the terminal, else fixed sizes (for a pipe,
//! and for an image).

use super::options::Config;

/// Heatmap rows and columns without a terminal or `--rows`/`--cols`.
pub const PLAIN: (usize, usize) = (24, 72);
/// Room on the left for the widest address label (`0x` and 16 digits, a
/// space, the axis).
pub const LEFT: usize = 20;

/// How large to draw: heatmap rows, the working set's chart lines, the
/// columns of both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Heatmap rows.
    pub heat_rows: usize,
    /// Lines of the working set's chart.
    pub wss_rows: usize,
    /// Columns of both.
    pub cols: usize,
}

/// The dimensions for `sections` sections: `--rows` and `--cols` if
/// given, else what fits `screen` (columns, lines), else [`PLAIN`].
pub fn dims(cfg: &Config, screen: Option<(u16, u16)>, sections: usize) -> Dims {
    let (w, h) = screen.map_or((0, 0), |(w, h)| (usize::from(w), usize::from(h)));
    let cols = cfg.cols.unwrap_or(if w > 0 {
        w.saturating_sub(LEFT).max(8)
    } else {
        PLAIN.1
    });
    // Lines besides the cells: the section's title; the heatmap's
    // address line, time axis and legend; the working set's line, blank,
    // table (a line per percentile, the mean, a heading) and time axis.
    let heat_extra = 1 + 4;
    let wss_extra = 2 + cfg.percentiles.len() + 2 + 2;
    let per = (h.saturating_sub(1) / sections.max(1)).saturating_sub(1);
    let rows = cfg.rows.unwrap_or(if h > 0 {
        per.saturating_sub(if cfg.heatmap { heat_extra } else { 1 })
    } else {
        PLAIN.0
    });
    match (cfg.heatmap, cfg.wss) {
        (true, true) => {
            let wss_rows = (rows / 3).clamp(3, 8);
            let heat_rows = match (cfg.rows, h) {
                (None, 1..) => rows.saturating_sub(wss_rows + wss_extra),
                _ => rows,
            };
            Dims {
                heat_rows: heat_rows.max(4),
                wss_rows,
                cols,
            }
        }
        (false, _) => Dims {
            heat_rows: rows.max(4),
            wss_rows: match (cfg.rows, h) {
                (None, 1..) => rows.saturating_sub(wss_extra).max(3),
                (None, 0) => 8,
                (Some(r), _) => r,
            },
            cols,
        },
        (true, false) => Dims {
            heat_rows: rows.max(4),
            wss_rows: 0,
            cols,
        },
    }
}

/// Heatmap rows and columns of an image without `--rows` and `--cols`.
pub const IMAGE: (usize, usize) = (128, 256);
