//! The heatmap and the working-set plot as images (SVG or PNG), drawn with
//! plotters, and the safe write of an image file.
//!
//! Both are drawn in memory at a fixed size ([`SIZE`]) and returned as the
//! file's bytes; [`write`](fn@write) puts them at a path that may lie in a folder
//! other users can write. Text is laid out with the DejaVu Sans subset
//! compiled into perfabi-cat (`fonts/README.md`): a PNG needs no font
//! installed, and an SVG names `sans-serif` and leaves the glyphs to its
//! viewer.
//!
//! The heatmap draws a [`Grid`] and nothing else: one rectangle per run of
//! equally coloured cells of a row (a run of one cell in the worst case),
//! coloured from a palette of [`LEVELS`] steps of viridis, and cells that
//! nothing monitored in the neutral [`NONE_COLOR`], which no step of the
//! palette is.

use std::ffi::{OsStr, OsString};
use std::fmt::Display;
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use perfabi_shm::safe_open::escape_path;
use perfabi_shm::safe_open::{FileKind, Folder};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;
use plotters_backend::{BackendColor, BackendCoord, DrawingErrorKind};

use super::grid::Grid;
use crate::human;

/// An image format, from the output file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics: text as text, any viewer's font.
    Svg,
    /// A PNG bitmap of [`SIZE`] pixels, text drawn with the compiled-in
    /// font.
    Png,
}

/// The format of an output file: `.svg` or `.png` (any case), else an
/// error naming both.
pub fn format_of(path: &Path) -> Result<Format, String> {
    let ext = path.extension().map(|e| e.to_ascii_lowercase());
    match ext.as_ref().and_then(|e| e.to_str()) {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        _ => Err(format!(
            "{}: the image format comes from the file's extension: .svg or .png",
            escape_path(path)
        )),
    }
}

/// Labels of a plot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    /// The title above the plot.
    pub title: String,
}

/// Width and height of every image, pixels.
pub const SIZE: (u32, u32) = (960, 540);

/// Most address rows a heatmap draws: each gets at least one pixel of the
/// plot area (a test checks that the plot area is that tall).
pub const MAX_ROWS: usize = 400;

/// Most time columns a heatmap draws: each gets at least one pixel.
pub const MAX_COLS: usize = 640;

/// Steps of the heatmap's colour map: 0 % is the first, 100 % the last
/// (a cell is drawn in the step nearest its frequency).
pub const LEVELS: usize = 32;

/// The colour of a heatmap cell that nothing monitored: a neutral grey,
/// unlike every step of viridis (none is grey) and the white page.
pub const NONE_COLOR: RGBColor = RGBColor(200, 200, 200);

/// The family name the compiled-in font is registered under.
const FAMILY: &str = "sans-serif";

/// DejaVu Sans, cut down to Latin-1 and a few symbols (21,652 bytes; the
/// Bitstream Vera and Arev licences: `fonts/LICENSE-DejaVu`).
const FONT: &[u8] = include_bytes!("../../fonts/DejaVuSans-subset.ttf");

/// Registers [`FONT`] with plotters once; every text plotters lays out or
/// draws needs it (ab_glyph has no other font).
fn font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the compiled-in font is not a valid TrueType font".to_string())
    })
    .clone()
}

/// The palette of the heatmap: [`LEVELS`] evenly spaced steps of viridis,
/// dark purple (0 %) to yellow (100 %).
pub fn palette() -> [RGBColor; LEVELS] {
    std::array::from_fn(|k| ViridisRGB::get_color(k as f64 / (LEVELS - 1) as f64))
}

/// The palette step of a cell: `None` for a cell nothing monitored (or a
/// value that is not a number), else the step nearest its frequency,
/// clamped to 0..=1.
fn level(cell: Option<f64>) -> Option<usize> {
    let f = cell.filter(|f| f.is_finite())?.clamp(0.0, 1.0);
    Some(((f * (LEVELS - 1) as f64).round() as usize).min(LEVELS - 1))
}

/// The access-frequency heatmap of `grid`: time across (seconds since the
/// window's start), addresses up (hexadecimal, low addresses at the
/// bottom), a colour scale at the right. At most [`MAX_ROWS`] ×
/// [`MAX_COLS`] cells; a grid without cells draws empty axes. Returns the
/// file's bytes.
pub fn heatmap(grid: &Grid, labels: &Labels, format: Format) -> Result<Vec<u8>, String> {
    if grid.rows() > MAX_ROWS || grid.cols() > MAX_COLS {
        return Err(format!(
            "a heatmap of {} rows × {} columns is more than an image shows: at most {MAX_ROWS} × {MAX_COLS}",
            grid.rows(),
            grid.cols()
        ));
    }
    render(format, &Heatmap { grid, labels })
}

