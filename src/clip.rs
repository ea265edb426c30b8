//! Text-level shrinking of single tool results: middle-out clipping to a token budget and the
//! placeholder templates that replace cleared results.
//!
//! This module owns the clip marker (`marker_text`, `is_clipped`) and the placeholder template
//! language (`{tool}`, `{tokens}`, `{chars}`), so that `prune`, `fit` and anything that must
//! recognise their output agree on one spelling. It works on plain strings only: it must not know
//! about messages, JSON or dialects, must not decide *which* results to clip or clear (that is the
//! commands' job), and counts tokens only through [`Encoding::count`], never through the BPE
//! library directly. Clipping guarantees its result fits the budget, marker included, so clipping
//! again changes nothing (SPEC §4 `ctx prune --max-tool-tokens`).

use anyhow::Result;

use crate::tokenizer::Encoding;

/// The placeholder `ctx prune` puts in place of a cleared tool result unless told otherwise.
pub const DEFAULT_PLACEHOLDER: &str = "[ctx: cleared the output of tool {tool} ({tokens} tokens, {chars} chars) to save context; call the tool again if you need it]";

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
    let total = enc.count(text)?;
    if total <= max_tokens {
        return Ok(None);
    }
    let bare = marker_text(total);
    if enc.count(&bare)? > max_tokens {
        let short = if enc.count(SHORT_MARKER)? <= max_tokens {
            SHORT_MARKER
        } else {
            ""
        };
        return Ok(Some(short.to_string()));
    }

    let clipper = Clipper::new(enc, text, total, max_tokens);
    // `text` is over budget, so it is not empty; keep at least one char out.
    let max_keep = clipper.chars() - 1;
    let mut best = bare; // the candidate for keeping 0 chars, known to fit
    if max_keep == 0 {
        return Ok(Some(best));
    }

    // Gallop up from a guess of one char per token until a keep size fails, then bisect between
    // the last size that fitted (`lo`) and the first that did not (`hi`).
    let mut lo = 0;
    let mut hi = max_keep + 1;
    let mut probe = max_tokens.clamp(1, max_keep);
    loop {
        match clipper.candidate(probe)? {
            Some(fits) => {
                best = fits;
                lo = probe;
                if probe == max_keep {
                    break;
                }
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
        match clipper.candidate(mid)? {
            Some(fits) => {
                best = fits;
                lo = mid;
            }
            None => hi = mid,
        }
    }
    Ok(Some(best))
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
        let kept = self.enc.count(head)? + self.enc.count(tail)?;
        let omitted = self.total.saturating_sub(kept);
        let clipped = format!("{head}{}{tail}", marker_text(omitted));
        Ok((self.enc.count(&clipped)? <= self.max_tokens).then_some(clipped))
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

/// A placeholder template: literal text with `{tool}`, `{tokens}` and `{chars}` slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Tool,
    Tokens,
    Chars,
}

impl Template {
    /// Parses a template; only `{tool}`, `{tokens}` and `{chars}` are slots, other braces are text.
    pub fn parse(s: &str) -> Template {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('{') {
            literal.push_str(&rest[..i]);
            rest = &rest[i..];
            let slot = [
                ("{tool}", Segment::Tool),
                ("{tokens}", Segment::Tokens),
                ("{chars}", Segment::Chars),
            ]
            .into_iter()
            .find(|(name, _)| rest.starts_with(name));
            match slot {
                Some((name, segment)) => {
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(segment);
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
        Template { segments }
    }

    /// Fills the slots with the tool name and the cleared result's token and char counts.
    pub fn render(&self, tool: &str, tokens: usize, chars: usize) -> String {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(s) => out.push_str(s),
                Segment::Tool => out.push_str(tool),
                Segment::Tokens => out.push_str(&tokens.to_string()),
                Segment::Chars => out.push_str(&chars.to_string()),
            }
        }
        out
    }

    /// One left-to-right attempt: a tool name runs to the first occurrence of the literal after
    /// it, a number takes every digit. True means `text` matches; false only that this attempt
    /// failed (a tool name containing that literal, say), so `matches` then runs the general
    /// check. Renderings of the template nearly always match here, without allocating.
    fn matches_greedily(&self, text: &str) -> bool {
        let mut pos = 0;
        let mut in_tool = false;
        for segment in &self.segments {
            let rest = &text[pos..];
            match segment {
                Segment::Literal(lit) if in_tool => match rest.find(lit.as_str()) {
                    Some(k) => {
                        pos += k + lit.len();
                        in_tool = false;
                    }
                    None => return false,
                },
                Segment::Literal(lit) => {
                    if !rest.starts_with(lit.as_str()) {
                        return false;
                    }
                    pos += lit.len();
                }
                Segment::Tool => in_tool = true,
                Segment::Tokens | Segment::Chars => {
                    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                    if in_tool || digits == 0 {
                        return false;
                    }
                    pos += digits;
                }
            }
        }
        in_tool || pos == text.len()
    }

    /// True when `text` could be a rendering of this template (numbers as ASCII digits, any tool).
    /// Linear in the text whatever it holds (see `matches_exhaustively`).
    pub fn matches(&self, text: &str) -> bool {
        // Most texts are checked only to be rejected: a rendering starts with the first
        // literal and ends with the last, which rules nearly all of them out at once.
        if let Some(Segment::Literal(first)) = self.segments.first() {
            if !text.starts_with(first.as_str()) {
                return false;
            }
        }
        if let Some(Segment::Literal(last)) = self.segments.last() {
            if !text.ends_with(last.as_str()) {
                return false;
            }
        }
        self.matches_greedily(text) || self.matches_exhaustively(text)
    }

    /// The general check behind `matches`: a dynamic programme over segments × byte positions,
    /// O(segments × len × longest literal), whatever the input, with no backtracking.
    fn matches_exhaustively(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        let n = bytes.len();
        // reach[p]: the segments so far can match exactly text[..p].
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        let mut next = vec![false; n + 1];
        for segment in &self.segments {
            next.fill(false);
            match segment {
                Segment::Literal(lit) => {
                    let lit = lit.as_bytes();
                    for p in 0..=n.saturating_sub(lit.len()) {
                        if reach[p] && bytes[p..].starts_with(lit) {
                            next[p + lit.len()] = true;
                        }
                    }
                }
                Segment::Tool => {
                    if let Some(first) = reach.iter().position(|&r| r) {
                        next[first..].fill(true);
                    }
                }
                Segment::Tokens | Segment::Chars => {
                    for q in 1..=n {
                        next[q] = bytes[q - 1].is_ascii_digit() && (reach[q - 1] || next[q - 1]);
                    }
                }
            }
            std::mem::swap(&mut reach, &mut next);
            if !reach.contains(&true) {
                return false;
            }
        }
        reach[n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                let total = enc.count(&text).unwrap();
                for budget in BUDGETS {
                    let ctx = format!("{name} {enc} budget {budget}");
                    let Some(result) = clip_middle(enc, &text, budget).unwrap() else {
                        assert!(total <= budget, "{ctx}: None while over budget");
                        continue;
                    };
                    assert!(total > budget, "{ctx}: clipped while within budget");
                    let got = enc.count(&result).unwrap();
                    assert!(got <= budget, "{ctx}: {got} tokens");
                    assert_eq!(clip_middle(enc, &result, budget).unwrap(), None, "{ctx}");
                    if result.is_empty() || result == SHORT_MARKER {
                        assert!(enc.count(&marker_text(total)).unwrap() > budget, "{ctx}");
                        assert!(!is_clipped(&result), "{ctx}");
                        continue;
                    }
                    assert!(is_clipped(&result), "{ctx}");
                    let (head, omitted, tail) = split(&result);
                    assert!(text.starts_with(head), "{ctx}: head is not a prefix");
                    assert!(text.ends_with(tail), "{ctx}: tail is not a suffix");
                    assert!(head.len() + tail.len() < text.len(), "{ctx}: overlap");
                    let kept = enc.count(head).unwrap() + enc.count(tail).unwrap();
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
            let got = enc.count(&result).unwrap();
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
        let total = enc.count(&text).unwrap();
        let bare = marker_text(total);
        let bare_tokens = enc.count(&bare).unwrap();
        let short_tokens = enc.count(SHORT_MARKER).unwrap();
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
        assert!(enc.count(&got).unwrap() <= bare_tokens);
    }

    #[test]
    fn within_budget_is_none() {
        for enc in ENCODINGS {
            assert_eq!(clip_middle(enc, "", 0).unwrap(), None);
            assert_eq!(clip_middle(enc, "short text", 100).unwrap(), None);
            let text = prose(2000);
            let total = enc.count(&text).unwrap();
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

    proptest! {
        /// The quick left-to-right attempt never accepts what the general check rejects, and
        /// accepts renderings with ordinary tool names.
        #[test]
        fn greedy_matching_is_sound(
            template in prop::sample::select(vec![
                DEFAULT_PLACEHOLDER, "{tool}", "x{tool}y{tokens}", "{tokens}{chars}", "[{tool}] ({tool})", "{tool}1{tokens}",
            ]),
            text in "[a-z0-9 ()\\[\\]{}xy1]{0,24}",
            tool in "[a-z_]{0,8}",
            tokens in 0usize..5000,
        ) {
            let t = Template::parse(template);
            if t.matches_greedily(&text) {
                prop_assert!(t.matches_exhaustively(&text));
            }
            let rendered = t.render(&tool, tokens, tokens * 3);
            prop_assert!(t.matches_exhaustively(&rendered));
            prop_assert!(t.matches(&rendered));
        }
    }

    #[test]
    fn default_placeholder_round_trips() {
        let t = Template::parse(DEFAULT_PLACEHOLDER);
        let text = t.render("read_file", 1234, 5678);
        assert_eq!(
            text,
            "[ctx: cleared the output of tool read_file (1234 tokens, 5678 chars) to save context; call the tool again if you need it]"
        );
        assert!(t.matches(&text));
        for tool in ["", "x", "a {tool} b", "(1 tokens, 2 chars)", "ツール", "}{"] {
            for (tokens, chars) in [(0, 0), (1, 99), (usize::MAX, 10_000_000)] {
                assert!(
                    t.matches(&t.render(tool, tokens, chars)),
                    "{tool} {tokens} {chars}"
                );
            }
        }
        assert!(!t.matches("[ctx: cleared the output of tool x ( tokens, 5 chars) to save context; call the tool again if you need it]"));
        assert!(!t.matches("[ctx: cleared the output of tool x (-1 tokens, 5 chars) to save context; call the tool again if you need it]"));
        assert!(!t.matches(&format!("{text} ")));
        assert!(!t.matches(&text[1..]));
        assert!(!t.matches(""));
        assert!(!t.matches("some ordinary tool output"));
    }

    #[test]
    fn other_braces_are_literal() {
        let t = Template::parse("{x} {tool} {{tokens}} {chars {}{chars}}");
        let text = t.render("grep", 42, 7);
        assert_eq!(text, "{x} grep {42} {chars {}7}");
        assert!(t.matches(&text));
        assert!(!t.matches("{x} grep 42 {chars {}7}"));
        assert_eq!(Template::parse("{").render("t", 1, 2), "{");
        assert_eq!(Template::parse("}{tool").render("t", 1, 2), "}{tool");
        assert_eq!(
            Template::parse("{TOOL}{ tool }").render("t", 1, 2),
            "{TOOL}{ tool }"
        );
    }

    #[test]
    fn templates_without_placeholders() {
        let t = Template::parse("[cleared]");
        assert_eq!(t.render("x", 1, 2), "[cleared]");
        assert!(t.matches("[cleared]"));
        assert!(!t.matches("[cleared]!"));
        assert!(!t.matches(""));
        let empty = Template::parse("");
        assert_eq!(empty.render("x", 1, 2), "");
        assert!(empty.matches(""));
        assert!(!empty.matches(" "));
    }

    #[test]
    fn slots_match_as_documented() {
        let t = Template::parse("{tool}:{tokens}/{chars}");
        assert!(t.matches(":1/2"));
        assert!(t.matches("a:b:12/34"));
        assert!(t.matches("1:2:3/4"));
        assert!(!t.matches("a:/2"));
        assert!(!t.matches("a:1/"));
        assert!(!t.matches("a:1/2x"));
        assert!(!t.matches("a:١/2"), "non-ASCII digits are not numbers");
        let adjacent = Template::parse("{tokens}{chars}");
        assert!(adjacent.matches("12"));
        assert!(!adjacent.matches("1"));
    }

    #[test]
    fn adversarial_matches_finish_fast() {
        let start = Instant::now();
        let a = "a".repeat(10_000);
        assert!(!Template::parse("{tool}{tool}{tool}x").matches(&a));
        assert!(Template::parse("{tool}{tool}{tool}a").matches(&a));
        assert!(!Template::parse("{tool}a{tool}a{tool}a{tool}b").matches(&a));
        let digits = "1".repeat(10_000);
        assert!(!Template::parse("{tokens}{chars}{tokens}{chars}x").matches(&digits));
        assert!(Template::parse("{tokens}{tool}{chars}{tool}{tokens}").matches(&digits));
        let long_literal = format!("{{tool}}{}b", "a".repeat(200));
        assert!(!Template::parse(&long_literal).matches(&a));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
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
                prop_assert!(enc.count(&result).unwrap() <= budget);
                prop_assert_eq!(clip_middle(enc, &result, budget).unwrap(), None);
            }
        }
    }
}
