//! Every perfabi program's man page, rendered from the program's own clap
//! argument definitions by `clap_mangen`: `PROGRAM --man-page` prints it
//! (roff, section 1), so a page can never describe other options than the
//! program it ships with. The packages run each program built for them
//! with `--man-page` and install the result (`tests/packages`).
//!
//! A program adds one line at the top of its `main`:
//!
//! ```no_run
//! # #[derive(clap::Parser)] struct Args {}
//! perfabi_man::print_if_asked(|| perfabi_man::Page::of::<Args>());
//! ```
//!
//! The page: NAME, SYNOPSIS, DESCRIPTION and OPTIONS from the definitions
//! (`clap_mangen`), then the program's `after_help` text as NOTES (a
//! paragraph per blank-line-separated block; a block whose lines are
//! indented is shown as typed), then any sections the program adds (a PCP
//! agent's INSTALLATION, FILES, PCP ENVIRONMENT), VERSION, and SEE ALSO
//! naming the other perfabi programs.
#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::io::{self, Write};

use clap::{Command, CommandFactory};
use clap_mangen::Man;
use roff::{bold, roman, Roff};

/// The argument that prints the page instead of running the program: the
/// only argument, and hidden from `--help`.
pub const FLAG: &str = "--man-page";

/// The perfabi programs' pages, each `(name, section)`: SEE ALSO names
/// them all but the page's own.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("perfabi-cat", "1"),
    ("perfabi-exportd", "1"),
    ("perfabi-prometheus", "1"),
    ("perfabi-bpfd", "1"),
    ("pmdaperfabi", "1"),
];

/// A man page: the program's clap definitions plus sections of its own.
pub struct Page {
    cmd: Command,
    sections: Vec<(String, String)>,
    see_also: Vec<(String, String)>,
}

impl Page {
    /// The page of the program whose arguments `A` defines.
    pub fn of<A: CommandFactory>() -> Page {
        Page::new(A::command())
    }

    /// The page of `cmd` (its name is the page's title).
    pub fn new(cmd: Command) -> Page {
        let own = cmd.get_name().to_string();
        let see_also = PROGRAMS
            .iter()
            .filter(|(name, _)| *name != own)
            .map(|(name, section)| (name.to_string(), section.to_string()))
            .collect();
        Page {
            cmd,
            sections: Vec::new(),
            see_also,
        }
    }

    /// Adds a section after NOTES: `title` (upper case, as man pages
    /// have it) and its text, paragraphs separated by blank lines (an
    /// indented paragraph is shown as typed).
    pub fn section(mut self, title: &str, text: &str) -> Page {
        self.sections.push((title.to_uppercase(), text.to_string()));
        self
    }

    /// Adds a page to SEE ALSO (after the perfabi programs').
    pub fn see_also(mut self, name: &str, section: &str) -> Page {
        self.see_also.push((name.to_string(), section.to_string()));
        self
    }

    /// Writes the page (roff, `man(7)` macros) to `w`.
    pub fn render(&self, w: &mut dyn Write) -> io::Result<()> {
        let mut cmd = self.cmd.clone().disable_help_subcommand(true);
        cmd.build();
        let version = cmd.get_version().unwrap_or_default().to_string();
        let notes = cmd
            .get_after_long_help()
            .or_else(|| cmd.get_after_help())
            .map(|t| t.to_string());
        // clap_mangen would show after_help as "EXTRA": it is NOTES here,
        // followed by the program's own sections, before VERSION.
        let man = Man::new(cmd.after_help(None::<&str>).after_long_help(None::<&str>))
            .source(format!("perfabi {version}"))
            .manual("perfabi");
        let mut page = Vec::new();
        man.render(&mut page)?;
        // Left-adjusted, not justified: a long unbroken default (a regular
        // expression) cannot be justified, and groff -ww warns.
        let page = String::from_utf8_lossy(&page).replacen("\n.SH ", "\n.ad l\n.SH ", 1);
        let mut ours = Roff::new();
        if let Some(notes) = &notes {
            section(&mut ours, "NOTES", notes);
        }
        for (title, text) in &self.sections {
            section(&mut ours, title, text);
        }
        let (head, tail) = page
            .find("\n.SH VERSION\n")
            .map_or((page.as_str(), ""), |at| page.split_at(at + 1));
        w.write_all(ascii(head).as_bytes())?;
        w.write_all(ascii(&ours.to_roff()).as_bytes())?;
        w.write_all(ascii(tail).as_bytes())?;
        let mut see = Roff::new();
        see.control("SH", ["SEE ALSO"]);
        let mut refs = Vec::new();
        for (i, (name, section)) in self.see_also.iter().enumerate() {
            let sep = if i + 1 == self.see_also.len() {
                ""
            } else {
                ", "
            };
            refs.push(bold(name.as_str()));
            refs.push(roman(format!("({section}){sep}")));
        }
        see.text(refs);
        w.write_all(see.to_roff().as_bytes())
    }
}

/// `roff` with every character beyond ASCII written as groff's escape
/// `\[uXXXX]`, so the page reads the same whatever encoding the
/// formatter assumes (`groff` without `preconv` takes bytes as Latin-1);
/// an ellipsis, which groff's ASCII output has no stand-in for (`man` in
/// the C locale warns), is three dots.
fn ascii(roff: &str) -> String {
    let mut out = String::with_capacity(roff.len());
    for c in roff.chars() {
        match c {
            '\u{2026}' => out.push_str("..."),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
        }
    }
    out
}