/// The working set size over time: `series` as `(t_ns, bytes)` points
/// joined by a line, and a dashed line for each of `percentiles`
/// (`(p, bytes)`), named in a legend. Returns the file's bytes.
pub fn wss(
    series: &[(u64, u64)],
    percentiles: &[(u32, u64)],
    labels: &Labels,
    format: Format,
) -> Result<Vec<u8>, String> {
    render(
        format,
        &Wss {
            series,
            percentiles,
            labels,
        },
    )
}

/// Writes `bytes` to `path`, which may be in a folder other users can
/// write (`/tmp`): to a new temporary file beside it (created with
/// `O_EXCL`, never through a link), then renamed over `path`. An existing
/// `path` must be a regular file: a link, a FIFO or a device there is
/// refused (a link planted between that check and the rename is replaced,
/// never written through). Mode 0644 less the umask. A one-line error
/// naming the path otherwise; no temporary file is left behind.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let failed = |e: io::Error| format!("cannot write {}: {e}", escape_path(path));
    // perfabi-shm's message escapes the path itself.
    let (folder, name) = Folder::of(path).map_err(|e| e.to_string())?;
    // Only a regular file is replaced: renaming over a link, a device or
    // a FIFO would swap out what it is (`--output /dev/stdout` as root
    // would replace the system's /dev/stdout link with a file).
    if let Some(e) = folder.stat(&name).map_err(failed)? {
        if e.kind != FileKind::Regular {
            return Err(format!(
                "{} is {}, not a regular file: perfabi-cat writes images only over regular files (choose another path)",
                escape_path(path),
                e.kind.describe()
            ));
        }
    }
    let (tmp, mut file) = create_temp(&folder, &name).map_err(failed)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| folder.rename(&tmp, &name));
    if let Err(e) = written {
        // Best effort: the error that matters is the one reported.
        let _ = folder.unlink(&tmp);
        return Err(failed(e));
    }
    Ok(())
}

/// Most bytes of the target's name kept in a temporary name (a file name
/// has at most 255).
const TEMP_NAME_MAX: usize = 200;

/// Creates a new temporary file for `name` in `folder`:
/// `.NAME.PID.NONCE.tmp` (NAME cut to [`TEMP_NAME_MAX`] bytes), another
/// NONCE if that name is taken. Returns its name and the file.
fn create_temp(folder: &Folder, name: &OsStr) -> io::Result<(OsString, std::fs::File)> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let stem = &name.as_bytes()[..name.len().min(TEMP_NAME_MAX)];
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..100 {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut tmp = OsString::from(".");
        tmp.push(OsStr::from_bytes(stem));
        tmp.push(format!(".{}.{nanos:x}{n}.tmp", std::process::id()));
        match folder.create_new(&tmp, 0o644) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Something drawn on a drawing area of any backend.
trait Plot {
    /// Draws on `root`, the whole image.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// `what` drawn at [`SIZE`] in `format`: the file's bytes.
fn render(format: Format, what: &impl Plot) -> Result<Vec<u8>, String> {
    font()?;
    match format {
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
                what.draw(&root)?;
                root.present().map_err(drawing)?;
            }
            Ok(svg.into_bytes())
        }
        Format::Png => {
            let (w, h) = SIZE;
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let root =
                    Bitmap::new(BitMapBackend::with_buffer(&mut rgb, SIZE))?.into_drawing_area();
                what.draw(&root)?;
                root.present().map_err(drawing)?;
            }
            encode_png(&rgb, SIZE)
        }
    }
}

/// plotters' bitmap backend with text drawn right.
///
/// plotters 0.3.7 draws ab_glyph text with each glyph's outline at the
/// pen position, without its left side bearing, and at whole pixels: "4242"
/// reads "42 42" and a decimal point sits against the digit before it.
/// This draws the same glyphs at the same size and baseline (so plotters'
/// layout, which measures advances correctly, still fits), each where the
/// font puts it. Everything else is the bitmap backend's.
struct Bitmap<'a> {
    inner: BitMapBackend<'a>,
    font: ab_glyph::FontRef<'static>,
}

impl<'a> Bitmap<'a> {
    /// `inner`, with text in the compiled-in font.
    fn new(inner: BitMapBackend<'a>) -> Result<Self, String> {
        let font = ab_glyph::FontRef::try_from_slice(FONT)
            .map_err(|e| format!("the compiled-in font: {e}"))?;
        Ok(Bitmap { inner, font })
    }
}

/// A drawing error of the bitmap backend.
type BitmapError = DrawingErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

