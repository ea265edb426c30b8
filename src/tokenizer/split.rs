//! Hand-written pre-tokenizers, one per family of tiktoken split patterns.
//!
//! Each function returns where the piece that starts at byte `i` ends, exactly as the leftmost-
//! first regex match of the encoding's pattern would (the patterns are quoted on each function).
//! They read the text once, left to right, in constant stack space, so a megabyte-long run of one
//! character is as cheap as any other megabyte. They are the fast paths of the patterns that
//! pattern.rs runs generically; tests.rs compares both with tiktoken-rs (which runs the patterns
//! with fancy-regex) on the corpus and on generated text.

use super::classes::{LETTER, LOWER, NUMBER, SPACE, UPPER};

static CLASS_INDEX: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/classes.index"));
static CLASS_BLOCKS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/classes.blocks"));

/// The class flags of a code point (see classes.rs).
#[inline]
pub fn class_of(cp: u32) -> u8 {
    let cp = cp as usize;
    if cp < 256 {
        // The first block is always code points 0..=255.
        return CLASS_BLOCKS[cp];
    }
    let at = (cp >> 8) * 2;
    let block = u16::from_le_bytes([CLASS_INDEX[at], CLASS_INDEX[at + 1]]) as usize;
    CLASS_BLOCKS[block * 256 + (cp & 0xFF)]
}

/// The code point that starts at byte `i` of valid UTF-8, and its length in bytes.
#[inline]
pub(super) fn char_at(b: &[u8], i: usize) -> (u32, usize) {
    let b0 = b[i] as u32;
    if b0 < 0x80 {
        (b0, 1)
    } else if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F), 2)
    } else if b0 < 0xF0 {
        let cp = ((b0 & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F);
        (cp, 3)
    } else {
        let cp = ((b0 & 0x07) << 18)
            | ((b[i + 1] as u32 & 0x3F) << 12)
            | ((b[i + 2] as u32 & 0x3F) << 6)
            | (b[i + 3] as u32 & 0x3F);
        (cp, 4)
    }
}

/// The class flags of the character at byte `i`, or 0 past the end.
#[inline]
fn class_at(b: &[u8], i: usize) -> u8 {
    if i < b.len() {
        class_of(char_at(b, i).0)
    } else {
        0
    }
}

/// `[^\s\p{L}\p{N}]`
#[inline]
fn is_other(flags: u8) -> bool {
    flags & (LETTER | NUMBER | SPACE) == 0
}

/// The end of the run of characters from `i` whose flags satisfy `keep`.
#[inline]
fn run_end(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() {
        let (c, len) = char_at(b, i);
        if !keep(class_of(c)) {
            break;
        }
        i += len;
    }
    i
}

/// The whitespace run that starts at `i` (a whitespace character): its end, and where its last
/// character starts.
#[inline]
fn space_run(b: &[u8], i: usize) -> (usize, usize) {
    let mut last = i;
    let mut end = i;
    while end < b.len() {
        let (c, len) = char_at(b, end);
        if class_of(c) & SPACE == 0 {
            break;
        }
        last = end;
        end += len;
    }
    (end, last)
}

/// `\p{N}{1,3}` from `i` (a number character).
#[inline]
fn up_to_three_numbers(b: &[u8], i: usize) -> usize {
    let mut end = i;
    for _ in 0..3 {
        if end >= b.len() {
            break;
        }
        let (c, len) = char_at(b, end);
        if class_of(c) & NUMBER == 0 {
            break;
        }
        end += len;
    }
    end
}

/// `'` followed by one of `s t re ve m ll d`, compared case-insensitively as the regex crate
/// does (simple case folding adds only U+017F LATIN SMALL LETTER LONG S, which folds to `s`).
/// Returns the end of the contraction that starts at `i`, if there is one.
#[inline]
fn contraction(b: &[u8], i: usize, ignore_case: bool) -> Option<usize> {
    if b.get(i) != Some(&b'\'') {
        return None;
    }
    let fold = |c: u8| {
        if ignore_case {
            c.to_ascii_lowercase()
        } else {
            c
        }
    };
    let at = |k: usize| b.get(i + k).map_or(0, |&c| fold(c));
    match at(1) {
        b's' | b't' | b'm' | b'd' => Some(i + 2),
        b'r' | b'v' if at(2) == b'e' => Some(i + 3),
        b'l' if at(2) == b'l' => Some(i + 3),
        0xC5 if ignore_case && b.get(i + 2) == Some(&0xBF) => Some(i + 3),
        _ => None,
    }
}