/// Appends section `title` with `text`: a `.PP` paragraph per block of
/// lines separated by a blank line, a block whose first line is indented
/// kept as typed (`.EX`/`.EE`).
fn section(roff: &mut Roff, title: &str, text: &str) {
    roff.control("SH", [title]);
    for block in paragraphs(text) {
        if block[0].starts_with(' ') {
            roff.control("EX", []);
            for line in &block {
                roff.text([roman(*line)]);
            }
            roff.control("EE", []);
        } else {
            roff.control("PP", []);
            roff.text([roman(block.join(" "))]);
        }
    }
}

/// `text`'s blocks of lines, split at blank lines and where indentation
/// starts or ends (an example right under the sentence that introduces
/// it is a block of its own).
fn paragraphs(text: &str) -> Vec<Vec<&str>> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
            continue;
        }
        let indented = line.starts_with(' ');
        if current
            .first()
            .is_some_and(|first| first.starts_with(' ') != indented)
        {
            blocks.push(std::mem::take(&mut current));
        }
        current.push(line);
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}

/// If the program's only argument is [`FLAG`], prints `page()` to
/// standard output and exits (0; 1 with a one-line message if it cannot be
/// written); otherwise returns, and the program parses its arguments.
pub fn print_if_asked(page: impl FnOnce() -> Page) {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(FLAG)) || args.next().is_some() {
        return;
    }
    let page = page();
    let name = page.cmd.get_name().to_string();
    let mut out = io::stdout().lock();
    let written = page.render(&mut out).and_then(|()| out.flush());
    match written {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{name}: cannot write the man page: {e}");
            std::process::exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Read a thing.
    ///
    /// A longer description of reading the thing.
    #[derive(Parser)]
    #[command(
        name = "perfabi-cat",
        version = "9.8.7",
        after_help = "Exit status: 0 when read,\n1 otherwise.\n\nFor example:\n  perfabi-cat --json | jq .\n  .indented dot\nA line after the example.\n\n.dot first"
    )]
    struct Args {
        /// The segment.
        path: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[arg(long, hide = true)]
        secret: bool,
    }

    fn page(p: Page) -> String {
        let mut out = Vec::new();
        p.render(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_page_has_the_definitions_sections_in_order() {
        let text = page(Page::of::<Args>());
        let heads: Vec<&str> = text.lines().filter(|l| l.starts_with(".SH")).collect();
        assert_eq!(
            heads,
            [
                ".SH NAME",
                ".SH SYNOPSIS",
                ".SH DESCRIPTION",
                ".SH OPTIONS",
                ".SH NOTES",
                ".SH VERSION",
                ".SH \"SEE ALSO\""
            ]
        );
        assert!(text.contains("\n.TH perfabi-cat 1 "), "{text}");
        assert!(text.contains("perfabi 9.8.7"), "{text}");
        assert!(text.contains("json"), "{text}");
        assert!(!text.contains("secret"), "a hidden option is shown: {text}");
        assert!(text.contains("A longer description"), "{text}");
    }

    #[test]
    fn notes_are_paragraphs_and_indented_lines_are_examples() {
        let text = page(Page::of::<Args>());
        let notes = &text[text.find(".SH NOTES").unwrap()..text.find(".SH VERSION").unwrap()];
        let lines: Vec<&str> = notes.lines().collect();
        assert_eq!(lines[1], ".PP");
        assert_eq!(lines[2], "Exit status: 0 when read, 1 otherwise.");
        assert_eq!(lines[3], ".PP");
        assert_eq!(lines[4], "For example:");
        assert_eq!(lines[5], ".EX");
        assert!(
            lines[6].contains("perfabi\\-cat \\-\\-json | jq ."),
            "{notes}"
        );
        assert_eq!(lines[7], "  .indented dot");
        assert!(
            notes.contains(".EE\n.PP\nA line after the example.\n"),
            "{notes}"
        );
        // A paragraph starting with a dot is text, not a request.
        assert!(notes.ends_with(".PP\n\\&.dot first\n"), "{notes}");
    }

    #[test]
    fn characters_beyond_ascii_are_groff_escapes() {
        assert_eq!(ascii("0x… ‘a’ é"), "0x... \\[u2018]a\\[u2019] \\[u00E9]");
        let page = page(Page::new(
            Command::new("perfabi-cat")
                .about("Reads … in µs")
                .version("1"),
        ));
        assert!(page.is_ascii(), "{page}");
        assert!(page.contains("Reads ... in \\[u00B5]s"), "{page}");
    }

    #[test]
    fn see_also_names_the_other_programs_and_added_pages() {
        let text = page(
            Page::of::<Args>()
                .section("pcp environment", "PCP_CONF names pcp.conf.")
                .see_also("pmcd", "1"),
        );
        assert!(
            text.contains(".SH \"PCP ENVIRONMENT\"\n.PP\nPCP_CONF names pcp.conf."),
            "{text}"
        );
        let see = &text[text.find("SEE ALSO").unwrap()..];
        assert!(!see.contains("perfabi\\-cat"), "its own page: {see}");
        for name in [
            "perfabi\\-exportd",
            "perfabi\\-prometheus",
            "perfabi\\-bpfd",
            "pmdaperfabi",
            "pmcd",
        ] {
            assert!(
                see.contains(&format!("\\fB{name}\\fR(1)")),
                "{name} missing: {see}"
            );
        }
        assert!(see.trim_end().ends_with("\\fBpmcd\\fR(1)"), "{see}");
    }
}