impl DrawingBackend for Bitmap<'_> {
    type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), BitmapError> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), BitmapError> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), BitmapError> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), BitmapError> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), BitmapError> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), BitmapError> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), BitmapError> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), BitmapError> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), BitmapError> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: plotters_backend::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), BitmapError> {
        use ab_glyph::{Font, ScaleFont};
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        // Placed as plotters' default draw_text places its layout box.
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let size = style.size() as f32;
        let font = self.font.as_scaled(size);
        // plotters' baseline: half the size below the top of the box.
        let baseline = size / 2.0;
        let mut pen = 0f32;
        let mut prev = None;
        let mut drawn = Ok(());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(font.scale(), ab_glyph::point(pen, baseline));
            pen += font.h_advance(id);
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            outline.draw(|x, y, coverage| {
                let (gx, gy) = (b.min.x as i32 + x as i32, b.min.y as i32 + y as i32);
                let (tx, ty) = trans.transform(gx + dx - min_x, gy + dy - min_y);
                if drawn.is_ok() {
                    drawn = self
                        .inner
                        .draw_pixel((pos.0 + tx, pos.1 + ty), color.mix(f64::from(coverage)));
                }
            });
            drawn.as_ref().map_err(|_| {
                DrawingErrorKind::FontError(Box::new(std::io::Error::other("cannot draw text")))
            })?;
        }
        drawn
    }
}

/// An RGB buffer of `size` pixels as a PNG file.
fn encode_png(rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let failed = |e: png::EncodingError| format!("cannot encode the PNG: {e}");
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(failed)?;
    writer.write_image_data(rgb).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(out)
}

/// A drawing error as a message.
fn drawing(e: impl Display) -> String {
    format!("cannot draw the plot: {e}")
}

/// Most characters of a title drawn.
const TITLE_MAX: usize = 200;

/// The title of `labels` as drawn: control characters (which an SVG may
/// not hold) as spaces, at most [`TITLE_MAX`] characters.
fn title(labels: &Labels) -> String {
    labels
        .title
        .chars()
        .take(TITLE_MAX)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A text style of the compiled-in font.
fn text(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

/// Nanoseconds as seconds, for an axis.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A linear axis with the ticks given (plotters' `with_key_points` of an
/// `f64` range has no label formatting to override): labels come from the
/// mesh's label formatter, and there are no light lines.
struct Ticked {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    /// The axis over `range` with ticks at `ticks`.
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Ticked {
        Ticked {
            linear: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// Pixels of the colour scale at the heatmap's right.
const SCALE_WIDTH: u32 = 130;

/// The heatmap of a grid.
struct Heatmap<'a> {
    grid: &'a Grid,
    labels: &'a Labels,
}

impl Plot for Heatmap<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let g = self.grid;
        root.fill(&WHITE).map_err(drawing)?;
        let (w, _) = root.dim_in_pixel();
        let (main, scale) = root.split_horizontally(w.saturating_sub(SCALE_WIDTH));
        // The grid's extent; a grid without edges gets one second and 4 KiB.
        let (t0, t1) = extent(&g.times, 1_000_000_000);
        let (a0, a1) = extent(&g.addrs, 4096);
        // Addresses are drawn as offsets from a0 (exact in f64 below 2^53,
        // well under a pixel off above), and labelled exactly.
        let ticks = address_ticks(a0, a1);
        let offsets: Vec<f64> = ticks.iter().map(|&a| (a - a0) as f64).collect();
        let label = |y: &f64| {
            let nearest = ticks
                .iter()
                .zip(&offsets)
                .min_by(|(_, p), (_, q)| (*p - y).abs().total_cmp(&(*q - y).abs()));
            match nearest {
                Some((a, _)) => format!("{a:#x}"),
                None => format!("{:#x}", a0.saturating_add(*y as u64)),
            }
        };
        let span = (a1 - a0) as f64;
        let mut chart = ChartBuilder::on(&main)
            .caption(title(self.labels), text(20))
            .margin(10)
            .x_label_area_size(50)
            .y_label_area_size(150)
            .build_cartesian_2d(secs(t0)..secs(t1), Ticked::new(0.0..span, offsets.clone()))
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time (s)")
            .y_desc("address")
            .x_labels(10)
            .y_label_formatter(&label)
            .label_style(text(13))
            .axis_desc_style(text(15))
            .draw()
            .map_err(drawing)?;
        // Nothing monitored, unless a cell says otherwise.
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(secs(t0), 0.0), (secs(t1), span)],
                NONE_COLOR.filled(),
            )))
            .map_err(drawing)?;
        let colors = palette();
        chart
            .draw_series(runs(g).into_iter().map(|(r, c0, c1, k)| {
                let y0 = g.addrs[r].saturating_sub(a0);
                let y1 = g.addrs[r + 1].saturating_sub(a0);
                Rectangle::new(
                    [
                        (secs(g.times[c0]), y0 as f64),
                        (secs(g.times[c1]), y1 as f64),
                    ],
                    colors[k].filled(),
                )
            }))
            .map_err(drawing)?;
        let plot = chart.plotting_area().get_pixel_range();
        draw_scale(&scale, (plot.1.start, plot.1.end), &colors)
    }
}

