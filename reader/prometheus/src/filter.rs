//! Families of a rendered page, kept or left out by name: the `name[]`
//! filters of a request (`GET /metrics?name[]=X&name[]=Y`, as the Python
//! client takes them), and the names the endpoint keeps for its own
//! families ([`OWN_PREFIX`]).
//!
//! A page is a run of families, each its metadata lines (`# TYPE`,
//! `# HELP`, `# UNIT`, naming it) then its samples, as
//! [`perfabi_reader::exposition`] renders it (`# EOF` last in
//! OpenMetrics); a family is kept or dropped whole.
//!
//! A filter names a family as exposed: its OpenMetrics name (`x` for a
//! counter whose samples are `x_total`), or, for a counter, its samples'
//! name (`x_total`, how the text format 0.0.4 names it). A name no family
//! has is simply absent. `collect[]` is not taken: node_exporter gives it
//! collector names, which this endpoint has none of.

use std::collections::BTreeSet;

/// The most `name[]` filters a request may give (`400` beyond).
pub const MAX_FILTERS: usize = 256;

/// The first part of the endpoint's own families' names
/// (`perfabi_exporter_…`, spec §5.5): a segment's family named so is left
/// out of the page.
pub const OWN_PREFIX: &str = "perfabi_exporter_";

/// The families a request asks for: `None` for all.
pub type Selection = Option<BTreeSet<String>>;

/// The `name[]` filters of `query` (the request target's query, without
/// `?`), form-decoded (`%5B%5D`, `+`): `Ok(None)` when there is none,
/// the reason of a `400` when there are more than [`MAX_FILTERS`]. Other
/// parameters are ignored.
pub fn selection(query: Option<&str>) -> Result<Selection, String> {
    let Some(q) = query else { return Ok(None) };
    let mut names = BTreeSet::new();
    let mut given = 0usize;
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        if k == "name[]" {
            given += 1;
            if given > MAX_FILTERS {
                return Err(format!(
                    "more than {MAX_FILTERS} name[] filters: ask for fewer families at a time"
                ));
            }
            names.insert(v.into_owned());
        }
    }
    Ok((given > 0).then_some(names))
}

/// One family of a page: its lines' byte range, name and type.
struct Block<'a> {
    range: std::ops::Range<usize>,
    /// The name its metadata lines give.
    name: &'a str,
    /// Its `# TYPE` (`counter`, `gauge`, `histogram`…), if given.
    typ: Option<&'a str>,
}

impl Block<'_> {
    /// Whether `wanted` names this family (see the module's note).
    fn named(&self, wanted: &str) -> bool {
        named(self.name, self.typ == Some("counter"), wanted)
    }
}

/// Whether `wanted` names the family `name` (a counter, if `counter`,
/// answers to its name with and without `_total`: see the module's note).
pub fn named(name: &str, counter: bool, wanted: &str) -> bool {
    name == wanted
        || counter
            && (wanted.strip_suffix("_total") == Some(name)
                || name.strip_suffix("_total") == Some(wanted))
}

/// Whether `selection` keeps the family `name` (all are kept when it is
/// `None`).
pub fn selected(selection: &Selection, name: &str, counter: bool) -> bool {
    selection
        .as_ref()
        .is_none_or(|names| names.iter().any(|n| named(name, counter, n)))
}

/// The metadata line's family name, if `line` is one.
fn meta_name(line: &str) -> Option<(&str, &str, &str)> {
    let rest = line.strip_prefix("# ")?;
    let (kw, rest) = rest.split_once(' ')?;
    if !matches!(kw, "TYPE" | "HELP" | "UNIT") {
        return None;
    }
    let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((kw, name, value))
}

/// The families of `page`, in order, up to its `# EOF`.
fn blocks(page: &str) -> Vec<Block<'_>> {
    let mut out: Vec<Block<'_>> = Vec::new();
    let mut at = 0usize;
    for line in page.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let text = line.trim_end_matches('\n');
        if text == "# EOF" {
            break;
        }
        match meta_name(text) {
            Some((kw, name, value)) => {
                let same = out
                    .last()
                    .is_some_and(|b| b.range.end == start && b.name == name);
                if !same {
                    out.push(Block {
                        range: start..start,
                        name,
                        typ: None,
                    });
                }
                let b = out.last_mut().unwrap_or_else(|| unreachable!());
                if kw == "TYPE" {
                    b.typ = Some(value);
                }
                b.range.end = at;
            }
            None => {
                if let Some(b) = out.last_mut() {
                    b.range.end = at;
                }
            }
        }
    }
    out
}

