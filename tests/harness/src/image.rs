//! Reading back the images perfabi-cat draws (its DAMON plots), for tests
//! that check them by their pixels and shapes rather than by eye: a PNG
//! decoded to RGB pixels, the plot area found by its colours, and an SVG's
//! elements, attributes, texts and rectangles.

/// A colour: red, green, blue.
pub type Rgb = (u8, u8, u8);

/// A decoded PNG: width, height, RGB pixels row by row.
pub struct Image {
    /// Width, pixels.
    pub w: usize,
    /// Height, pixels.
    pub h: usize,
    /// `w × h` pixels of three bytes, the top row first.
    pub rgb: Vec<u8>,
}

impl Image {
    /// Decodes an RGB PNG (panics on anything else: a test's failure).
    pub fn decode(bytes: &[u8]) -> Image {
        let dec = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = dec.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        rgb.truncate(info.buffer_size());
        Image {
            w: info.width as usize,
            h: info.height as usize,
            rgb,
        }
    }

    /// The pixel at column `x`, row `y` (0, 0 the top left).
    pub fn at(&self, x: usize, y: usize) -> Rgb {
        let i = (y * self.w + x) * 3;
        (self.rgb[i], self.rgb[i + 1], self.rgb[i + 2])
    }
}

/// A box of pixels or SVG units: `x0..x1`, `y0..y1` (ends excluded).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    /// Left.
    pub x0: f64,
    /// Right (excluded).
    pub x1: f64,
    /// Top.
    pub y0: f64,
    /// Bottom (excluded).
    pub y1: f64,
}

/// The plot area of a heatmap image: the box of the pixels `is_cell`
/// accepts, in the first run of columns that have many of them (a colour
/// scale is a second run, to the right; a pixel of text may happen to
/// have such a colour).
pub fn plot_area(img: &Image, is_cell: impl Fn(Rgb) -> bool) -> Area {
    let many = |n: usize| n >= 50;
    let cols: Vec<bool> = (0..img.w)
        .map(|x| many((0..img.h).filter(|&y| is_cell(img.at(x, y))).count()))
        .collect();
    let x0 = cols.iter().position(|&c| c).expect("no plot area");
    let x1 = x0 + cols[x0..].iter().position(|&c| !c).unwrap_or(img.w - x0);
    let rows: Vec<usize> = (0..img.h)
        .filter(|&y| many((x0..x1).filter(|&x| is_cell(img.at(x, y))).count()))
        .collect();
    Area {
        x0: x0 as f64,
        x1: x1 as f64,
        y0: rows[0] as f64,
        y1: (rows[rows.len() - 1] + 1) as f64,
    }
}

/// The value of attribute `name` in an SVG element's text.
pub fn attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = element.find(&key)? + key.len();
    let len = element[start..].find('"')?;
    Some(&element[start..start + len])
}

/// The elements `<tag …>` of an SVG document (their text up to `>`).
pub fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    svg.match_indices(&open)
        .map(|(i, _)| {
            let end = svg[i..].find('>').unwrap();
            &svg[i..i + end]
        })
        .collect()
}

/// The texts of an SVG, trimmed.
pub fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text ")
        .skip(1)
        .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim()))
        .collect()
}

/// A colour as SVG writes it: `#RRGGBB`.
pub fn hex((r, g, b): Rgb) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// The rectangles of an SVG, each with its fill (upper case).
pub fn rects(svg: &str) -> Vec<(Area, String)> {
    elements(svg, "rect")
        .into_iter()
        .map(|e| {
            let n = |k| attr(e, k).unwrap().parse::<f64>().unwrap();
            let (x, y) = (n("x"), n("y"));
            let area = Area {
                x0: x,
                x1: x + n("width"),
                y0: y,
                y1: y + n("height"),
            };
            (area, attr(e, "fill").unwrap().to_uppercase())
        })
        .collect()
}