/// The first and last of `edges` if they make a range, else a range of
/// `len` from the first (0 without one), within `u64`.
fn extent(edges: &[u64], len: u64) -> (u64, u64) {
    match (edges.first(), edges.last()) {
        (Some(&a), Some(&b)) if b > a => (a, b),
        (Some(&a), _) if a.checked_add(len).is_none() => (u64::MAX - len, u64::MAX),
        (Some(&a), _) => (a, a + len),
        _ => (0, len),
    }
}

/// The runs of equally coloured monitored cells of `g`: `(row, first
/// column, end column, palette step)`, each row left to right; cells
/// nothing monitored are left out (the background shows). A grid whose
/// cells do not match its edges yields nothing.
fn runs(g: &Grid) -> Vec<(usize, usize, usize, usize)> {
    let (rows, cols) = (g.rows(), g.cols());
    let mut out = Vec::new();
    if g.cells.len() != rows * cols {
        return out;
    }
    for r in 0..rows {
        let mut c = 0;
        while c < cols {
            let k = level(g.cells[r * cols + c]);
            let mut end = c + 1;
            while end < cols && level(g.cells[r * cols + end]) == k {
                end += 1;
            }
            if let Some(k) = k {
                out.push((r, c, end, k));
            }
            c = end;
        }
    }
    out
}

/// Tick addresses of the range `a0..=a1`: the multiples in it of the
/// smallest power of two that cuts it in at most 8 (so that they read
/// round in hexadecimal); the two ends if fewer than two are.
fn address_ticks(a0: u64, a1: u64) -> Vec<u64> {
    let span = u128::from(a1 - a0).max(1);
    let mut step: u128 = 1;
    while span / step > 8 {
        step <<= 1;
    }
    let first = u128::from(a0).div_ceil(step) * step;
    let ticks: Vec<u64> = (0..)
        .map(|k| first + k * step)
        .take_while(|&a| a <= u128::from(a1))
        .filter_map(|a| u64::try_from(a).ok())
        .collect();
    if ticks.len() >= 2 {
        ticks
    } else {
        vec![a0, a1]
    }
}

/// The colour scale in `area`, beside a plot area spanning pixels `y0..y1`
/// of the image: the palette bottom (0 %) to top (100 %), labelled, and
/// a swatch of the colour of cells nothing monitored.
fn draw_scale<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (y0, y1): (i32, i32),
    colors: &[RGBColor; LEVELS],
) -> Result<(), String> {
    // The area's own coordinates are pixels from its top left corner; the
    // image's y is the same (it is a column of the whole height).
    let (x0, x1) = (10, 30);
    let height = (y1 - y0).max(LEVELS as i32);
    let y_of = |k: usize| y1 - (height * k as i32) / LEVELS as i32;
    for (k, c) in colors.iter().enumerate() {
        area.draw(&Rectangle::new(
            [(x0, y_of(k + 1)), (x1, y_of(k))],
            c.filled(),
        ))
        .map_err(drawing)?;
    }
    area.draw(&Rectangle::new([(x0, y_of(LEVELS)), (x1, y1)], BLACK))
        .map_err(drawing)?;
    let left_middle = text(13).pos(Pos::new(HPos::Left, VPos::Center));
    for pct in [0, 25, 50, 75, 100] {
        let y = y1 - (height * pct) / 100;
        area.draw(&PathElement::new([(x1, y), (x1 + 4, y)], BLACK))
            .map_err(drawing)?;
        area.draw(&Text::new(
            format!("{pct} %"),
            (x1 + 7, y),
            left_middle.clone(),
        ))
        .map_err(drawing)?;
    }
    let desc = text(15)
        .transform(FontTransform::Rotate90)
        .pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(
        "access frequency",
        (x1 + 62, (y0 + y1) / 2),
        desc,
    ))
    .map_err(drawing)?;
    // Below the scale, level with the time axis's labels.
    let sy = y1 + 14;
    area.draw(&Rectangle::new(
        [(x0, sy), (x1, sy + 12)],
        NONE_COLOR.filled(),
    ))
    .map_err(drawing)?;
    area.draw(&Text::new("not monitored", (x1 + 7, sy + 6), left_middle))
        .map_err(drawing)?;
    Ok(())
}

/// Colours of the percentile lines, in turn (Okabe and Ito's, told apart
/// with any colour vision, and unlike the line's blue).
const PERCENTILE_COLORS: [RGBColor; 4] = [
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
];

/// Most points of a working-set line drawn with a mark each.
const MAX_MARKS: usize = 200;

/// The colour of the working-set line.
const WSS_COLOR: RGBColor = RGBColor(0, 90, 181);

/// The working-set plot.
struct Wss<'a> {
    series: &'a [(u64, u64)],
    percentiles: &'a [(u32, u64)],
    labels: &'a Labels,
}

