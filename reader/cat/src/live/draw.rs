//! The live view's screen: a status line, the table, the keys in a footer.
//!
//! Numbers are never cut: VALUE is as wide as its widest cell, the name
//! yields first (shortened in the middle, the instance kept), then KIND,
//! and per-CPU columns are drawn only as many as fit (`←`/`→` move among
//! them). The status line puts what needs attention first, highlighted
//! (paused, a skipped sample, a writer gone), and drops the least useful
//! facts (epoch, then the read's cost, then the path) when it is narrow;
//! the footer's counts are kept at its right whatever the keys' help.

use std::time::Duration;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{fit, shown, Drawn, Item, Sample, Sort, View};

/// Space between two columns.
const GAP: usize = 2;

/// The name is cut no shorter than this before KIND goes.
const NAME_MIN: usize = 12;

/// The name is cut no shorter than this to make room for per-CPU columns.
const NAME_MIN_WITH_CPUS: usize = 16;

/// Draws the status line, the table and the footer; `cells` gives an item's
/// value on one CPU (asked only for the rows and columns shown). Returns
/// what it showed.
pub(super) fn draw(
    f: &mut Frame,
    path: &str,
    period: Duration,
    s: &Sample,
    v: &View,
    cells: &dyn Fn(&Item, usize) -> String,
) -> Drawn {
    let [status_area, body, footer_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(status(path, period, s, v, usize::from(status_area.width))),
        status_area,
    );
    let drawn = table(f, body, s, v, cells);
    footer(f, footer_area, s, v, &drawn);
    drawn
}

/// Reversed, the status line's and the footer's style.
fn bar() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}

