//! The scales of access frequency (0..=1) every DAMON view draws with: a
//! ramp of characters for text without colour, and a perceptual colour map
//! (viridis: dark blue for idle, yellow for hottest, even steps of
//! lightness, readable to the colour-blind and in grey) for colour, the
//! one the images of [`super::plot`] use (plotters' `ViridisRGB`).

use plotters::style::colors::colormaps::ViridisRGB;

/// Characters from idle (0 %) to hottest (100 %), in even steps.
pub const RAMP: &str = " .:-=+*#%@";

/// The character of a cell nothing monitored covers (distinct from 0 %,
/// a blank).
pub const UNMONITORED: char = '░';

/// The step of [`RAMP`] for frequency `f` (clamped to 0..=1): 0 to 9,
/// rounded to the nearest.
pub fn level(f: f64) -> usize {
    let top = RAMP.len() - 1;
    ((f.clamp(0.0, 1.0) * top as f64).round() as usize).min(top)
}

/// The character of frequency `f`.
pub fn char_of(f: f64) -> char {
    char::from(RAMP.as_bytes()[level(f)])
}

/// The colour of frequency `f` (clamped to 0..=1; not a number: 0), as
/// red, green, blue.
pub fn rgb(f: f64) -> (u8, u8, u8) {
    let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    let c = ViridisRGB::get_color(f);
    (c.0, c.1, c.2)
}

/// The nearest colour of the 256-colour terminal palette's 6 × 6 × 6 cube
/// (indices 16 to 231; xterm's levels 0, 95, 135, 175, 215, 255).
pub fn ansi256((r, g, b): (u8, u8, u8)) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let nearest = |v: u8| {
        (0..6u8)
            .min_by_key(|&k| LEVELS[usize::from(k)].abs_diff(v))
            .unwrap_or(0)
    };
    16 + 36 * nearest(r) + 6 * nearest(g) + nearest(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_steps() {
        assert_eq!(char_of(0.0), ' ');
        assert_eq!(char_of(0.04), ' ');
        assert_eq!(char_of(0.95), '@');
        assert_eq!(char_of(1.0), '@');
        assert_eq!(char_of(0.5), '+');
        assert_eq!(char_of(2.0), '@');
        assert!(!RAMP.contains(UNMONITORED));
    }

    #[test]
    fn colours_run_from_dark_blue_to_yellow_ever_lighter() {
        assert_eq!(rgb(0.0), (68, 1, 84));
        assert_eq!(rgb(-1.0), (68, 1, 84));
        assert_eq!(rgb(f64::NAN), (68, 1, 84));
        assert_eq!(rgb(1.0), (254, 232, 37));
        assert_eq!(rgb(7.0), (254, 232, 37));
        // Perceived lightness (Rec. 709 luma) rises with frequency.
        let luma = |(r, g, b): (u8, u8, u8)| {
            0.2126 * f64::from(r) + 0.7152 * f64::from(g) + 0.0722 * f64::from(b)
        };
        let lumas: Vec<f64> = (0..=20).map(|k| luma(rgb(f64::from(k) / 20.0))).collect();
        assert!(lumas.windows(2).all(|w| w[1] > w[0]), "{lumas:?}");
        assert_eq!(ansi256((0, 0, 0)), 16);
        assert_eq!(ansi256((255, 255, 255)), 231);
        assert_eq!(ansi256((0xfd, 0xe7, 0x25)), 16 + 36 * 5 + 6 * 4);
    }
}
