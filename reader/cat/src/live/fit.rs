//! Text into a given number of terminal cells: a name shortened in the
//! middle, a cell padded to its column.
//!
//! Every character counts as one cell (the formatter writes only such;
//! names come from the segment, where wide characters are rare: they
//! would only make a row longer, cut at the screen's edge).

/// Width of `s` in terminal cells.
pub(super) fn width(s: &str) -> usize {
    s.chars().count()
}

/// `name` in at most `cells` cells: whole if it fits, else shortened in
/// the middle with `…`, keeping the instance (`{dimension=instance}`)
/// whole when it leaves room for two characters of the family, else the
/// start and the end of the whole name.
pub(super) fn name(name: &str, cells: usize) -> String {
    let n = width(name);
    if n <= cells {
        return name.to_string();
    }
    if cells == 0 {
        return String::new();
    }
    if let Some(at) = name.find('{') {
        let instance = &name[at..];
        let keep = width(instance);
        if keep + 3 <= cells {
            let head: String = name.chars().take(cells - keep - 1).collect();
            return format!("{head}…{instance}");
        }
    }
    let tail = (cells - 1) / 2;
    let head = cells - 1 - tail;
    let start: String = name.chars().take(head).collect();
    let end: String = name.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// `s` padded with spaces to `cells` cells: on the right (`left`) or on
/// the left (a number, right-aligned). Never cut: a column is as wide as
/// its widest cell.
pub(super) fn pad(s: &str, cells: usize, left: bool) -> String {
    let fill = " ".repeat(cells.saturating_sub(width(s)));
    if left {
        format!("{s}{fill}")
    } else {
        format!("{fill}{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_shorten_in_the_middle_keeping_the_instance() {
        assert_eq!(name("net.rx", 10), "net.rx");
        assert_eq!(name("task.cpu_time{task=main}", 18), "task.c…{task=main}");
        assert_eq!(width(&name("task.cpu_time{task=main}", 18)), 18);
        // The instance too long to keep whole: both ends of the name.
        assert_eq!(name("task.cpu_time{task=worker-0}", 9), "task…r-0}");
        assert_eq!(name("kernel.all.pswitch", 7), "ker…tch");
        assert_eq!(name("abc", 1), "…");
        assert_eq!(name("abc", 0), "");
        for cells in 0..30 {
            assert!(width(&name("task.cpu_time{task=worker-0}", cells)) <= cells);
        }
    }

    #[test]
    fn cells_pad_to_their_column() {
        assert_eq!(pad("1.0%", 6, false), "  1.0%");
        assert_eq!(pad("ab", 4, true), "ab  ");
        assert_eq!(pad("toolong", 3, false), "toolong");
    }
}
