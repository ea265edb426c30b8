//! Text-level shrinking of single texts: middle-out clipping of tool results to a token budget,
//! cutting long call-argument values to their start, and the placeholder templates that replace
//! cleared results.
//!
//! This module owns the clip marker (`marker_text`, `is_clipped`), the cut marker of shortened
//! argument values (`cut_marker`, `is_cut_marker`) and the placeholder template language
//! ([`Template`], [`Var`]), so that `prune`, `fit` and anything that must recognise their output
//! agree on one spelling. It works on plain strings only: it must not know about messages, JSON
//! or dialects, must not decide *which* results to clip or clear (that is the commands' job), and
//! counts tokens only through [`Encoding::count`], never through the BPE library directly.
//! Clipping and cutting guarantee their result fits the budget, marker included, so doing it
//! again changes nothing (SPEC §4 `ctx prune --max-tool-tokens`, `--shorten-args`).

use anyhow::Result;

use crate::tokenizer::Encoding;

/// The placeholder `ctx prune` puts in place of a cleared tool result unless told otherwise: the
/// call, the size, whether it failed, then the output's first line, its error and test-outcome
/// lines and its last line (lines left out when empty).
pub const DEFAULT_PLACEHOLDER: &str =
    "[ctx: cleared output of {tool}({args}): {tokens} tokens{status}]\n{head}\n{salient}\n{tail}";

/// What a clip marker starts with, before the omitted count.
const MARKER_OPEN: &str = "[... ";
/// What a clip marker ends with, after the omitted count.
const MARKER_CLOSE: &str = " tokens omitted by ctx ...]";
/// The result when not even the full marker fits the budget.
const SHORT_MARKER: &str = "[...]";
/// How far (in chars) a cut may move to land on a line break or whitespace.
const SNAP_WINDOW: usize = 32;

/// The marker put between the kept head and tail: `"\n[... {omitted} tokens omitted by ctx ...]\n"`.
pub fn marker_text(omitted: usize) -> String {
    format!("\n{MARKER_OPEN}{omitted}{MARKER_CLOSE}\n")
}

/// True when `text` contains a clip marker made by [`marker_text`] (the bracketed part, newlines
/// optional); false on the degraded results `"[...]"` and `""`.
pub fn is_clipped(text: &str) -> bool {
    text.match_indices(MARKER_OPEN).any(|(i, _)| {
        let rest = &text[i + MARKER_OPEN.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(MARKER_CLOSE)
    })
}

/// Clips `text` middle-out so that it counts at most `max_tokens`; `Ok(None)` if it already fits.
///
/// The result is `head + marker_text(omitted) + tail`, where `head` is a prefix and `tail` a
/// suffix of `text` (about 60% / 40% of the kept chars), cut on char boundaries and, where a line
/// break or whitespace lies within a few dozen chars, moved back (head) or forward (tail) onto it.
/// `omitted` is the original count minus the counts of head and tail (saturating). The kept size
/// is the largest a galloping binary search finds, with O(log n) counts.
///
/// The whole result, marker included, always counts at most `max_tokens`, so clipping the result
/// again returns `Ok(None)`. When the budget is too small for any head or tail, the result
/// degrades to the shortest that fits, in this order: the bare marker (`marker_text(total)`), then
/// `"[...]"`, then the empty string.
pub fn clip_middle(enc: Encoding, text: &str, max_tokens: usize) -> Result<Option<String>> {
    let total = enc.count(text);
    if total <= max_tokens {
        return Ok(None);
    }
    let bare = marker_text(total);
    if enc.count(&bare) > max_tokens {
        let short = if enc.count(SHORT_MARKER) <= max_tokens {
            SHORT_MARKER
        } else {
            ""
        };
        return Ok(Some(short.to_string()));
    }

    let clipper = Clipper::new(enc, text, total, max_tokens);
    // `text` is over budget, so it is not empty; keep at least one char out.
    let max_keep = clipper.chars() - 1;
    let best = bare; // the candidate for keeping 0 chars, known to fit
    if max_keep == 0 {
        return Ok(Some(best));
    }
    largest_fit(best, max_keep, max_tokens, |keep| clipper.candidate(keep)).map(Some)
}

/// The candidate for the most chars kept, up to `max_keep`, where `candidate(keep)` is the text
/// keeping about `keep` chars if it fits (fitting is monotone in `keep`) and `best` the one known
/// to fit for 0. Gallops up from a guess of one char per token (`guess`) until a size fails, then
/// bisects: O(log n) candidates.
fn largest_fit(
    mut best: String,
    max_keep: usize,
    guess: usize,
    candidate: impl Fn(usize) -> Result<Option<String>>,
) -> Result<String> {
    let (mut lo, mut hi) = (0, max_keep + 1);
    let mut probe = guess.clamp(1, max_keep.max(1));
    while lo < max_keep {
        match candidate(probe)? {
            Some(fits) => {
                best = fits;
                lo = probe;
                probe = probe.saturating_mul(2).min(max_keep);
            }
            None => {
                hi = probe;
                break;
            }
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match candidate(mid)? {
            Some(fits) => {
                best = fits;
                lo = mid;
            }
            None => hi = mid,
        }
    }
    Ok(best)
}

/// What a cut argument value ends with: `"… [ctx: 1,234 chars cut]"`.
pub fn cut_marker(chars: usize) -> String {
    format!("{CUT_OPEN}{}{CUT_CLOSE}", thousands(chars))
}

const CUT_OPEN: &str = "… [ctx: ";
const CUT_CLOSE: &str = " chars cut]";

/// True when `text` is a cut marker and nothing else (what [`clip_start`] leaves when not even
/// the start of the value fits).
pub fn is_cut_marker(text: &str) -> bool {
    text.strip_prefix(CUT_OPEN)
        .and_then(|r| r.strip_suffix(CUT_CLOSE))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b','))
}

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Cuts `text` to its start plus [`cut_marker`] so that it counts at most `max_tokens`;
/// `Ok(None)` if it already fits.
///
/// The start is the longest prefix a galloping binary search finds (O(log n) counts), moved back
/// onto a line break or whitespace when one lies within a few dozen chars; the marker gives the
/// number of chars cut. The result fits `max_tokens`, so cutting it again returns `Ok(None)`.
/// When not even the bare marker fits, the result is the bare marker (recognised by
/// [`is_cut_marker`]) if that is shorter than `text`, else `Ok(None)`.
pub fn clip_start(enc: Encoding, text: &str, max_tokens: usize) -> Result<Option<String>> {
    let total = enc.count(text);
    if total <= max_tokens {
        return Ok(None);
    }
    let clipper = Clipper::new(enc, text, total, max_tokens);
    let n = clipper.chars();
    let candidate = |keep: usize| -> Result<Option<String>> {
        let end = clipper.head_end(keep);
        let head = &text[..end];
        let cut = n - head.chars().count();
        let s = format!("{head}{}", cut_marker(cut));
        Ok((enc.count(&s) <= max_tokens).then_some(s))
    };
    let Some(best) = candidate(0)? else {
        let bare = cut_marker(n);
        return Ok((enc.count(&bare) < total).then_some(bare));
    };
    // `text` is over budget, so it is not empty; keep at least one char out.
    largest_fit(best, n - 1, max_tokens, candidate).map(Some)
}

