//! Image sizing for token counting: this module owns reading image dimensions from inline
//! image data (base64 payloads and `data:` URLs holding PNG, GIF, JPEG or WebP) and the
//! providers' image token formulas (OpenAI tiles and patches, Anthropic pixel area). It only
//! looks at bytes it is handed and never fetches URLs.
//!
//! The headers are read here rather than by the `imagesize` crate (0.14), which was measured
//! against this module's tests: it reads a lossy WebP's height with the scale bits (16584 for
//! 200, so a different count), gives up on a JPEG with fill bytes before its frame header (which
//! the JPEG standard allows, and which then counted as an unread image), and needs more of a
//! GIF than its size fields; it also brings twenty formats ctx does not count, in about 1,700
//! lines against these 100. The base64 decoding is the `base64` crate's.

/// Decoded bytes examined first; JPEG may need more if its SOF marker comes later.
const FIRST_CHUNK: usize = 64 * 1024;

/// Returns (width, height) of the image inside a `data:<mime>;base64,<payload>` URL.
pub fn data_url_dimensions(url: &str) -> Option<(u32, u32)> {
    let scheme = url.get(..5)?;
    if !scheme.eq_ignore_ascii_case("data:") {
        return None;
    }
    let (meta, payload) = url[5..].split_once(',')?;
    if !meta
        .split(';')
        .any(|p| p.trim().eq_ignore_ascii_case("base64"))
    {
        return None;
    }
    base64_dimensions(payload)
}

/// Returns (width, height) of the image in a bare base64 payload, decoding only what it needs.
///
/// The payload may use the standard or the URL-safe alphabet (even both), be wrapped with
/// spaces, tabs and line breaks, and have padding or not: its first `=` ends it. A character
/// outside the alphabets is an error where it is decoded; one beyond what the header needs is
/// never looked at.
pub fn base64_dimensions(b64: &str) -> Option<(u32, u32)> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    // The payload in the standard alphabet, without whitespace, up to its padding.
    let payload = b64.split('=').next().unwrap_or_default();
    let chars = payload
        .bytes()
        .filter(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        .map(|c| match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        });
    let mut limit = FIRST_CHUNK;
    loop {
        // The fewest characters that decode to `limit` bytes (6 bits each).
        let mut rest = chars.clone();
        let mut text: Vec<u8> = rest
            .by_ref()
            .take(limit.saturating_mul(4).div_ceil(3))
            .collect();
        let exhausted = rest.next().is_none();
        if text.len() % 4 == 1 {
            // A last character alone holds no whole byte: checked, not decoded.
            let last = text.pop()?;
            if !base64::alphabet::STANDARD
                .as_str()
                .as_bytes()
                .contains(&last)
            {
                return None;
            }
        }
        let mut bytes = LENIENT.decode(&text).ok()?;
        bytes.truncate(limit);
        if let Some(dims) = bytes_dimensions(&bytes) {
            return Some(dims);
        }
        if exhausted || !bytes.starts_with(&[0xFF, 0xD8]) {
            return None;
        }
        limit = limit.saturating_mul(16);
    }
}

/// Returns (width, height) of a PNG, GIF, JPEG or WebP image, sniffed by its magic bytes.
pub fn bytes_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let dims = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(bytes)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some((u32::from(le16(bytes, 6)?), u32::from(le16(bytes, 8)?)))
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        jpeg(bytes)
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        webp(bytes)
    } else {
        None
    };
    dims.filter(|&(w, h)| w > 0 && h > 0)
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
}

fn png(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
    Some((w, h))
}

fn jpeg(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Scan to the next 0xFF (skipping entropy-coded data), then past fill bytes.
        while *b.get(i)? != 0xFF {
            i += 1;
        }
        while *b.get(i)? == 0xFF {
            i += 1;
        }
        let marker = *b.get(i)?;
        i += 1;
        match marker {
            // Stuffed zero, TEM, RSTn and SOI carry no length.
            0x00 | 0x01 | 0xD0..=0xD8 => continue,
            0xD9 => return None,
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                let h = be16(b, i + 3)?;
                let w = be16(b, i + 5)?;
                return Some((u32::from(w), u32::from(h)));
            }
            _ => {
                let len = usize::from(be16(b, i)?);
                if len < 2 {
                    return None;
                }
                i += len;
            }
        }
    }
}