/// o200k_base and o200k_harmony:
///
/// ```text
/// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
/// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
/// |\p{N}{1,3}
/// | ?[^\s\p{L}\p{N}]+[\r\n/]*
/// |\s*[\r\n]+
/// |\s+(?!\S)
/// |\s+
/// ```
pub fn o200k(b: &[u8], i: usize) -> usize {
    let (c, len) = char_at(b, i);
    let flags = class_of(c);
    let prefix = c != '\r' as u32 && c != '\n' as u32 && flags & (LETTER | NUMBER) == 0;
    if prefix || flags & LETTER != 0 {
        // The optional prefix is greedy: first try with it, then without.
        let starts = if prefix {
            [Some(i + len), Some(i)]
        } else {
            [Some(i), None]
        };
        // Alternative 1: UPPER* LOWER+ contraction?. UPPER* is greedy; when the character after
        // the UPPER run is not LOWER, backtracking gives characters back until one that is both
        // (Lm, Lo, M) can start LOWER+.
        for start in starts.into_iter().flatten() {
            let mut end = start;
            let mut last_lower = None;
            while end < b.len() {
                let (c, len) = char_at(b, end);
                let f = class_of(c);
                if f & UPPER == 0 {
                    break;
                }
                if f & LOWER != 0 {
                    last_lower = Some(end);
                }
                end += len;
            }
            let lower_start = if class_at(b, end) & LOWER != 0 {
                end
            } else if let Some(at) = last_lower {
                at
            } else {
                continue;
            };
            let lower_end = run_end(b, lower_start, |f| f & LOWER != 0);
            return contraction(b, lower_end, true).unwrap_or(lower_end);
        }
        // Alternative 2: UPPER+ LOWER* contraction?.
        for start in starts.into_iter().flatten() {
            if class_at(b, start) & UPPER != 0 {
                let upper_end = run_end(b, start, |f| f & UPPER != 0);
                let lower_end = run_end(b, upper_end, |f| f & LOWER != 0);
                return contraction(b, lower_end, true).unwrap_or(lower_end);
            }
        }
    }
    if flags & NUMBER != 0 {
        return up_to_three_numbers(b, i);
    }
    let start = if c == ' ' as u32 { i + 1 } else { i };
    if start < b.len() && is_other(class_at(b, start)) {
        let mut end = run_end(b, start, is_other);
        while end < b.len() && matches!(b[end], b'\r' | b'\n' | b'/') {
            end += 1;
        }
        return end;
    }
    // Only whitespace is left.
    let (end, last) = space_run(b, i);
    if let Some(newline) = b[i..end].iter().rposition(|&c| c == b'\r' || c == b'\n') {
        return i + newline + 1;
    }
    if end == b.len() || last == i {
        return end;
    }
    last
}

/// cl100k_base:
///
/// ```text
/// '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+
/// |\s++$|\s*[\r\n]|\s+(?!\S)|\s
/// ```
pub fn cl100k(b: &[u8], i: usize) -> usize {
    if let Some(end) = contraction(b, i, true) {
        return end;
    }
    let (c, len) = char_at(b, i);
    let flags = class_of(c);
    if flags & LETTER != 0 {
        return run_end(b, i, |f| f & LETTER != 0);
    }
    if c != '\r' as u32
        && c != '\n' as u32
        && flags & NUMBER == 0
        && class_at(b, i + len) & LETTER != 0
    {
        return run_end(b, i + len, |f| f & LETTER != 0);
    }
    if flags & NUMBER != 0 {
        return up_to_three_numbers(b, i);
    }
    let start = if c == ' ' as u32 { i + 1 } else { i };
    if start < b.len() && is_other(class_at(b, start)) {
        let mut end = run_end(b, start, is_other);
        while end < b.len() && matches!(b[end], b'\r' | b'\n') {
            end += 1;
        }
        return end;
    }
    let (end, last) = space_run(b, i);
    if end == b.len() {
        return end;
    }
    if let Some(newline) = b[i..end].iter().rposition(|&c| c == b'\r' || c == b'\n') {
        return i + newline + 1;
    }
    if last > i {
        return last;
    }
    i + len
}

/// r50k_base and p50k_base:
///
/// ```text
/// '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
/// ```
pub fn gpt2(b: &[u8], i: usize) -> usize {
    if let Some(end) = contraction(b, i, false) {
        return end;
    }
    let (c, len) = char_at(b, i);
    let start = if c == ' ' as u32 { i + 1 } else { i };
    if start < b.len() {
        let flags = class_at(b, start);
        if flags & LETTER != 0 {
            return run_end(b, start, |f| f & LETTER != 0);
        }
        if flags & NUMBER != 0 {
            return run_end(b, start, |f| f & NUMBER != 0);
        }
        if is_other(flags) {
            return run_end(b, start, is_other);
        }
    }
    let (end, last) = space_run(b, i);
    if end == b.len() {
        return end;
    }
    if last > i {
        return last;
    }
    i + len
}