/// Chars between two entries of a `Clipper`'s offset table.
const STRIDE: usize = 64;

/// One clipping job: where the text's chars are and the numbers every candidate needs.
struct Clipper<'a> {
    enc: Encoding,
    text: &'a str,
    /// Byte offset of every `STRIDE`th char: a table of every char's offset would take eight
    /// times a megabyte-long text's own size.
    every: Vec<usize>,
    chars: usize,
    total: usize,
    max_tokens: usize,
}

impl<'a> Clipper<'a> {
    fn new(enc: Encoding, text: &'a str, total: usize, max_tokens: usize) -> Self {
        let mut every = Vec::new();
        let mut chars = 0;
        for (i, _) in text.char_indices() {
            if chars % STRIDE == 0 {
                every.push(i);
            }
            chars += 1;
        }
        Clipper {
            enc,
            text,
            every,
            chars,
            total,
            max_tokens,
        }
    }

    fn chars(&self) -> usize {
        self.chars
    }

    /// The byte offset of char `k` (`text.len()` for `k == chars()`).
    fn offset(&self, k: usize) -> usize {
        if k >= self.chars {
            return self.text.len();
        }
        let start = self.every[k / STRIDE];
        match self.text[start..].char_indices().nth(k % STRIDE) {
            Some((i, _)) => start + i,
            None => self.text.len(),
        }
    }

    /// The clipped text keeping about `keep` chars (fewer after snapping), if it fits the budget.
    fn candidate(&self, keep: usize) -> Result<Option<String>> {
        let head_chars = (keep * 3).div_ceil(5);
        let tail_chars = keep - head_chars;
        let head = &self.text[..self.head_end(head_chars)];
        let tail = &self.text[self.tail_start(tail_chars)..];
        let kept = self.enc.count(head) + self.enc.count(tail);
        let omitted = self.total.saturating_sub(kept);
        let clipped = format!("{head}{}{tail}", marker_text(omitted));
        Ok((self.enc.count(&clipped) <= self.max_tokens).then_some(clipped))
    }

    /// Byte offset where a head of about `chars` chars ends: at a line break (before any `\r`) or
    /// whitespace up to `SNAP_WINDOW` chars back, else exactly after `chars` chars.
    fn head_end(&self, chars: usize) -> usize {
        if chars == 0 {
            return 0;
        }
        let end = self.offset(chars);
        let start = self.offset(chars.saturating_sub(SNAP_WINDOW));
        // Include the first dropped char: a break right at the cut is the best cut.
        let region = &self.text[start..self.offset((chars + 1).min(self.chars()))];
        if let Some(i) = region.rfind('\n') {
            let cut = start + i;
            return if cut > 0 && self.text.as_bytes()[cut - 1] == b'\r' {
                cut - 1
            } else {
                cut
            };
        }
        match region.rfind(char::is_whitespace) {
            // Drop the rest of a blank run too: the marker starts with its own line break.
            Some(i) => self.text[..start + i].trim_end_matches(is_blank).len(),
            None => end,
        }
    }

    /// Byte offset where a tail of about `chars` chars starts: just after a line break or
    /// whitespace up to `SNAP_WINDOW` chars forward, else exactly `chars` chars from the end.
    fn tail_start(&self, chars: usize) -> usize {
        let n = self.chars();
        if chars == 0 {
            return self.text.len();
        }
        let first = n - chars;
        let start = self.offset(first);
        // Include the last dropped char: a break right before the cut is the best cut.
        let from = self.offset(first.saturating_sub(1));
        let region = &self.text[from..self.offset((first + SNAP_WINDOW).min(n))];
        if let Some(i) = region.find('\n') {
            return (from + i + 1).max(start);
        }
        match region.char_indices().find(|(_, c)| c.is_whitespace()) {
            // Skip the rest of a blank run too, so the tail starts on a word.
            Some((i, c)) => {
                let after = (from + i + c.len_utf8()).max(start);
                self.text.len() - self.text[after..].trim_start_matches(is_blank).len()
            }
            None => start,
        }
    }
}