fn webp(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8 " => {
            if b.get(23..26)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            let w = le16(b, 26)? & 0x3FFF;
            let h = le16(b, 28)? & 0x3FFF;
            Some((u32::from(w), u32::from(h)))
        }
        b"VP8L" => {
            if *b.get(20)? != 0x2F {
                return None;
            }
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        _ => None,
    }
}

/// How an OpenAI model turns an image into tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpenAiImageScheme {
    /// 512px tiles (gpt-4o, gpt-4.1, gpt-5): `base + tile * tiles`, `base` alone at low detail.
    Tiles { base: u32, tile: u32 },
    /// 32px patches capped at 1536 (gpt-4.1-mini, gpt-4.1-nano, o4-mini), times `multiplier`.
    Patches { multiplier: f64 },
}

/// Scales (w, h) by `factor`, rounding to whole pixels and keeping each side at least 1.
fn scale(w: f64, h: f64, factor: f64) -> (f64, f64) {
    ((w * factor).round().max(1.0), (h * factor).round().max(1.0))
}

/// `ceil(x)` that forgives floating-point noise just above an integer.
fn ceil_eps(x: f64) -> f64 {
    (x - 1e-9).ceil().max(0.0)
}

/// Tokens an OpenAI model charges for a `width` x `height` image under `scheme`.
pub fn openai_image_tokens(
    width: u32,
    height: u32,
    low_detail: bool,
    scheme: &OpenAiImageScheme,
) -> u32 {
    match *scheme {
        OpenAiImageScheme::Tiles { base, tile } => {
            if low_detail || width == 0 || height == 0 {
                return base;
            }
            let (mut w, mut h) = (f64::from(width), f64::from(height));
            if w > 2048.0 || h > 2048.0 {
                (w, h) = scale(w, h, 2048.0 / w.max(h));
            }
            if w.min(h) > 768.0 {
                (w, h) = scale(w, h, 768.0 / w.min(h));
            }
            let tiles = ((w / 512.0).ceil() * (h / 512.0).ceil()) as u32;
            base.saturating_add(tile.saturating_mul(tiles))
        }
        OpenAiImageScheme::Patches { multiplier } => {
            let patches = f64::from(openai_image_patches(width, height));
            ceil_eps(patches * multiplier) as u32
        }
    }
}

/// Number of 32px patches (at most 1536) an image occupies in OpenAI's patch scheme.
pub fn openai_image_patches(width: u32, height: u32) -> u32 {
    const MAX: u64 = 1536;
    let raw = u64::from(width.div_ceil(32)) * u64::from(height.div_ceil(32));
    if raw <= MAX {
        return raw as u32;
    }
    let (w, h) = (f64::from(width), f64::from(height));
    let shrink = (32.0 * 32.0 * MAX as f64 / (w * h)).sqrt();
    let (w1, h1) = (w * shrink, h * shrink);
    let fit = |side: f64| (side / 32.0).floor() / (side / 32.0);
    let adjust = fit(w1).min(fit(h1));
    let (w2, h2) = scale(w1, h1, adjust);
    let patches = ((w2 / 32.0).ceil() * (h2 / 32.0).ceil()) as u64;
    patches.min(MAX) as u32
}

