//! The live view's keys: what each does to the [`View`].
//!
//! Moves are clamped at the key, with what the last drawing showed (rows,
//! height, per-CPU columns), so that a key past the end does nothing and
//! the way back is at once visible. A key with Ctrl or Alt is never taken
//! for the bare key (Ctrl-Q does not quit); Ctrl-C and Ctrl-Z are the
//! screen's ([`crate::screen::wait`]).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Sort, View};
use crate::screen;

/// Applies key `k` to `view`; false to quit.
pub(super) fn key(view: &mut View, k: KeyEvent) -> bool {
    if screen::is_interrupt(&k) {
        return false;
    }
    let chord = k
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    if view.editing {
        edit(view, k, chord);
        view.scroll = 0;
        return true;
    }
    if chord {
        return true;
    }
    let last = view.last;
    let page = last.height.max(1);
    let bottom = last.rows.saturating_sub(last.height);
    let step = last.cpus.max(1);
    match k.code {
        KeyCode::Char('q') | KeyCode::Char('Q') => return false,
        KeyCode::Esc => view.filter.clear(),
        KeyCode::Char('s') => {
            view.sort = match view.sort {
                Sort::Name => Sort::Value,
                Sort::Value => Sort::Name,
            }
        }
        KeyCode::Char('/') => {
            view.editing = true;
            view.filter.clear();
            view.scroll = 0;
        }
        KeyCode::Char('c') => view.per_cpu = !view.per_cpu,
        KeyCode::Char('p') | KeyCode::Char(' ') => view.paused = !view.paused,
        KeyCode::Down | KeyCode::Char('j') => view.scroll = (view.scroll + 1).min(bottom),
        KeyCode::Up | KeyCode::Char('k') => view.scroll = view.scroll.saturating_sub(1),
        KeyCode::PageDown => view.scroll = (view.scroll + page).min(bottom),
        KeyCode::PageUp => view.scroll = view.scroll.saturating_sub(page),
        KeyCode::Home | KeyCode::Char('g') => view.scroll = 0,
        KeyCode::End | KeyCode::Char('G') => view.scroll = bottom,
        KeyCode::Right | KeyCode::Char('l') => {
            view.cpu_first = (view.cpu_first + step).min(last.nr_cpus.saturating_sub(step));
        }
        KeyCode::Left | KeyCode::Char('h') => view.cpu_first = view.cpu_first.saturating_sub(step),
        _ => {}
    }
    true
}