/// The status line in `cells` cells: what needs attention (highlighted),
/// then path, writer, generation, period, read cost, epoch, the least
/// useful dropped first when they do not fit.
fn status(path: &str, period: Duration, s: &Sample, v: &View, cells: usize) -> Line<'static> {
    let mut alert = Vec::new();
    if v.paused {
        alert.push("PAUSED".to_string());
    }
    if let Some(n) = &s.note {
        alert.push(n.clone());
    }
    if s.stale {
        alert.push(s.liveness.clone());
    }
    // (text, rank): the highest rank is dropped first; 0 never.
    let mut rest: Vec<(String, u8)> = vec![(path.to_string(), 1)];
    if !s.stale && s.taken.is_some() {
        rest.push((s.liveness.clone(), 0));
    }
    let every = format!("every {:.2} s", period.as_secs_f64());
    match &s.taken {
        None => {
            rest.push(("waiting for the first sample".into(), 0));
            rest.push((every, 0));
        }
        Some(t) => {
            if let Some(g) = t.generation {
                rest.push((format!("gen {g}"), 0));
            }
            // The measured interval, only when it is off by more than 5 %
            // (a slow read, a stopped terminal): the rates are per
            // measured second.
            let want = period.as_secs_f64();
            if t.interval_s > 0.0 && (t.interval_s - want).abs() > want * 0.05 {
                rest.push((format!("{every} (took {:.2} s)", t.interval_s), 0));
            } else {
                rest.push((every, 0));
            }
            rest.push((format!("read {:.1} µs", t.read_us), 2));
            if let Some(e) = t.epoch {
                rest.push((format!("epoch {e:#018x}"), 3));
            }
        }
    }
    let alert = alert.join("  ");
    let total = |rest: &[(String, u8)]| {
        fit::width(&alert) + rest.iter().map(|(t, _)| fit::width(t) + GAP).sum::<usize>() + 1
    };
    while total(&rest) > cells {
        let Some(worst) = rest
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| *r > 0)
            .max_by_key(|(_, (_, r))| *r)
            .map(|(k, _)| k)
        else {
            break;
        };
        rest.remove(worst);
    }
    let rest: Vec<String> = rest.into_iter().map(|(t, _)| t).collect();
    let mut spans = Vec::new();
    if !alert.is_empty() {
        spans.push(Span::styled(
            format!(" {alert} "),
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }
    spans.push(Span::styled(format!(" {}", rest.join("  ")), bar()));
    Line::from(spans).style(bar())
}

/// The per-CPU columns that fit: from the first asked for, each CPU's
/// number, width and cells (of the rows `visible`), as many as `room`
/// cells hold.
fn cpu_columns(
    s: &Sample,
    v: &View,
    visible: &[&Item],
    room: usize,
    cells: &dyn Fn(&Item, usize) -> String,
) -> Vec<(usize, usize, Vec<String>)> {
    let mut cols = Vec::new();
    if !v.per_cpu || s.nr_cpus == 0 {
        return cols;
    }
    let mut used = 0;
    for c in v.cpu_first.min(s.nr_cpus - 1)..s.nr_cpus {
        let head = format!("cpu{c}");
        let texts: Vec<String> = visible.iter().map(|i| cells(i, c)).collect();
        let w = texts
            .iter()
            .map(|t| fit::width(t))
            .chain([fit::width(&head)])
            .max()
            .unwrap_or(0);
        if used + GAP + w > room {
            break;
        }
        used += GAP + w;
        cols.push((c, w, texts));
    }
    cols
}

/// Draws the table into `area`; what it showed.
fn table(
    f: &mut Frame,
    area: Rect,
    s: &Sample,
    v: &View,
    cells: &dyn Fn(&Item, usize) -> String,
) -> Drawn {
    let shown = shown(&s.items, v);
    let height = usize::from(area.height.saturating_sub(1));
    let scroll = v.scroll.min(shown.len().saturating_sub(height));
    let visible = &shown[scroll..shown.len().min(scroll + height)];
    let cells_w = usize::from(area.width);
    let widest = |w: usize, texts: &mut dyn Iterator<Item = &str>| {
        texts.map(fit::width).max().unwrap_or(0).max(w)
    };
    let name_need = widest(4, &mut shown.iter().map(|i| i.name.as_str()));
    let kind_w = widest(4, &mut shown.iter().map(|i| i.kind));
    let value_w = widest(5, &mut shown.iter().map(|i| i.value.as_str()));
    // The name yields first, down to NAME_MIN; then KIND goes.
    let show_kind = value_w + GAP + kind_w + GAP + name_need.min(NAME_MIN) <= cells_w;
    let fixed = value_w + GAP + if show_kind { kind_w + GAP } else { 0 };
    let room = cells_w.saturating_sub(fixed + name_need.min(NAME_MIN_WITH_CPUS));
    let cpus = cpu_columns(s, v, visible, room, cells);
    let cpus_w: usize = cpus.iter().map(|(_, w, _)| GAP + w).sum();
    let name_w = name_need.min(cells_w.saturating_sub(fixed + cpus_w));
    let line =
        |name: &str, kind: &str, value: &str, per_cpu: &mut dyn Iterator<Item = (usize, &str)>| {
            let mut l = fit::pad(&fit::name(name, name_w), name_w, true);
            l.push_str(&" ".repeat(GAP));
            if show_kind {
                l.push_str(&fit::pad(kind, kind_w, true));
                l.push_str(&" ".repeat(GAP));
            }
            l.push_str(&fit::pad(value, value_w, false));
            for (w, t) in per_cpu {
                l.push_str(&" ".repeat(GAP));
                l.push_str(&fit::pad(t, w, false));
            }
            l
        };
    let heads: Vec<String> = cpus.iter().map(|(c, _, _)| format!("cpu{c}")).collect();
    let mut lines = vec![Line::styled(
        line(
            "NAME",
            "KIND",
            "VALUE",
            &mut cpus
                .iter()
                .zip(&heads)
                .map(|((_, w, _), h)| (*w, h.as_str())),
        ),
        Style::new().add_modifier(Modifier::BOLD),
    )];
    for (k, i) in visible.iter().enumerate() {
        lines.push(Line::raw(line(
            &i.name,
            i.kind,
            &i.value,
            &mut cpus.iter().map(|(_, w, t)| (*w, t[k].as_str())),
        )));
    }
    if s.items.is_empty() {
        if s.taken.is_some() {
            f.render_widget(Paragraph::new("(no counters registered)"), area);
        }
    } else {
        f.render_widget(Paragraph::new(lines), area);
    }
    Drawn {
        rows: shown.len(),
        height,
        cpus: cpus.len(),
        nr_cpus: s.nr_cpus,
    }
}

/// The keys at the left of the footer, the rows (and per-CPU columns)
/// shown at its right, kept whatever the width.
fn footer(f: &mut Frame, area: Rect, s: &Sample, v: &View, d: &Drawn) {
    let keys = if v.editing {
        format!(
            " filter: {}_   Enter keep  Esc clear  Ctrl-U erase  Ctrl-W word",
            v.filter
        )
    } else {
        format!(
            " q quit  s sort ({})  / filter{}  c per-CPU ({}){}  p pause  ↑↓ PgUp PgDn g G scroll",
            match v.sort {
                Sort::Name => "name",
                Sort::Value => "value within family",
            },
            if v.filter.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.filter)
            },
            if v.per_cpu { "on" } else { "off" },
            if v.per_cpu { "  ←→ CPUs" } else { "" },
        )
    };
    let mut counts = String::new();
    if v.per_cpu && s.nr_cpus > 0 {
        let first = v.cpu_first.min(s.nr_cpus - 1);
        counts = match d.cpus {
            0 => format!("no room for cpu columns of {}  ", s.nr_cpus),
            n => format!("cpu {first}–{} of {}  ", first + n - 1, s.nr_cpus),
        };
    }
    counts.push_str(&format!("{} of {} rows ", d.rows, s.items.len()));
    let w = u16::try_from(fit::width(&counts)).unwrap_or(u16::MAX);
    let [left, right] = Layout::horizontal([Constraint::Min(0), Constraint::Length(w)]).areas(area);
    f.render_widget(Paragraph::new(keys).style(bar()), left);
    f.render_widget(Paragraph::new(counts).style(bar()), right);
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::super::tests::item;
    use super::super::Taken;
    use super::*;

    /// A sample of `items` on `nr_cpus` CPUs, read once.
    fn sample(items: Vec<Item>, nr_cpus: usize) -> Sample {
        Sample {
            items,
            nr_cpus,
            taken: Some(Taken {
                epoch: Some(0x1234),
                generation: Some(7),
                read_us: 12.5,
                interval_s: 1.0,
            }),
            liveness: "writer alive".into(),
            stale: false,
            note: None,
        }
    }

    /// An item showing `value`.
    fn valued(name: &str, family: usize, value: &str) -> Item {
        Item {
            value: value.into(),
            ..item(name, family, Some(1.0))
        }
    }

    /// The screen, `w`×`h`, one string a row; and what was drawn.
    fn render(s: &Sample, v: &View, w: u16, h: u16) -> (Vec<String>, Drawn) {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let cells = |i: &Item, c: usize| format!("{}.{c}", i.family);
        let mut drawn = Drawn::default();
        term.draw(|f| {
            drawn = draw(
                f,
                "/dev/shm/perfabi.seg",
                Duration::from_secs(1),
                s,
                v,
                &cells,
            )
        })
        .unwrap();
        let buf = term.backend().buffer().clone();
        let rows = (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect())
            .collect();
        (rows, drawn)
    }

    /// At 30 columns every value is whole (`154.5% CPU`, not `54.5% CPU`),
    /// the names are cut in the middle with their instance kept.
    #[test]
    fn numbers_are_never_cut_names_yield() {
        let s = sample(
            vec![
                valued("task.cpu_time{task=main}", 0, "154.5% CPU"),
                valued("task.cpu_time{task=w}", 0, "3.0% CPU"),
                valued("net.rx", 1, "1.5 MiB/s"),
            ],
            2,
        );
        let (screen, _) = render(&s, &View::new(false), 30, 8);
        let row = |p: &str| {
            screen
                .iter()
                .find(|l| l.starts_with(p))
                .unwrap_or_else(|| panic!("no {p} row:\n{}", screen.join("\n")))
                .clone()
        };
        let main = row("task");
        assert!(main.trim_end().ends_with(" 154.5% CPU"), "{main}");
        assert!(
            main.contains("…{task=main}") || main.contains("{task=main}"),
            "{main}"
        );
        assert!(row("net.rx").trim_end().ends_with("1.5 MiB/s"));
        // Right-aligned: every value ends in the same column.
        let ends: Vec<usize> = screen[2..5]
            .iter()
            .map(|l| l.trim_end().chars().count())
            .collect();
        assert!(ends.iter().all(|&e| e == ends[0]), "{}", screen.join("\n"));
        // The footer keeps its count of rows.
        assert!(screen[7].contains("3 of 3 rows"), "{}", screen[7]);
    }

    /// 256 CPUs at 80 columns: the columns that fit, from the first asked
    /// for, a note of which in the footer, and the body drawn.
    #[test]
    fn per_cpu_columns_that_fit_and_scroll() {
        let s = sample(vec![valued("task.cpu_time{task=main}", 0, "1.0% CPU")], 256);
        let mut v = View::new(true);
        v.cpu_first = 16;
        let (screen, drawn) = render(&s, &v, 80, 6);
        let head = &screen[1];
        assert!(head.starts_with("NAME") && head.contains("cpu16"), "{head}");
        assert!(!head.contains("cpu15"), "{head}");
        assert!(drawn.cpus > 0 && drawn.cpus < 256, "{drawn:?}");
        assert!(head.trim_end().chars().count() <= 80);
        let last = 16 + drawn.cpus - 1;
        assert!(head.trim_end().ends_with(&format!("cpu{last}")), "{head}");
        assert!(
            screen[2].trim_end().ends_with("0.16") || screen[2].contains("0.16"),
            "{}",
            screen[2]
        );
        assert!(
            screen[5].contains(&format!("cpu 16–{last} of 256")),
            "{}",
            screen[5]
        );
    }

    /// What matters first: PAUSED, a skipped sample and a gone writer at
    /// the left of an 80-column status line; before any sample, no epoch 0.
    #[test]
    fn status_line_puts_what_matters_first() {
        let mut s = sample(vec![valued("a", 0, "1")], 1);
        s.note = Some("sample skipped: segment busy".into());
        s.stale = true;
        s.liveness = "writer stale (writer gone, 9.5 s)".into();
        let mut v = View::new(false);
        v.paused = true;
        let (screen, _) = render(&s, &v, 80, 5);
        assert!(
            screen[0].starts_with(
                " PAUSED  sample skipped: segment busy  writer stale (writer gone, 9.5 s)"
            ),
            "{}",
            screen[0]
        );
        let (wide, _) = render(&s, &View::new(false), 200, 5);
        assert!(
            wide[0].contains("epoch 0x0000000000001234") && wide[0].contains("gen 7"),
            "{}",
            wide[0]
        );
        // Narrow: the epoch goes first, then the read's cost.
        let (mid, _) = render(&sample(vec![], 1), &View::new(false), 90, 5);
        assert!(
            !mid[0].contains("epoch") && mid[0].contains("read 12.5 µs"),
            "{}",
            mid[0]
        );
        let first = Sample {
            liveness: "…".into(),
            ..Sample::default()
        };
        let (screen, _) = render(&first, &View::new(false), 100, 5);
        assert!(
            screen[0].contains("waiting for the first sample") && !screen[0].contains("epoch"),
            "{}",
            screen[0]
        );
    }
}