impl Plot for Wss<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(drawing)?;
        let lo = self.series.iter().map(|&(t, _)| t).min();
        let hi = self.series.iter().map(|&(t, _)| t).max();
        let (x0, x1) = match (lo, hi) {
            (Some(a), Some(b)) if b > a => (secs(a), secs(b)),
            (Some(a), _) => (secs(a), secs(a) + 1.0),
            _ => (0.0, 1.0),
        };
        let top = self
            .series
            .iter()
            .map(|&(_, b)| b)
            .chain(self.percentiles.iter().map(|&(_, b)| b))
            .max()
            .unwrap_or(0);
        let ticks = byte_ticks(top);
        let y1 = ticks.last().copied().unwrap_or(1024.0);
        let label = |v: &f64| human::bytes(*v);
        let mut chart = ChartBuilder::on(root)
            .caption(title(self.labels), text(20))
            .margin(10)
            .margin_right(25)
            .x_label_area_size(50)
            .y_label_area_size(100)
            .build_cartesian_2d(x0..x1, Ticked::new(0.0..y1, ticks))
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("working set size")
            .x_labels(10)
            .y_label_formatter(&label)
            .label_style(text(13))
            .axis_desc_style(text(15))
            // Grid lines at the ticks only, faint.
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(drawing)?;
        let points: Vec<(f64, f64)> = self
            .series
            .iter()
            .map(|&(t, b)| (secs(t), b as f64))
            .collect();
        // A mark on each aggregation while they are far enough apart to
        // tell; past that, the line alone.
        let marks = if points.len() <= MAX_MARKS { 3 } else { 0 };
        chart
            .draw_series(LineSeries::new(points, WSS_COLOR.stroke_width(2)).point_size(marks))
            .map_err(drawing)?
            .label("working set size")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], WSS_COLOR.stroke_width(2)));
        for (i, &(p, b)) in self.percentiles.iter().enumerate() {
            let color = PERCENTILE_COLORS[i % PERCENTILE_COLORS.len()];
            let style = color.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x0, b as f64), (x1, b as f64)],
                    8,
                    6,
                    style,
                ))
                .map_err(drawing)?
                .label(format!("p{p}: {}", human::bytes(b as f64)))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(text(13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(drawing)?;
        if self.series.is_empty() {
            let area = chart.plotting_area().strip_coord_spec();
            let (w, h) = area.dim_in_pixel();
            area.draw(&Text::new(
                "no aggregation in this window",
                (w as i32 / 2, h as i32 / 2),
                text(15).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(drawing)?;
        }
        Ok(())
    }
}

/// Tick values of a byte axis from 0 to a little above `top` (at least
/// 1 KiB): steps of ½, 1, 2 or 5 × 10^k of the largest binary unit not
/// above `top`, so that `human::bytes` labels them roundly; 3 to 9 ticks.
fn byte_ticks(top: u64) -> Vec<f64> {
    // Room above the highest point, so that it is not on the frame.
    let top = (top as f64 * 1.05).max(1024.0);
    let mut unit = 1f64;
    while unit * 1024.0 <= top {
        unit *= 1024.0;
    }
    let x = top / unit;
    let mut step = 0.5f64;
    while x / step > 8.0 {
        step = match step {
            s if s < 1.0 => 1.0,
            s => {
                let decade = 10f64.powf(s.log10().floor());
                match (s / decade).round() as u32 {
                    1 => 2.0 * decade,
                    2 => 5.0 * decade,
                    _ => 10.0 * decade,
                }
            }
        };
    }
    let step = step * unit;
    let n = (top / step).ceil() as u64;
    (0..=n).map(|k| k as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::super::grid::build;
    use super::super::timeline::{from_record, tests};
    use super::*;
    use perfabi_test_harness::image::{
        attr, elements, hex, plot_area, rects, texts, Area, Image, Rgb,
    };

    /// A grid of a hot 4 MiB band at the bottom of 64 MiB, ten
    /// aggregations 100 ms apart, over `addr`.
    fn hot_band(addr: (u64, u64), rows: usize) -> Grid {
        let tl = &from_record(&tests::hot_band()).unwrap()[0];
        build(tl, addr, tl.span().unwrap(), rows, 10)
    }

    /// A plotters colour as the harness's.
    fn rgb(c: RGBColor) -> Rgb {
        (c.0, c.1, c.2)
    }

    /// The plot area of a heatmap image: its cells are palette-coloured or
    /// NONE_COLOR.
    fn heat_area(img: &Image) -> Area {
        let colors: Vec<Rgb> = palette().iter().map(|&c| rgb(c)).collect();
        plot_area(img, |c| colors.contains(&c) || c == rgb(NONE_COLOR))
    }

    #[test]
    fn the_palette_is_distinct_and_unlike_the_background() {
        let p = palette();
        for (i, a) in p.iter().enumerate() {
            assert_ne!(*a, NONE_COLOR);
            assert_ne!(*a, WHITE);
            assert_ne!(*a, BLACK);
            for b in &p[i + 1..] {
                assert_ne!(a, b, "palette steps repeat");
            }
        }
        assert_eq!(level(Some(0.0)), Some(0));
        assert_eq!(level(Some(1.0)), Some(LEVELS - 1));
        assert_eq!(level(Some(7.0)), Some(LEVELS - 1));
        assert_eq!(level(Some(f64::NAN)), None);
        assert_eq!(level(None), None);
    }

    #[test]
    fn png_heatmap_shows_the_hot_band_at_the_bottom_across_the_whole_time() {
        let g = hot_band((0, 64 << 20), 64);
        let labels = Labels {
            title: "hot band".into(),
        };
        let img = Image::decode(&heatmap(&g, &labels, Format::Png).unwrap());
        assert_eq!((img.w, img.h), (SIZE.0 as usize, SIZE.1 as usize));
        let area = heat_area(&img);
        let (w, h) = (area.x1 - area.x0, area.y1 - area.y0);
        assert!(
            w >= MAX_COLS as f64 && h >= MAX_ROWS as f64,
            "plot area {area:?} smaller than the largest grid"
        );
        let p = palette();
        let (hot, cold) = (rgb(p[LEVELS - 1]), rgb(p[0]));
        let (x0, x1) = (area.x0 as usize, area.x1 as usize);
        let (y0, y1) = (area.y0 as usize, area.y1 as usize);
        // Each row of the plot area is all hot or all cold.
        let mut hot_rows = Vec::new();
        for y in y0..y1 {
            let row: Vec<Rgb> = (x0..x1).map(|x| img.at(x, y)).collect();
            if row.iter().all(|&c| c == hot) {
                hot_rows.push(y);
            } else {
                assert!(row.iter().all(|&c| c == cold), "row {y} mixes colours");
            }
        }
        // The hot rows: one band, ending at the bottom, 4/64 of the height.
        let first = hot_rows[0];
        assert_eq!(hot_rows, (first..y1).collect::<Vec<_>>());
        let expected = h * 4.0 / 64.0;
        let got = hot_rows.len() as f64;
        assert!(
            (got - expected).abs() <= 2.0,
            "band {got} px, {expected} expected"
        );
        // Every cell is hot when the range is the hot band.
        let all_hot = hot_band((0, 4 << 20), 16);
        let img = Image::decode(&heatmap(&all_hot, &labels, Format::Png).unwrap());
        let area = heat_area(&img);
        for y in area.y0 as usize..area.y1 as usize {
            for x in area.x0 as usize..area.x1 as usize {
                assert_eq!(img.at(x, y), hot, "pixel {x},{y}");
            }
        }
    }

    #[test]
    fn svg_heatmap_shows_the_hot_band_at_the_bottom_across_the_whole_time() {
        let g = hot_band((0, 64 << 20), 64);
        let labels = Labels {
            title: "hot <band> & more".into(),
        };
        let svg = String::from_utf8(heatmap(&g, &labels, Format::Svg).unwrap()).unwrap();
        let t = texts(&svg);
        for want in [
            "hot &lt;band&gt; &amp; more",
            "time (s)",
            "address",
            "access frequency",
            "0 %",
            "100 %",
            "not monitored",
            "0x0",
            "0x4000000",
            "0.0",
            "1.0",
        ] {
            assert!(t.contains(&want), "{want:?} not in {t:?}");
        }
        let p = palette();
        let (hot, cold, none) = (
            hex(rgb(p[LEVELS - 1])),
            hex(rgb(p[0])),
            hex(rgb(NONE_COLOR)),
        );
        let all = rects(&svg);
        // The background of the plot area: the rectangle of NONE_COLOR
        // that is not the scale's swatch (the widest).
        let area = all
            .iter()
            .filter(|(_, f)| *f == none)
            .map(|(a, _)| *a)
            .max_by(|a, b| (a.x1 - a.x0).total_cmp(&(b.x1 - b.x0)))
            .unwrap();
        let inside = |a: &Area| a.x0 >= area.x0 && a.x1 <= area.x1;
        let cells: Vec<&(Area, String)> = all.iter().filter(|(a, _)| inside(a)).collect();
        let hot_cells: Vec<Area> = cells
            .iter()
            .filter(|(_, f)| *f == hot)
            .map(|(a, _)| *a)
            .collect();
        // Each row of cells is one run: a hot one per hot row.
        assert_eq!(hot_cells.len(), 4);
        for a in &hot_cells {
            assert_eq!((a.x0, a.x1), (area.x0, area.x1), "a hot row spans the time");
        }
        let band_top = hot_cells.iter().map(|a| a.y0).fold(f64::MAX, f64::min);
        let band_bottom = hot_cells.iter().map(|a| a.y1).fold(0.0, f64::max);
        assert!((band_bottom - area.y1).abs() <= 1.0, "band at the bottom");
        let expected = (area.y1 - area.y0) * 4.0 / 64.0;
        assert!(((band_bottom - band_top) - expected).abs() <= 2.0);
        // The rest is cold: 60 rows of one cold run each, above the band.
        let cold_cells: Vec<Area> = cells
            .iter()
            .filter(|(_, f)| *f == cold)
            .map(|(a, _)| *a)
            .collect();
        assert_eq!(cold_cells.len(), 60);
        for a in &cold_cells {
            assert_eq!((a.x0, a.x1), (area.x0, area.x1));
            assert!(a.y1 <= band_top + 1.0);
        }
        assert!((cold_cells.iter().map(|a| a.y0).fold(f64::MAX, f64::min) - area.y0).abs() <= 1.0);
        // An all-hot range: no cold cell.
        let svg = heatmap(&hot_band((0, 4 << 20), 16), &labels, Format::Svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        let all = rects(&svg);
        assert_eq!(all.iter().filter(|(_, f)| *f == hot).count(), 16 + 1);
        assert_eq!(all.iter().filter(|(_, f)| *f == cold).count(), 1);
    }

    #[test]
    fn any_grid_draws_without_panicking() {
        // Characters the font does not have are drawn as its empty box.
        let labels = Labels {
            title: "日本語 🙂 \u{0} \t".into(),
        };
        let empty = Grid {
            times: vec![],
            addrs: vec![],
            cells: vec![],
        };
        let one = Grid {
            times: vec![5, 6],
            addrs: vec![u64::MAX - 1, u64::MAX],
            cells: vec![Some(0.5)],
        };
        let odd = Grid {
            times: vec![0, 10, 5],
            addrs: vec![7, 7, 3],
            cells: vec![None, Some(f64::NAN), Some(-1.0), Some(2.0)],
        };
        let short = Grid {
            times: vec![0, 1, 2],
            addrs: vec![0, 4096],
            cells: vec![Some(1.0)],
        };
        let all_none = Grid {
            times: vec![0, 1_000, 2_000],
            addrs: vec![0, 1 << 40, 1 << 41],
            cells: vec![None; 4],
        };
        for g in [empty, one, odd, short, all_none] {
            let svg = String::from_utf8(heatmap(&g, &labels, Format::Svg).unwrap()).unwrap();
            assert!(!svg.contains(['\0', '\t']), "control characters in {svg}");
            assert!(
                !heatmap(&g, &labels, Format::Png).unwrap().is_empty(),
                "{g:?}"
            );
        }
        let huge = Grid {
            times: (0..=MAX_COLS as u64 + 1).collect(),
            addrs: vec![0, 1],
            cells: vec![None; MAX_COLS + 1],
        };
        assert!(heatmap(&huge, &labels, Format::Svg)
            .unwrap_err()
            .contains("at most"));
        for f in [Format::Svg, Format::Png] {
            assert!(!wss(&[], &[], &labels, f).unwrap().is_empty());
            assert!(!wss(&[(7, 0)], &[(50, 0)], &labels, f).unwrap().is_empty());
            let big = [(0, u64::MAX), (u64::MAX, 1)];
            assert!(!wss(&big, &[(99, u64::MAX)], &labels, f).unwrap().is_empty());
        }
    }

    #[test]
    fn address_ticks_are_round_in_hex() {
        assert_eq!(
            address_ticks(0, 64 << 20),
            (0..=8).map(|k| k * (8 << 20)).collect::<Vec<u64>>()
        );
        let t = address_ticks(0x7f12_3456_0000, 0x7f12_3856_0000);
        assert!(t.len() >= 4 && t.len() <= 9, "{t:x?}");
        assert!(t.iter().all(|a| a % 0x40_0000 == 0));
        assert_eq!(address_ticks(5, 6), [5, 6]);
        assert_eq!(address_ticks(u64::MAX - 1, u64::MAX).len(), 2);
    }

    #[test]
    fn byte_ticks_are_round_binary_units() {
        let mib = (1u64 << 20) as f64;
        assert_eq!(
            byte_ticks(5 << 20),
            [
                0.0,
                mib,
                2.0 * mib,
                3.0 * mib,
                4.0 * mib,
                5.0 * mib,
                6.0 * mib
            ]
        );
        assert_eq!(
            byte_ticks(3 << 19),
            [0.0, 0.5 * mib, mib, 1.5 * mib, 2.0 * mib]
        );
        let t = byte_ticks(700 << 20);
        assert_eq!(t[1], 100.0 * mib);
        assert_eq!(*t.last().unwrap(), 800.0 * mib);
        let labels: Vec<String> = byte_ticks(300 << 30)
            .iter()
            .map(|&v| human::bytes(v))
            .collect();
        assert_eq!(labels.first().unwrap(), "0 B");
        assert!(
            labels[1..].iter().all(|l| l.ends_with(".0 GiB")),
            "{labels:?}"
        );
        assert_eq!(byte_ticks(0).last(), Some(&1024.0));
    }

    #[test]
    fn wss_svg_has_title_byte_axis_and_a_rising_line() {
        let mib = 1u64 << 20;
        let series: Vec<(u64, u64)> = (0..5).map(|i| (i * 100_000_000, (i + 1) * mib)).collect();
        let pcts = [(50, 3 * mib), (99, 5 * mib)];
        let labels = Labels {
            title: "working set of pid 42".into(),
        };
        let svg = String::from_utf8(wss(&series, &pcts, &labels, Format::Svg).unwrap()).unwrap();
        let t = texts(&svg);
        for want in [
            "working set of pid 42",
            "time (s)",
            "working set size",
            "0 B",
            "4.0 MiB",
            "p50: 3.0 MiB",
            "p99: 5.0 MiB",
        ] {
            assert!(t.contains(&want), "{want:?} not in {t:?}");
        }
        // The series' line: the polyline of its colour with five points.
        let line = elements(&svg, "polyline")
            .into_iter()
            .filter(|e| attr(e, "stroke").map(str::to_uppercase) == Some(hex(rgb(WSS_COLOR))))
            .map(|e| {
                attr(e, "points")
                    .unwrap()
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse::<i32>().unwrap(), y.parse::<i32>().unwrap())
                    })
                    .collect::<Vec<_>>()
            })
            .find(|pts| pts.len() == 5)
            .expect("no line of the series");
        for w in line.windows(2) {
            assert!(w[1].0 > w[0].0, "left to right: {line:?}");
            assert!(w[1].1 < w[0].1, "up where the series goes up: {line:?}");
        }
        // A series that falls, falls.
        let falling: Vec<(u64, u64)> = series.iter().map(|&(t, b)| (t, 6 * mib - b)).collect();
        let svg = String::from_utf8(wss(&falling, &[], &labels, Format::Svg).unwrap()).unwrap();
        assert!(!texts(&svg).iter().any(|t| t.starts_with("p50")));
        let line = elements(&svg, "polyline")
            .into_iter()
            .filter(|e| attr(e, "stroke").map(str::to_uppercase) == Some(hex(rgb(WSS_COLOR))))
            .find_map(|e| {
                let ys: Vec<i32> = attr(e, "points")?
                    .split_whitespace()
                    .filter_map(|p| p.split_once(',')?.1.parse().ok())
                    .collect();
                (ys.len() == 5).then_some(ys)
            })
            .unwrap();
        assert!(line.windows(2).all(|w| w[1] > w[0]), "{line:?}");
    }

    #[test]
    fn format_comes_from_the_extension() {
        assert_eq!(format_of(Path::new("/tmp/heat.svg")), Ok(Format::Svg));
        assert_eq!(format_of(Path::new("heat.PNG")), Ok(Format::Png));
        assert_eq!(format_of(Path::new("a.b.Svg")), Ok(Format::Svg));
        for bad in ["heat", "heat.jpg", "svg", ".png", "heat.png.txt"] {
            let e = format_of(Path::new(bad)).unwrap_err();
            assert!(e.contains(".svg") && e.contains(".png"), "{bad}: {e}");
        }
    }

    #[test]
    fn write_replaces_a_regular_target_atomically_and_refuses_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("heat.svg");
        write(&target, b"first").unwrap();
        write(&target, b"second").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"second");
        let names = |d: &Path| -> Vec<String> {
            let mut n: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(dir.path()), ["heat.svg"], "no temporary file left");
        // A link planted at the target is refused: neither followed (what
        // it names is untouched) nor replaced (it stays a link), and no
        // temporary file is left.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let planted = dir.path().join("planted.png");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = write(&planted, b"image").unwrap_err();
        assert!(e.contains("a symbolic link") && !e.contains('\n'), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let md = std::fs::symlink_metadata(&planted).unwrap();
        assert!(md.file_type().is_symlink());
        assert_eq!(names(dir.path()), ["heat.svg", "planted.png", "victim"]);
        // Nor a FIFO (or a device: /dev/stdout is a link to one).
        let fifo = dir.path().join("fifo.svg");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = write(&fifo, b"image").unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        std::fs::remove_file(&fifo).unwrap();
        // Errors name the path, on one line.
        let missing = dir.path().join("no/such/folder/x.png");
        let e = write(&missing, b"x").unwrap_err();
        assert!(e.contains("no/such/folder") && !e.contains('\n'), "{e}");
        let e = write(dir.path(), b"x").unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let e = write(&sub, b"x").unwrap_err();
        assert!(e.contains("sub") && !e.contains('\n'), "{e}");
        assert_eq!(
            names(dir.path()),
            ["heat.svg", "planted.png", "sub", "victim"]
        );
        // A name as long as a name can be still gets a temporary name.
        let long = dir.path().join(format!("{}.svg", "x".repeat(251)));
        write(&long, b"long").unwrap();
        assert_eq!(std::fs::read(&long).unwrap(), b"long");
    }
}