/// Key `k` while the filter is typed (`chord`: with Ctrl or Alt): Enter
/// keeps it, Esc clears it, Backspace and Ctrl-W delete a letter and a
/// word, Ctrl-U all of it; letters with Ctrl or Alt are not typed.
fn edit(view: &mut View, k: KeyEvent, chord: bool) {
    match k.code {
        KeyCode::Enter => view.editing = false,
        KeyCode::Esc => {
            view.editing = false;
            view.filter.clear();
        }
        KeyCode::Backspace => {
            view.filter.pop();
        }
        KeyCode::Char('u') if chord => view.filter.clear(),
        KeyCode::Char('w') if chord => {
            let kept = view.filter.trim_end().len();
            let word = view.filter[..kept]
                .rfind(|c: char| c.is_whitespace() || c == '.' || c == '_' || c == '{' || c == '=')
                .map_or(0, |at| at + 1);
            view.filter.truncate(if word == kept {
                kept.saturating_sub(1)
            } else {
                word
            });
        }
        KeyCode::Char(c) if !chord => view.filter.push(c),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::Drawn;
    use super::*;

    fn press(v: &mut View, code: KeyCode) -> bool {
        key(v, KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn chord(v: &mut View, c: char, m: KeyModifiers) -> bool {
        key(v, KeyEvent::new(KeyCode::Char(c), m))
    }

    #[test]
    fn keys_sort_filter_toggle_and_quit() {
        let mut v = View::new(false);
        assert!(press(&mut v, KeyCode::Char('s')));
        assert_eq!(v.sort, Sort::Value);
        assert!(press(&mut v, KeyCode::Char('s')));
        assert_eq!(v.sort, Sort::Name);
        assert!(press(&mut v, KeyCode::Char('c')));
        assert!(v.per_cpu);
        assert!(press(&mut v, KeyCode::Char('p')));
        assert!(v.paused);
        // While typing a filter, q and s are letters of it.
        assert!(press(&mut v, KeyCode::Char('/')));
        for c in "qs".chars() {
            assert!(press(&mut v, KeyCode::Char(c)));
        }
        assert!(press(&mut v, KeyCode::Backspace));
        assert!(press(&mut v, KeyCode::Enter));
        assert_eq!((v.filter.as_str(), v.editing), ("q", false));
        assert!(press(&mut v, KeyCode::Esc));
        assert_eq!(v.filter, "");
        assert!(!press(&mut v, KeyCode::Char('q')));
        assert!(!chord(&mut View::new(false), 'c', KeyModifiers::CONTROL));
    }

    /// Ctrl-Q and Alt-Q do not quit, Ctrl-S does not sort; in the filter,
    /// Ctrl-U clears it and Ctrl-W deletes a word, and neither is typed.
    #[test]
    fn chords_are_not_the_bare_key() {
        let mut v = View::new(false);
        assert!(chord(&mut v, 'q', KeyModifiers::CONTROL));
        assert!(chord(&mut v, 'q', KeyModifiers::ALT));
        assert!(chord(&mut v, 's', KeyModifiers::CONTROL));
        assert_eq!(v.sort, Sort::Name);
        assert!(press(&mut v, KeyCode::Char('/')));
        for c in "task.cpu main".chars() {
            press(&mut v, KeyCode::Char(c));
        }
        chord(&mut v, 'w', KeyModifiers::CONTROL);
        assert_eq!(v.filter, "task.cpu ");
        chord(&mut v, 'w', KeyModifiers::CONTROL);
        assert_eq!(v.filter, "task.");
        chord(&mut v, 'x', KeyModifiers::ALT);
        assert_eq!(v.filter, "task.");
        chord(&mut v, 'u', KeyModifiers::CONTROL);
        assert_eq!((v.filter.as_str(), v.editing), ("", true));
        // Capitals come with Shift: typed.
        assert!(key(
            &mut v,
            KeyEvent::new(KeyCode::Char('M'), KeyModifiers::SHIFT)
        ));
        assert_eq!(v.filter, "M");
    }

    /// 10 rows past the end, then 5 back up: on screen at once; g and G
    /// (Home, End) the ends; the per-CPU columns move by a screenful and
    /// stop at the last.
    #[test]
    fn moves_are_clamped_at_the_key() {
        let mut v = View::new(true);
        v.last = Drawn {
            rows: 100,
            height: 30,
            cpus: 16,
            nr_cpus: 40,
        };
        for _ in 0..10 {
            press(&mut v, KeyCode::PageDown);
        }
        assert_eq!(v.scroll, 70);
        for _ in 0..2 {
            press(&mut v, KeyCode::PageUp);
        }
        assert_eq!(v.scroll, 10);
        press(&mut v, KeyCode::Char('G'));
        assert_eq!(v.scroll, 70);
        press(&mut v, KeyCode::Down);
        assert_eq!(v.scroll, 70);
        press(&mut v, KeyCode::Char('g'));
        assert_eq!(v.scroll, 0);
        press(&mut v, KeyCode::End);
        press(&mut v, KeyCode::Home);
        assert_eq!(v.scroll, 0);
        press(&mut v, KeyCode::Right);
        assert_eq!(v.cpu_first, 16);
        press(&mut v, KeyCode::Char('l'));
        press(&mut v, KeyCode::Char('l'));
        assert_eq!(v.cpu_first, 24, "the last columns, a full screen of them");
        press(&mut v, KeyCode::Left);
        press(&mut v, KeyCode::Char('h'));
        press(&mut v, KeyCode::Char('h'));
        assert_eq!(v.cpu_first, 0);
    }
}