/// Tokens Anthropic charges for a `width` x `height` image (at most 1600).
pub fn anthropic_image_tokens(width: u32, height: u32) -> u32 {
    const MAX_EDGE: f64 = 1568.0;
    const MAX_AREA: f64 = 1600.0 * 750.0;
    if width == 0 || height == 0 {
        return 0;
    }
    let (mut w, mut h) = (f64::from(width), f64::from(height));
    if w.max(h) > MAX_EDGE {
        (w, h) = scale(w, h, MAX_EDGE / w.max(h));
    }
    if w * h > MAX_AREA {
        let factor = (MAX_AREA / (w * h)).sqrt();
        w = (w * factor).floor().max(1.0);
        h = (h * factor).floor().max(1.0);
    }
    (ceil_eps(w * h / 750.0) as u32).min(1600)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(data: &[u8], url_safe: bool) -> String {
        let table: &[u8; 64] = if url_safe {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        } else {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        };
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(table[(n >> (18 - 6 * i) & 63) as usize]));
            }
            if !url_safe {
                out.push_str(&"=".repeat(3 - chunk.len()));
            }
        }
        out
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        v.extend(w.to_be_bytes());
        v.extend(h.to_be_bytes());
        v.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]); // depth, color, methods, CRC
        v
    }

    fn gif(w: u16, h: u16) -> Vec<u8> {
        let mut v = b"GIF89a".to_vec();
        v.extend(w.to_le_bytes());
        v.extend(h.to_le_bytes());
        v.extend([0, 0, 0]);
        v
    }

    fn jpeg(sof: u8, w: u16, h: u16) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        v.extend(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        v.extend([0xFF, 0xFF, sof, 0x00, 0x11, 0x08]); // includes one fill byte
        v.extend(h.to_be_bytes());
        v.extend(w.to_be_bytes());
        v.extend([3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xFF, 0xD9]);
        v
    }

    fn webp(chunk: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut v = b"RIFF\0\0\0\0WEBP".to_vec();
        v.extend(chunk);
        v.extend((data.len() as u32).to_le_bytes());
        v.extend(data);
        v
    }

    fn samples() -> Vec<(Vec<u8>, (u32, u32))> {
        let vp8l = (299u32) | (149 << 14);
        let mut lossless = vec![0x2F];
        lossless.extend(vp8l.to_le_bytes());
        vec![
            (png(640, 480), (640, 480)),
            (gif(33, 17), (33, 17)),
            (jpeg(0xC0, 1024, 768), (1024, 768)),
            (jpeg(0xC2, 12, 3000), (12, 3000)),
            (
                webp(
                    b"VP8 ",
                    &[0x50, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x90, 0x01, 0xC8, 0x40],
                ),
                (400, 200),
            ),
            (webp(b"VP8L", &lossless), (300, 150)),
            (
                webp(b"VP8X", &[0x10, 0, 0, 0, 0x1F, 0x4E, 0, 0xFF, 0xFF, 0]),
                (20000, 65536),
            ),
        ]
    }

    #[test]
    fn sniffs_every_format() {
        for (bytes, dims) in samples() {
            assert_eq!(bytes_dimensions(&bytes), Some(dims), "{bytes:x?}");
        }
    }

    #[test]
    fn truncated_and_junk_inputs_never_panic() {
        for (bytes, dims) in samples() {
            // Every prefix parses to nothing or to the right size, and stays parsed once it does.
            let results: Vec<_> = (0..=bytes.len())
                .map(|n| bytes_dimensions(&bytes[..n]))
                .collect();
            assert!(results.iter().all(|r| r.is_none() || *r == Some(dims)));
            assert!(results.windows(2).all(|p| p[0].is_none() || p[1].is_some()));
            assert!(results[..10].iter().all(Option::is_none));
        }
        let (full_png, full_jpeg) = (png(5, 5), jpeg(0xC0, 5, 5));
        assert_eq!(bytes_dimensions(&full_png[..23]), None);
        assert_eq!(bytes_dimensions(&full_jpeg[..28]), None);
        for (bytes, _) in &samples()[4..] {
            assert_eq!(bytes_dimensions(&bytes[..bytes.len() - 2]), None);
        }
        assert_eq!(bytes_dimensions(b""), None);
        assert_eq!(bytes_dimensions(b"hello world"), None);
        assert_eq!(
            bytes_dimensions(&[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01]),
            None
        );
        assert_eq!(bytes_dimensions(&[0xFF, 0xD8, 0xFF, 0xD9]), None);
        assert_eq!(bytes_dimensions(&png(0, 10)), None);
        let mut not_ihdr = png(1, 1);
        not_ihdr[12] = b'X';
        assert_eq!(bytes_dimensions(&not_ihdr), None);
    }

    #[test]
    fn data_urls_round_trip() {
        for (bytes, dims) in samples() {
            let url = format!("data:image/x;base64,{}", b64(&bytes, false));
            assert_eq!(data_url_dimensions(&url), Some(dims));
            assert_eq!(base64_dimensions(&b64(&bytes, true)), Some(dims));
        }
        let wrapped: String = b64(&png(7, 9), false)
            .as_bytes()
            .chunks(10)
            .map(|c| format!("{}\r\n ", String::from_utf8_lossy(c)))
            .collect();
        assert_eq!(base64_dimensions(&wrapped), Some((7, 9)));
        let payload = b64(&png(7, 9), false);
        assert_eq!(
            data_url_dimensions(&format!("DATA:image/png;BASE64,{payload}")),
            Some((7, 9))
        );
        assert_eq!(
            data_url_dimensions(&format!("data:image/png,{payload}")),
            None
        );
        assert_eq!(data_url_dimensions("https://example.com/a.png"), None);
        assert_eq!(data_url_dimensions("data:"), None);
        assert_eq!(base64_dimensions("iVBO*Rw0K"), None);
    }

    /// What the payload may hold around its image, as ctx has always read it.
    #[test]
    fn base64_padding_alphabets_and_stray_characters() {
        let standard = b64(&png(7, 9), false);
        let url_safe = b64(&png(7, 9), true);
        assert_eq!(standard.len() % 4, 0);
        // A last character alone, too short for a byte, is ignored, but must be base64.
        assert_eq!(base64_dimensions(&format!("{standard}A")), Some((7, 9)));
        assert_eq!(base64_dimensions(&format!("{standard}-")), Some((7, 9)));
        assert_eq!(base64_dimensions(&format!("{standard}!")), None);
        // The first `=` ends the payload: nothing after it is read.
        assert_eq!(base64_dimensions(&format!("{standard}=!!")), Some((7, 9)));
        assert_eq!(base64_dimensions(&format!("{standard}===")), Some((7, 9)));
        assert_eq!(base64_dimensions(&url_safe), Some((7, 9)));
        // The two alphabets may be mixed.
        let jpeg = jpeg(0xC0, 5, 7);
        let mixed = format!("{}{}", &b64(&jpeg, true)[..4], &b64(&jpeg, false)[4..]);
        assert!(mixed.starts_with("_9j_") && mixed.contains('/'), "{mixed}");
        assert_eq!(base64_dimensions(&mixed), Some((5, 7)));
        // Whitespace anywhere, but only these four.
        let spaced: String = standard.chars().flat_map(|c| [c, ' ', '\t']).collect();
        assert_eq!(base64_dimensions(&spaced), Some((7, 9)));
        assert_eq!(base64_dimensions(&format!("\u{a0}{standard}")), None);
        assert_eq!(
            base64_dimensions(&format!("{}\u{b}", &standard[..20])),
            None
        );
        // Bits left over past the last byte need not be zero.
        let mut bytes = png(7, 9);
        bytes.push(0);
        let padded = b64(&bytes, false);
        let loose = padded.replace("AA==", "AB==");
        assert_ne!(loose, padded);
        assert_eq!(base64_dimensions(&loose), Some((7, 9)));
    }

    #[test]
    fn large_payload_decodes_only_the_header() {
        let mut bytes = png(3000, 2000);
        bytes.resize(2 * 1024 * 1024, 0);
        // An invalid character at the end proves the tail is never decoded.
        let payload = format!("{}!!!!", b64(&bytes, false));
        assert_eq!(base64_dimensions(&payload), Some((3000, 2000)));
    }

    #[test]
    fn jpeg_with_late_sof_decodes_more() {
        let mut bytes = vec![0xFF, 0xD8];
        for _ in 0..3 {
            bytes.extend([0xFF, 0xE1, 0xFF, 0xFF]);
            bytes.resize(bytes.len() + 0xFFFD, 0);
        }
        bytes.extend(&jpeg(0xC1, 800, 600)[2..]);
        assert!(bytes.len() > FIRST_CHUNK);
        assert_eq!(base64_dimensions(&b64(&bytes, false)), Some((800, 600)));
    }

    #[test]
    fn openai_tiles_and_patches() {
        let tiles = OpenAiImageScheme::Tiles {
            base: 85,
            tile: 170,
        };
        let patches = OpenAiImageScheme::Patches { multiplier: 1.62 };
        for (w, h, low_detail, scheme, tokens) in [
            (1024, 1024, false, tiles, 765),
            (2048, 4096, false, tiles, 1105),
            (4096, 8192, true, tiles, 85),
            (512, 512, false, tiles, 255),
            (1024, 1024, false, patches, 1659),
            (1024, 1024, true, patches, 1659),
        ] {
            assert_eq!(openai_image_tokens(w, h, low_detail, &scheme), tokens);
        }
        assert_eq!(openai_image_patches(1024, 1024), 1024);
        assert_eq!(openai_image_patches(1800, 2400), 1452);
        assert!(openai_image_patches(u32::MAX, 1) <= 1536);
    }

    #[test]
    fn anthropic() {
        assert_eq!(anthropic_image_tokens(1092, 1092), 1590);
        assert_eq!(anthropic_image_tokens(200, 200), 54);
        assert_eq!(anthropic_image_tokens(1000, 1000), 1334);
        for (w, h) in [
            (1568, 1568),
            (4000, 3000),
            (u32::MAX, u32::MAX),
            (1, u32::MAX),
            (1200, 1001),
        ] {
            assert!(anthropic_image_tokens(w, h) <= 1600, "{w}x{h}");
        }
    }
}