/// Whitespace within a line: what a cut may drop next to the whitespace it snapped to.
fn is_blank(c: char) -> bool {
    c.is_whitespace() && c != '\n' && c != '\r'
}

/// A value a placeholder slot is filled with (SPEC §4 `ctx prune --placeholder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    /// `{tool}`: the tool's name.
    Tool,
    /// `{args}`: a short form of the call's arguments.
    Args,
    /// `{tokens}`: the cleared result's tokens.
    Tokens,
    /// `{chars}`: the cleared result's chars.
    Chars,
    /// `{status}`: `, failed (exit code 1)`, `, exit code 0` or nothing.
    Status,
    /// `{head}`: the output's first non-empty line.
    Head,
    /// `{tail}`: its last non-empty line.
    Tail,
    /// `{salient}`: lines reporting errors or test outcomes, one per line.
    Salient,
}

impl Var {
    /// Every slot, as written in a template.
    const ALL: [(&'static str, Var); 8] = [
        ("{tool}", Var::Tool),
        ("{args}", Var::Args),
        ("{tokens}", Var::Tokens),
        ("{chars}", Var::Chars),
        ("{status}", Var::Status),
        ("{head}", Var::Head),
        ("{tail}", Var::Tail),
        ("{salient}", Var::Salient),
    ];

    /// The most chars a rendered value holds: longer values are clipped (ending in `…`), so a
    /// rendering is bounded and a text far longer than any rendering is never taken for one.
    pub fn max_chars(self) -> usize {
        match self {
            Var::Tokens | Var::Chars => 20,
            Var::Tool | Var::Status => 64,
            Var::Args => 80,
            Var::Head | Var::Tail => 160,
            Var::Salient => 4 * 161,
        }
    }

    fn is_number(self) -> bool {
        matches!(self, Var::Tokens | Var::Chars)
    }

    /// Only `{salient}` spans lines; every other value is one line.
    fn is_multi_line(self) -> bool {
        self == Var::Salient
    }
}

/// What a template's slots are filled with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fill<'a> {
    pub tool: &'a str,
    pub args: &'a str,
    pub tokens: usize,
    pub chars: usize,
    pub status: &'a str,
    pub head: &'a str,
    pub tail: &'a str,
    /// Lines joined with `\n`.
    pub salient: &'a str,
}

/// A placeholder template: literal text with slots (`{tool}`, `{args}`, `{tokens}`, `{chars}`,
/// `{status}`, `{head}`, `{tail}`, `{salient}`); other braces are text.
///
/// A line of the template made only of slots is left out when they are all empty, with the
/// line break before it, so a result without error lines gets no blank line where they would
/// be. Renderings are bounded ([`Var::max_chars`]) and [`Template::matches`] recognises them
/// (so a cleared result is never cleared again) in time linear in that bound, whatever the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    lines: Vec<Line>,
    /// The longest rendering, in bytes.
    max_len: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Line {
    segments: Vec<Segment>,
    /// Only slots: left out when they render empty.
    omittable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Slot(Var),
}

/// What `matches` walks: the template with its left-out lines made optional.
enum Element<'a> {
    Literal(&'a [u8]),
    Slot(Var),
    /// A line that may be absent: its line break and its slots.
    Optional(Vec<Element<'a>>),
}

impl Template {
    /// Parses a template; only the slots listed on [`Var`] are slots, other braces are text.
    pub fn parse(s: &str) -> Template {
        let mut lines = Vec::new();
        for text in s.split('\n') {
            let mut segments = Vec::new();
            let mut literal = String::new();
            let mut rest = text;
            while let Some(i) = rest.find('{') {
                literal.push_str(&rest[..i]);
                rest = &rest[i..];
                match Var::ALL.iter().find(|(name, _)| rest.starts_with(name)) {
                    Some(&(name, var)) => {
                        if !literal.is_empty() {
                            segments.push(Segment::Literal(std::mem::take(&mut literal)));
                        }
                        segments.push(Segment::Slot(var));
                        rest = &rest[name.len()..];
                    }
                    None => {
                        literal.push('{');
                        rest = &rest[1..];
                    }
                }
            }
            literal.push_str(rest);
            if !literal.is_empty() {
                segments.push(Segment::Literal(literal));
            }
            let omittable =
                !segments.is_empty() && segments.iter().all(|s| matches!(s, Segment::Slot(_)));
            lines.push(Line {
                segments,
                omittable,
            });
        }
        let max_len = lines.len().saturating_sub(1)
            + lines
                .iter()
                .flat_map(|l| &l.segments)
                .map(|s| match s {
                    Segment::Literal(l) => l.len(),
                    // A char is at most 4 bytes.
                    Segment::Slot(v) => v.max_chars() * 4,
                })
                .sum::<usize>();
        Template { lines, max_len }
    }

    /// The longest text a rendering can be, in bytes (for tests: rendering checks it itself).
    #[cfg(test)]
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// True when the template has slot `var`.
    pub fn has(&self, var: Var) -> bool {
        self.lines
            .iter()
            .flat_map(|l| &l.segments)
            .any(|s| *s == Segment::Slot(var))
    }

    /// Fills the slots. Values are made to fit their slot: line breaks in one-line values
    /// become spaces, and values over [`Var::max_chars`] are clipped.
    pub fn render(&self, fill: &Fill) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            let mut text = String::new();
            for segment in &line.segments {
                match segment {
                    Segment::Literal(s) => text.push_str(s),
                    Segment::Slot(var) => push_value(&mut text, *var, fill),
                }
            }
            if line.omittable && text.is_empty() {
                continue;
            }
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&text);
        }
        out
    }

    /// True when `text` could be a rendering of this template: numbers as ASCII digits, one-line
    /// values without line breaks, every value within its bound. Linear in [`Template::max_len`]
    /// whatever the text holds (a dynamic programme over slots × bytes, never backtracking), and
    /// false at once for a text longer than any rendering.
    pub fn matches(&self, text: &str) -> bool {
        if text.len() > self.max_len {
            return false;
        }
        // Most texts are checked only to be rejected: a rendering starts with the template's
        // first literal text.
        if let Some(Segment::Literal(first)) = self.lines[0].segments.first() {
            if !text.starts_with(first.as_str()) {
                return false;
            }
        }
        let elements = self.elements();
        let bytes = text.as_bytes();
        if greedy(&elements, bytes, 0) == Some(bytes.len()) {
            return true;
        }
        let mut reach = vec![false; bytes.len() + 1];
        reach[0] = true;
        let reach = advance(&elements, bytes, reach);
        reach[bytes.len()]
    }

    fn elements(&self) -> Vec<Element<'_>> {
        let mut out = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let mut items = Vec::new();
            if i > 0 {
                items.push(Element::Literal(b"\n"));
            }
            for segment in &line.segments {
                items.push(match segment {
                    Segment::Literal(s) => Element::Literal(s.as_bytes()),
                    Segment::Slot(var) => Element::Slot(*var),
                });
            }
            if line.omittable && i > 0 {
                out.push(Element::Optional(items));
            } else {
                out.extend(items);
            }
        }
        out
    }
}