/// `page` without the families `drop` picks (their names returned), the
/// rest byte for byte, `# EOF` kept.
fn without(page: &str, drop: impl Fn(&Block<'_>) -> bool) -> (String, Vec<String>) {
    let blocks = blocks(page);
    let mut out = String::with_capacity(page.len());
    let mut dropped = Vec::new();
    let mut from = 0usize;
    for b in &blocks {
        if drop(b) {
            out.push_str(&page[from..b.range.start]);
            from = b.range.end;
            dropped.push(b.name.to_string());
        }
    }
    // The rest, `# EOF` included (no family is after it).
    out.push_str(&page[from..]);
    (out, dropped)
}

/// `page` with only the families `selection` names (all when `None`).
pub fn select(page: String, selection: &Selection) -> String {
    match selection {
        None => page,
        Some(names) => without(&page, |b| !names.iter().any(|n| b.named(n))).0,
    }
}

/// `page` without the segment's families named like the endpoint's own
/// ([`OWN_PREFIX`]), and those families' names (a page has one family of
/// a name).
pub fn without_own(page: String) -> (String, Vec<String>) {
    if !page.contains(OWN_PREFIX) {
        return (page, Vec::new());
    }
    without(&page, |b| b.name.starts_with(OWN_PREFIX))
}

/// `page` with `own` (the endpoint's own families) before its `# EOF`, or
/// at its end when it has none.
pub fn with_own(mut page: String, own: &str) -> String {
    if page.ends_with("# EOF\n") {
        let at = page.len() - "# EOF\n".len();
        page.insert_str(at, own);
    } else {
        page.push_str(own);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: &str = "# TYPE perfabi_a counter\n# HELP perfabi_a A\nperfabi_a_total 1\n\
        # TYPE perfabi_b gauge\n# UNIT perfabi_b bytes\n# HELP perfabi_b B\nperfabi_b{x=\"# TYPE\"} 2\n\
        # TYPE perfabi_h histogram\n# HELP perfabi_h H\nperfabi_h_bucket{le=\"+Inf\"} 3\nperfabi_h_count 3\nperfabi_h_sum 9\n\
        # EOF\n";
    const TEXT: &str =
        "# HELP perfabi_a_total A\n# TYPE perfabi_a_total counter\nperfabi_a_total 1\n\
        # HELP perfabi_b B\n# TYPE perfabi_b gauge\nperfabi_b 2\n";

    fn sel(names: &[&str]) -> Selection {
        Some(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn filters_from_the_query() {
        assert_eq!(selection(None), Ok(None));
        assert_eq!(selection(Some("")), Ok(None));
        assert_eq!(selection(Some("debug=1")), Ok(None));
        assert_eq!(
            selection(Some(
                "name[]=perfabi_a&name%5B%5D=perfabi_%62&name[]=a+b&x=y"
            )),
            Ok(sel(&["perfabi_a", "perfabi_b", "a b"]))
        );
        assert_eq!(selection(Some("name[]=")), Ok(sel(&[""])));
        let many = vec!["name[]=x"; MAX_FILTERS].join("&");
        assert_eq!(selection(Some(&many)), Ok(sel(&["x"])));
        assert!(selection(Some(&format!("{many}&name[]=y")))
            .unwrap_err()
            .contains("more than 256"));
    }

    #[test]
    fn families_are_kept_whole_by_name() {
        assert_eq!(select(OM.to_string(), &None), OM);
        let a = "# TYPE perfabi_a counter\n# HELP perfabi_a A\nperfabi_a_total 1\n";
        assert_eq!(
            select(OM.into(), &sel(&["perfabi_a"])),
            format!("{a}# EOF\n")
        );
        assert_eq!(
            select(OM.into(), &sel(&["perfabi_a_total"])),
            format!("{a}# EOF\n")
        );
        let b = "# TYPE perfabi_b gauge\n# UNIT perfabi_b bytes\n# HELP perfabi_b B\nperfabi_b{x=\"# TYPE\"} 2\n";
        assert_eq!(
            select(OM.into(), &sel(&["perfabi_b", "nothing"])),
            format!("{b}# EOF\n")
        );
        // A histogram by its family name, not its samples'.
        assert!(select(OM.into(), &sel(&["perfabi_h"])).contains("perfabi_h_sum 9\n"));
        assert_eq!(select(OM.into(), &sel(&["perfabi_h_bucket"])), "# EOF\n");
        // No gauge is named by `_total`.
        assert_eq!(select(OM.into(), &sel(&["perfabi_b_total"])), "# EOF\n");
        assert_eq!(select(OM.into(), &sel(&[])), "# EOF\n");
        // The text format names a counter by its samples.
        let text_a =
            "# HELP perfabi_a_total A\n# TYPE perfabi_a_total counter\nperfabi_a_total 1\n";
        assert_eq!(select(TEXT.into(), &sel(&["perfabi_a"])), text_a);
        assert_eq!(select(TEXT.into(), &sel(&["perfabi_a_total"])), text_a);
        assert_eq!(
            select(TEXT.into(), &sel(&["perfabi_b"])),
            "# HELP perfabi_b B\n# TYPE perfabi_b gauge\nperfabi_b 2\n"
        );
    }

    #[test]
    fn own_names_are_left_out_and_own_families_go_before_eof() {
        let page = format!(
            "# TYPE perfabi_exporter_x gauge\n# HELP perfabi_exporter_x X\nperfabi_exporter_x 1\n{OM}"
        );
        let (kept, dropped) = without_own(page);
        assert_eq!(kept, OM);
        assert_eq!(dropped, ["perfabi_exporter_x"]);
        assert_eq!(without_own(OM.into()), (OM.to_string(), vec![]));
        let own = "# TYPE process_open_fds gauge\nprocess_open_fds 7\n";
        assert!(with_own(OM.into(), own).ends_with(&format!("perfabi_h_sum 9\n{own}# EOF\n")));
        assert_eq!(with_own(TEXT.into(), own), format!("{TEXT}{own}"));
    }
}