/// Appends the value of `var`, made to fit its slot.
fn push_value(out: &mut String, var: Var, fill: &Fill) {
    let value: std::borrow::Cow<str> = match var {
        Var::Tool => fill.tool.into(),
        Var::Args => fill.args.into(),
        Var::Tokens => fill.tokens.to_string().into(),
        Var::Chars => fill.chars.to_string().into(),
        Var::Status => fill.status.into(),
        Var::Head => fill.head.into(),
        Var::Tail => fill.tail.into(),
        Var::Salient => fill.salient.into(),
    };
    let max = var.max_chars();
    let one_line = |b: &u8| *b == b'\r' || (*b == b'\n' && !var.is_multi_line());
    if value.len() <= max && !value.as_bytes().iter().any(one_line) {
        out.push_str(&value); // At most `max` bytes, so at most `max` chars, nothing to replace.
        return;
    }
    for (k, c) in value.chars().enumerate() {
        if k + 1 == max && value.chars().nth(max).is_some() {
            out.push('…');
            break;
        }
        out.push(match c {
            '\r' => ' ',
            '\n' if !var.is_multi_line() => ' ',
            c => c,
        });
    }
}

/// One left-to-right attempt at matching `elements` from `pos`: a value runs to the first
/// occurrence of the literal after it (or to the end of its line), an absent line is taken when
/// the text has a line break there. `Some(end)` is a real match of `bytes[pos..end]`; `None` only
/// means this attempt failed (a value holding that literal, say), and `matches` then runs the
/// general check. Renderings nearly always match here, in one pass.
fn greedy(elements: &[Element], bytes: &[u8], mut pos: usize) -> Option<usize> {
    for (k, element) in elements.iter().enumerate() {
        match element {
            Element::Literal(lit) => {
                if !bytes[pos..].starts_with(lit) {
                    return None;
                }
                pos += lit.len();
            }
            Element::Slot(var) if var.is_number() => {
                let digits = bytes[pos..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if digits == 0 {
                    return None;
                }
                pos += digits;
            }
            Element::Slot(var) => {
                let rest = &bytes[pos..];
                let line_end = if var.is_multi_line() {
                    rest.len()
                } else {
                    memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len())
                };
                pos += match elements.get(k + 1) {
                    Some(Element::Literal(lit)) => memchr::memmem::find(rest, lit)?,
                    _ => line_end,
                };
                if pos > bytes.len() - rest.len() + line_end {
                    return None;
                }
            }
            Element::Optional(inner) => {
                if bytes.get(pos) == Some(&b'\n') {
                    pos = greedy(inner, bytes, pos)?;
                }
            }
        }
    }
    Some(pos)
}

/// The positions a run of elements can reach from `reach` (`reach[p]`: `text[..p]` matched).
fn advance(elements: &[Element], bytes: &[u8], mut reach: Vec<bool>) -> Vec<bool> {
    let n = bytes.len();
    let mut next = vec![false; n + 1];
    for element in elements {
        next.fill(false);
        match element {
            Element::Literal(lit) => {
                for p in 0..=n.saturating_sub(lit.len()) {
                    if reach[p] && bytes[p..].starts_with(lit) {
                        next[p + lit.len()] = true;
                    }
                }
            }
            Element::Slot(var) if var.is_number() => {
                for q in 1..=n {
                    next[q] = bytes[q - 1].is_ascii_digit() && (reach[q - 1] || next[q - 1]);
                }
            }
            Element::Slot(var) => {
                let multi = var.is_multi_line();
                next[0] = reach[0];
                for q in 1..=n {
                    let b = bytes[q - 1];
                    let extends = b != b'\r' && (multi || b != b'\n');
                    next[q] = reach[q] || (next[q - 1] && extends);
                }
            }
            Element::Optional(inner) => {
                let with = advance(inner, bytes, reach.clone());
                for q in 0..=n {
                    next[q] = reach[q] || with[q];
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
        if !reach.contains(&true) {
            break;
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::common::assert_classifies;
    use proptest::prelude::*;
    use std::time::{Duration, Instant};

    const ENCODINGS: [Encoding; 3] = [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::Approx];
    const BUDGETS: [usize; 7] = [1, 2, 5, 10, 50, 100, 1000];

    /// A deterministic pseudo-random sequence (xorshift), so texts are varied but reproducible.
    fn rng(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    fn prose(min_bytes: usize) -> String {
        let words = [
            "the", "model", "reads", "every", "message", "before", "it", "answers", "and", "a",
            "long", "tool", "result", "fills", "context", "window", "quickly", "so", "we", "clip",
            "middle", "keeping", "head", "tail", "budget", "tokens",
        ];
        let mut next = rng(7);
        let mut out = String::new();
        let mut sentence = 0;
        while out.len() < min_bytes {
            let len = 5 + (next() % 12) as usize;
            for w in 0..len {
                let word = words[(next() % words.len() as u64) as usize];
                if w == 0 {
                    let mut c = word.chars();
                    out.extend(c.next().map(|f| f.to_ascii_uppercase()));
                    out.push_str(c.as_str());
                } else {
                    out.push(' ');
                    out.push_str(word);
                }
            }
            sentence += 1;
            out.push_str(if sentence % 6 == 0 { ".\n\n" } else { ". " });
        }
        out
    }

    fn code() -> String {
        let mut out = String::new();
        for i in 0..120 {
            out.push_str(&format!(
                "fn step_{i}(input: &[u8]) -> Result<usize, Error> {{\n    let total = input.iter().map(|b| *b as usize * {i}).sum::<usize>();\n    if total > {} {{ return Err(Error::TooBig(total)); }}\n    Ok(total)\n}}\n\n",
                i * 1000
            ));
        }
        out
    }

    fn json() -> String {
        let rows: Vec<serde_json::Value> = (0..150)
            .map(|i| {
                serde_json::json!({
                    "id": i,
                    "name": format!("file_{i}.rs"),
                    "size": i * 137,
                    "tags": ["src", "rust", format!("t{}", i % 7)],
                    "ok": i % 3 == 0,
                })
            })
            .collect();
        serde_json::to_string_pretty(&rows).unwrap()
    }

    fn cjk() -> String {
        "お誕生日おめでとう。今日は天気がいいですね。我们在这里讨论上下文窗口的长度。한국어 문장도 조금 넣습니다。\n"
            .repeat(40)
    }

    fn emoji() -> String {
        "👨‍👩‍👧‍👦🇯🇵👍🏽✨🔥 ok 🧪🧬💡🙂\u{200d}🚀 ".repeat(120)
    }

    fn no_whitespace() -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut next = rng(42);
        (0..4000)
            .map(|_| alphabet[(next() % 64) as usize] as char)
            .collect()
    }

    fn texts() -> Vec<(&'static str, String)> {
        vec![
            ("prose", prose(6000)),
            ("code", code()),
            ("json", json()),
            ("cjk", cjk()),
            ("emoji", emoji()),
            ("no-whitespace", no_whitespace()),
            ("200KB", prose(200 * 1024)),
        ]
    }

    /// Splits a clipped result into head, omitted count and tail, at its (single) marker.
    fn split(result: &str) -> (&str, usize, &str) {
        let open = result.find(&format!("\n{MARKER_OPEN}")).expect("a marker");
        let after = &result[open + 1 + MARKER_OPEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let omitted = after[..digits].parse().unwrap();
        let close = format!("{MARKER_CLOSE}\n");
        assert!(after[digits..].starts_with(&close), "malformed marker");
        (&result[..open], omitted, &after[digits + close.len()..])
    }

    #[test]
    fn clipped_results_fit_are_idempotent_and_keep_head_and_tail() {
        for (name, text) in texts() {
            for enc in ENCODINGS {
                let total = enc.count(&text);
                for budget in BUDGETS {
                    let ctx = format!("{name} {enc} budget {budget}");
                    let Some(result) = clip_middle(enc, &text, budget).unwrap() else {
                        assert!(total <= budget, "{ctx}: None while over budget");
                        continue;
                    };
                    assert!(total > budget, "{ctx}: clipped while within budget");
                    let got = enc.count(&result);
                    assert!(got <= budget, "{ctx}: {got} tokens");
                    assert_eq!(clip_middle(enc, &result, budget).unwrap(), None, "{ctx}");
                    if result.is_empty() || result == SHORT_MARKER {
                        assert!(enc.count(&marker_text(total)) > budget, "{ctx}");
                        assert!(!is_clipped(&result), "{ctx}");
                        continue;
                    }
                    assert!(is_clipped(&result), "{ctx}");
                    let (head, omitted, tail) = split(&result);
                    assert!(text.starts_with(head), "{ctx}: head is not a prefix");
                    assert!(text.ends_with(tail), "{ctx}: tail is not a suffix");
                    assert!(head.len() + tail.len() < text.len(), "{ctx}: overlap");
                    let kept = enc.count(head) + enc.count(tail);
                    assert_eq!(omitted, total.saturating_sub(kept), "{ctx}: omitted count");
                }
            }
        }
    }

    #[test]
    fn large_budgets_keep_most_of_the_budget_head_heavy() {
        let text = prose(40_000);
        for enc in ENCODINGS {
            let result = clip_middle(enc, &text, 1000).unwrap().unwrap();
            let got = enc.count(&result);
            assert!(got > 900, "{enc}: only {got} of 1000 tokens used");
            let (head, _, tail) = split(&result);
            assert!(
                head.len() > tail.len(),
                "{enc}: head {} tail {}",
                head.len(),
                tail.len()
            );
            assert!(
                head.len() < tail.len() * 2,
                "{enc}: head {} tail {}",
                head.len(),
                tail.len()
            );
        }
    }

    #[test]
    fn cuts_land_on_whitespace_when_close() {
        let text = prose(20_000);
        for budget in [30, 100, 400] {
            let result = clip_middle(Encoding::O200kBase, &text, budget)
                .unwrap()
                .unwrap();
            let (head, _, tail) = split(&result);
            let after_head = text[head.len()..].chars().next().unwrap();
            assert!(after_head.is_whitespace(), "head cut before {after_head:?}");
            let before_tail = text[..text.len() - tail.len()].chars().last().unwrap();
            assert!(
                before_tail.is_whitespace(),
                "tail cut after {before_tail:?}"
            );
        }
    }

    #[test]
    fn tail_does_not_start_inside_a_blank_run() {
        let text = code();
        for budget in [60, 120, 300] {
            let result = clip_middle(Encoding::O200kBase, &text, budget)
                .unwrap()
                .unwrap();
            let (head, _, tail) = split(&result);
            assert!(!head.ends_with([' ', '\t']), "head: {head:?}");
            let line_start = text[..text.len() - tail.len()].ends_with('\n');
            assert!(line_start || !tail.starts_with(' '), "tail: {tail:?}");
        }
    }

    #[test]
    fn line_breaks_preferred_and_crlf_not_split() {
        let text = "alpha beta gamma delta\r\n".repeat(500);
        let result = clip_middle(Encoding::Cl100kBase, &text, 120)
            .unwrap()
            .unwrap();
        let (head, _, tail) = split(&result);
        assert!(text[head.len()..].starts_with("\r\n"), "head: {head:?}");
        assert!(tail.starts_with("alpha"), "tail: {tail:?}");
    }

    #[test]
    fn small_budgets_degrade_as_documented() {
        let text = prose(3000);
        let enc = Encoding::O200kBase;
        let total = enc.count(&text);
        let bare = marker_text(total);
        let bare_tokens = enc.count(&bare);
        let short_tokens = enc.count(SHORT_MARKER);
        assert!(short_tokens < bare_tokens);
        assert_eq!(clip_middle(enc, &text, 0).unwrap().as_deref(), Some(""));
        for budget in 1..short_tokens {
            assert_eq!(
                clip_middle(enc, &text, budget).unwrap().as_deref(),
                Some("")
            );
        }
        for budget in short_tokens..bare_tokens {
            let got = clip_middle(enc, &text, budget).unwrap();
            assert_eq!(got.as_deref(), Some(SHORT_MARKER));
        }
        let got = clip_middle(enc, &text, bare_tokens).unwrap().unwrap();
        assert!(is_clipped(&got));
        assert!(enc.count(&got) <= bare_tokens);
    }

    #[test]
    fn within_budget_is_none() {
        for enc in ENCODINGS {
            assert_eq!(clip_middle(enc, "", 0).unwrap(), None);
            assert_eq!(clip_middle(enc, "short text", 100).unwrap(), None);
            let text = prose(2000);
            let total = enc.count(&text);
            assert_eq!(clip_middle(enc, &text, total).unwrap(), None);
            assert!(clip_middle(enc, &text, total - 1).unwrap().is_some());
        }
    }

    #[test]
    fn is_clipped_recognises_markers_only() {
        assert!(is_clipped(&marker_text(0)));
        assert!(is_clipped(&format!("head{}tail", marker_text(12345))));
        assert!(is_clipped("x [... 7 tokens omitted by ctx ...] y"));
        assert!(!is_clipped(""));
        assert!(!is_clipped(SHORT_MARKER));
        assert!(!is_clipped(&prose(5000)));
        assert!(!is_clipped("[...  tokens omitted by ctx ...]"));
        assert!(!is_clipped("[... 12a tokens omitted by ctx ...]"));
        assert!(!is_clipped("[... 12 tokens omitted ...]"));
        assert!(is_clipped("[... [... 3 tokens omitted by ctx ...]"));
    }

    fn fill<'a>(tool: &'a str, tokens: usize, chars: usize) -> Fill<'a> {
        Fill {
            tool,
            tokens,
            chars,
            ..Fill::default()
        }
    }

    /// The templates both properties run over, followed by `extra`, as a strategy.
    fn templates(extra: &[&'static str]) -> prop::sample::Select<&'static str> {
        let mut all = vec![
            DEFAULT_PLACEHOLDER,
            "{tool}",
            "x{tool}y{tokens}",
            "{tokens}{chars}",
            "[{tool}] ({tool})",
            "{tool}1{tokens}",
            "{head}\n{tail}",
        ];
        all.extend_from_slice(extra);
        prop::sample::select(all)
    }

    proptest! {
        /// Every rendering is recognised, whatever the values hold.
        #[test]
        fn renderings_are_recognised(
            template in templates(&[
                "{salient}", "a\n{salient}\nb\n{status}{args}", "{head}{tail}\n\n{salient}\n{chars}",
            ]),
            tool in "[a-z_(){}\n\r ]{0,8}",
            args in "\\PC{0,100}",
            tokens in 0usize..5000,
            status in "[a-z ,()]{0,12}",
            head in "(\\PC|\n){0,200}",
            tail in "[a-z\n=]{0,20}",
            salient in "(\\PC|\n|\r){0,700}",
        ) {
            let t = Template::parse(template);
            let rendered = t.render(&Fill {
                tool: &tool, args: &args, tokens, chars: tokens * 3, status: &status,
                head: &head, tail: &tail, salient: &salient,
            });
            prop_assert!(rendered.len() <= t.max_len());
            prop_assert!(t.matches(&rendered), "{:?}", rendered);
        }
    }

    proptest! {
        /// The quick left-to-right attempt never accepts what the general check rejects.
        #[test]
        fn greedy_matching_is_sound(
            template in templates(&[
                "a\n{salient}\nb\n{status}{args}", "[{tool}]\n{head}\n{salient}\n{tail}",
            ]),
            text in "[a-z0-9 ()\\[\\]{}xy1\n]{0,30}",
        ) {
            let t = Template::parse(template);
            let elements = t.elements();
            let bytes = text.as_bytes();
            if greedy(&elements, bytes, 0) == Some(bytes.len()) {
                let mut reach = vec![false; bytes.len() + 1];
                reach[0] = true;
                prop_assert!(advance(&elements, bytes, reach)[bytes.len()]);
            }
        }
    }

    #[test]
    fn default_placeholder_round_trips() {
        let t = Template::parse(DEFAULT_PLACEHOLDER);
        let full = Fill {
            tool: "bash",
            args: "pytest -x tests/test_io.py",
            tokens: 1234,
            chars: 5678,
            status: ", failed (exit code 1)",
            head: "=== test session starts ===",
            tail: "=== 1 failed in 0.1s ===",
            salient: "E   ValueError: bad\nFAILED tests/test_io.py::test_read",
        };
        let text = t.render(&full);
        assert_eq!(
            text,
            "[ctx: cleared output of bash(pytest -x tests/test_io.py): 1234 tokens, failed (exit code 1)]\n=== test session starts ===\nE   ValueError: bad\nFAILED tests/test_io.py::test_read\n=== 1 failed in 0.1s ==="
        );
        assert!(t.matches(&text));
        assert_eq!(
            greedy(&t.elements(), text.as_bytes(), 0),
            Some(text.len()),
            "renderings match in one pass"
        );
        // Empty parts leave no blank lines.
        let bare = t.render(&fill("read_file", 300, 900));
        assert_eq!(bare, "[ctx: cleared output of read_file(): 300 tokens]");
        assert!(t.matches(&bare));
        let no_salient = t.render(&Fill {
            salient: "",
            ..full
        });
        assert_eq!(no_salient.lines().count(), 3);
        assert!(t.matches(&no_salient));
        for tool in ["", "x", "a {tool} b", "(1 tokens)", "ツール", "}{", "a\nb"] {
            for (tokens, chars) in [(0, 0), (1, 99), (usize::MAX, 10_000_000)] {
                assert!(
                    t.matches(&t.render(&fill(tool, tokens, chars))),
                    "{tool} {tokens} {chars}"
                );
            }
        }
        assert!(!t.matches("[ctx: cleared output of x(): tokens]"));
        assert!(!t.matches("[ctx: cleared output of x(): -1 tokens]"));
        assert!(!t.matches(&text.replacen("]\n", "\n", 1)));
        assert!(!t.matches(&text[1..]));
        assert!(!t.matches(""));
        assert!(!t.matches("some ordinary tool output"));
        // A header line break inside a one-line value is not a rendering.
        assert!(!t.matches("[ctx: cleared output of x\ny(): 5 tokens]"));
    }

    #[test]
    fn a_long_text_is_never_taken_for_a_placeholder() {
        let t = Template::parse(DEFAULT_PLACEHOLDER);
        let header = t.render(&fill("bash", 12, 40));
        let within = format!("{header}\n{}", "x".repeat(100));
        assert!(t.matches(&within));
        // Output that merely starts like a placeholder, but holds far more than one can: it is
        // an ordinary result (cleared or clipped like any other), not a placeholder.
        let spoof = format!("{header}\n{}", "secret line\n".repeat(1000));
        assert!(spoof.len() > t.max_len());
        assert!(!t.matches(&spoof));
    }

    #[test]
    fn values_are_bounded_and_one_line_where_they_must_be() {
        let t = Template::parse("<{tool}|{args}|{salient}>");
        let long = "y".repeat(1000);
        let text = t.render(&Fill {
            tool: "a\r\nb",
            args: &long,
            salient: "one\ntwo",
            ..Fill::default()
        });
        assert_eq!(
            text,
            format!("<a  b|{}…|one\ntwo>", "y".repeat(Var::Args.max_chars() - 1))
        );
        assert!(t.matches(&text));
    }

    #[test]
    fn other_braces_are_literal() {
        let t = Template::parse("{x} {tool} {{tokens}} {chars {}{chars}}");
        let text = t.render(&fill("grep", 42, 7));
        assert_eq!(text, "{x} grep {42} {chars {}7}");
        assert!(t.matches(&text));
        assert!(!t.matches("{x} grep 42 {chars {}7}"));
        assert_eq!(Template::parse("{").render(&fill("t", 1, 2)), "{");
        assert_eq!(Template::parse("}{tool").render(&fill("t", 1, 2)), "}{tool");
        assert_eq!(
            Template::parse("{TOOL}{ tool }").render(&fill("t", 1, 2)),
            "{TOOL}{ tool }"
        );
    }

    #[test]
    fn templates_without_placeholders() {
        let t = Template::parse("[cleared]");
        assert_eq!(t.render(&fill("x", 1, 2)), "[cleared]");
        assert!(t.matches("[cleared]"));
        assert!(!t.matches("[cleared]!"));
        assert!(!t.matches(""));
        let empty = Template::parse("");
        assert_eq!(empty.render(&fill("x", 1, 2)), "");
        assert!(empty.matches(""));
        assert!(!empty.matches(" "));
        // A blank line of the template is text, and stays.
        let blank = Template::parse("a\n\nb");
        assert_eq!(blank.render(&fill("x", 1, 2)), "a\n\nb");
        assert!(blank.matches("a\n\nb"));
        assert!(!blank.matches("a\nb"));
    }

    #[test]
    fn slots_match_as_documented() {
        // A template, texts it matches, texts it does not.
        let cases: [(&str, &[&str], &[&str]); 3] = [
            (
                "{tool}:{tokens}/{chars}",
                &[":1/2", "a:b:12/34", "1:2:3/4"],
                // Non-ASCII digits are not numbers.
                &["a:/2", "a:1/", "a:1/2x", "a:١/2"],
            ),
            ("{tokens}{chars}", &["12"], &["1"]),
            // Lines of slots only may be absent; one-line slots hold no line break.
            (
                "[{tool}]\n{head}\n{salient}\n{tail}",
                &["[x]", "[x]\nfirst", "[x]\nfirst\na\nb\nc\nlast"],
                &["[x\ny]", "[x]first"],
            ),
        ];
        for (template, yes, no) in cases {
            let t = Template::parse(template);
            assert_classifies(|text| t.matches(text), yes, no);
        }
    }

    #[test]
    fn adversarial_matches_finish_fast() {
        let start = Instant::now();
        let a = "a".repeat(700);
        assert!(!Template::parse("{tool}{tool}{tool}x").matches(&a));
        assert!(Template::parse("{tool}{tool}{tool}a").matches(&a[..500]));
        assert!(!Template::parse("{tool}a{tool}a{tool}a{tool}b").matches(&a));
        let digits = "1".repeat(60);
        assert!(!Template::parse("{tokens}{chars}{tokens}{chars}x").matches(&digits));
        assert!(Template::parse("{tokens}{tool}{chars}{tool}{tokens}").matches(&digits));
        let long_literal = format!("{{salient}}{}b", "a".repeat(200));
        assert!(!Template::parse(&long_literal).matches(&a));
        let lines = "a\n".repeat(300);
        let t = Template::parse("{head}\n{salient}\n{tail}\n{head}\n{salient}\n{tail}x");
        assert!(!t.matches(&lines));
        // Far beyond any rendering: rejected without looking inside.
        assert!(!t.matches(&"a\n".repeat(1_000_000)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn cut_values_keep_their_start_fit_and_are_stable() {
        for enc in ENCODINGS {
            for (name, text) in texts() {
                for max in [3, 10, 40, 200] {
                    let ctx = format!("{name} {enc} {max}");
                    let Some(cut) = clip_start(enc, &text, max).unwrap() else {
                        assert!(enc.count(&text) <= max, "{ctx}");
                        continue;
                    };
                    if is_cut_marker(&cut) {
                        assert!(enc.count(&cut) < enc.count(&text), "{ctx}");
                        continue;
                    }
                    assert!(enc.count(&cut) <= max, "{ctx}");
                    assert_eq!(clip_start(enc, &cut, max).unwrap(), None, "{ctx}");
                    let open = cut.rfind(CUT_OPEN).expect("a marker");
                    assert!(text.starts_with(&cut[..open]), "{ctx}: not the start");
                    let n: usize = cut[open + CUT_OPEN.len()..cut.len() - CUT_CLOSE.len()]
                        .replace(',', "")
                        .parse()
                        .unwrap();
                    assert_eq!(
                        n,
                        text.chars().count() - cut[..open].chars().count(),
                        "{ctx}"
                    );
                }
            }
        }
        assert_eq!(cut_marker(1234), "… [ctx: 1,234 chars cut]");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert!(is_cut_marker("… [ctx: 1,234 chars cut]"));
        assert!(!is_cut_marker("x… [ctx: 1,234 chars cut]"));
        assert!(!is_cut_marker("… [ctx:  chars cut]"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn clip_never_exceeds_budget(
            chars in proptest::collection::vec(any::<char>(), 0..400),
            spaces in proptest::collection::vec((0usize..400, prop_oneof![Just(' '), Just('\n')]), 0..40),
            budget in 0usize..200,
            which in 0usize..3,
        ) {
            let mut chars = chars;
            for (at, c) in spaces {
                chars.insert(at.min(chars.len()), c);
            }
            let text: String = chars.into_iter().collect();
            let enc = ENCODINGS[which];
            if let Some(result) = clip_middle(enc, &text, budget).unwrap() {
                prop_assert!(enc.count(&result) <= budget);
                prop_assert_eq!(clip_middle(enc, &result, budget).unwrap(), None);
            }
        }
    }
}
