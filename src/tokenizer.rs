//! Token counting for the encodings of OpenAI's models.
//!
//! Each exact encoding is a hand-written pre-tokenizer (split.rs, equivalent to the encoding's
//! split regex) feeding a byte-pair merge over rank tables that build.rs generated from the
//! official rank files in data/encodings (bpe.rs). Nothing is built at run time, so the first
//! count costs what any other does. tiktoken-rs is the reference these are tested against
//! (tests/tokenizer.rs); it is not linked into ctx.

use std::cell::RefCell;
use std::fmt;

use anyhow::Result;

mod bpe;
mod classes;
mod hash;
mod split;

use bpe::{Ranks, Scratch};

/// A pre-tokenizer: where the piece that starts at a byte offset ends.
type Splitter = fn(&[u8], usize) -> usize;

/// A token encoding that ctx can count with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    O200kHarmony,
    Cl100kBase,
    P50kBase,
    R50kBase,
    /// A character heuristic: fast, never exact (see docs/counting.md).
    Approx,
}

impl Encoding {
    /// Every encoding, in the order `--help` lists them.
    pub const ALL: [Encoding; 6] = [
        Encoding::O200kBase,
        Encoding::O200kHarmony,
        Encoding::Cl100kBase,
        Encoding::P50kBase,
        Encoding::R50kBase,
        Encoding::Approx,
    ];

    /// The encoding's name as tiktoken spells it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::O200kHarmony => "o200k_harmony",
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
            Encoding::Approx => "approx",
        }
    }

    /// Parses an encoding name; the error lists the valid ones.
    pub fn parse(name: &str) -> Result<Encoding> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Encoding::ALL.iter().map(|e| e.name()).collect();
                anyhow::anyhow!("unknown encoding '{name}' (known: {})", names.join(", "))
            })
    }

    /// True when counts are the model tokenizer's own (everything but `approx`).
    pub fn is_exact(self) -> bool {
        self != Encoding::Approx
    }

    /// Counts the tokens of `text` as the API sees user text: special-token strings such as
    /// `<|endoftext|>` are ordinary text. Every encoding is built into the binary, so counting
    /// cannot fail.
    pub fn count(self, text: &str) -> usize {
        let b = text.as_bytes();
        match self {
            Encoding::Approx => approx_count(text),
            Encoding::O200kBase | Encoding::O200kHarmony => {
                count_with(&bpe::O200K_BASE, split::o200k, b)
            }
            Encoding::Cl100kBase => count_with(&bpe::CL100K_BASE, split::cl100k, b),
            Encoding::P50kBase => count_with(&bpe::P50K_BASE, split::gpt2, b),
            Encoding::R50kBase => count_with(&bpe::R50K_BASE, split::gpt2, b),
        }
    }

    /// The token ranks of `text` (special-token strings as ordinary text), or `None` for
    /// `approx`. ctx itself only counts; this exists so that tests can compare every token with
    /// the reference implementation.
    #[doc(hidden)]
    pub fn encode(self, text: &str) -> Option<Vec<u32>> {
        let (ranks, split) = self.tables()?;
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut scratch = Scratch::default();
        let mut i = 0;
        while i < b.len() {
            let end = split(b, i);
            ranks.encode_piece(&b[i..end], &mut scratch, &mut out);
            i = end;
        }
        Some(out)
    }

    /// The pieces the encoding's pre-tokenizer splits `text` into (empty for `approx`).
    #[doc(hidden)]
    pub fn pieces(self, text: &str) -> Vec<&str> {
        let Some((_, split)) = self.tables() else {
            return Vec::new();
        };
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let end = split(text.as_bytes(), i);
            pieces.push(&text[i..end]);
            i = end;
        }
        pieces
    }

    /// The bytes of token `rank`, if the encoding has it (`None` for `approx`).
    #[doc(hidden)]
    pub fn token_bytes(self, rank: u32) -> Option<&'static [u8]> {
        let (ranks, _) = self.tables()?;
        ((rank as usize) < ranks.len()).then(|| ranks.token(rank))
    }

    fn tables(self) -> Option<(&'static Ranks, Splitter)> {
        Some(match self {
            Encoding::O200kBase | Encoding::O200kHarmony => (&bpe::O200K_BASE, split::o200k),
            Encoding::Cl100kBase => (&bpe::CL100K_BASE, split::cl100k),
            Encoding::P50kBase => (&bpe::P50K_BASE, split::gpt2),
            Encoding::R50kBase => (&bpe::R50K_BASE, split::gpt2),
            Encoding::Approx => return None,
        })
    }
}

/// Splits `text` into pieces and counts each piece's tokens. Generic over the splitter so that
/// each pattern's loop is compiled on its own.
fn count_with(ranks: &Ranks, split: impl Fn(&[u8], usize) -> usize, b: &[u8]) -> usize {
    thread_local! {
        // Reused by every count on this thread: its lookup cache stays warm from one message
        // to the next.
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }
    SCRATCH.with_borrow_mut(|scratch| {
        let mut tokens = 0;
        let mut i = 0;
        while i < b.len() {
            let end = split(b, i);
            tokens += ranks.count_piece(&b[i..end], scratch);
            i = end;
        }
        tokens
    })
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `approx` heuristic: an upper bound on the `o200k_base` and `cl100k_base` counts of real
/// text, in one pass over the characters without a vocabulary (docs/counting.md gives its rules
/// and its measured bias).
///
/// It splits text the way those encodings' pre-tokenizers do (letters with a case change,
/// digits, punctuation, whitespace) and charges each piece what such pieces cost at most in
/// practice: a word one token (more at the start of a text, where words lack the leading space
/// that the vocabularies favour), three digits one token, a run of punctuation half a token a
/// character, a run of alphanumerics that keeps switching case and digits (an id, a hash) close
/// to a token a character. Costs are kept in [`APPROX_UNIT`]ths of a token, a tenth (at least a
/// token) is added to the ASCII part for the variance of real tokenizers, and the sum is rounded
/// up.
fn approx_count(text: &str) -> usize {
    const UNIT: usize = APPROX_UNIT;
    let mut ascii = 0usize; // cost of ASCII pieces
    let mut wide = 0usize; // cost of other characters
    let mut seg = Segment::default();
    let mut word = Word::default();
    let mut last = Class::Start;
    let mut last_char = '\0';
    for c in text.chars() {
        let class = Class::of(c);
        let continues = matches!(
            (last, class),
            (Class::Lower, Class::Lower)
                | (Class::Upper, Class::Lower | Class::Upper)
                | (Class::Digit, Class::Digit)
                | (Class::Punct, Class::Punct)
                | (Class::Space, Class::Space)
        );
        if !continues {
            // A lone space (or tab, before letters) joins the piece that follows it.
            let lone = seg.class == Class::Space && seg.len == 1;
            let joins = lone
                && match class {
                    Class::Lower | Class::Upper | Class::Wide => matches!(last_char, ' ' | '\t'),
                    Class::Punct => last_char == ' ',
                    _ => false,
                };
            let cost = if joins {
                0
            } else if seg.class == Class::Space && seg.len > 1 && class == Class::Digit {
                // Spaces before digits: all but the last, then the last alone.
                2 * UNIT
            } else {
                seg.cost()
            };
            if seg.class.is_alphanumeric() {
                word.cost += cost;
                if class.is_alphanumeric() {
                    word.switches += 1;
                } else {
                    ascii += word.close();
                }
            } else {
                ascii += cost;
            }
            seg = Segment {
                class,
                first: last == Class::Start,
                ..Segment::default()
            };
        }
        seg.len += 1;
        match class {
            Class::Upper => seg.uppers += 1,
            Class::Wide => wide += wide_cost(c),
            _ => {}
        }
        if class.is_alphanumeric() {
            word.len += 1;
            word.kinds |= match class {
                Class::Lower => 1,
                Class::Upper => 2,
                _ => 4,
            };
        }
        last = class;
        last_char = c;
    }
    let cost = seg.cost();
    if seg.class.is_alphanumeric() {
        word.cost += cost;
        ascii += word.close();
    } else {
        ascii += cost;
    }
    // The variance of real tokenizers: a tenth of the ASCII part, and at least a token, since
    // a short text of rare words ("Do a bing bong", "suzie") splits into more pieces than the
    // rules charge and a tenth of a few tokens rounds to nothing.
    let slack = if ascii == 0 {
        0
    } else {
        (ascii / 10).max(UNIT)
    };
    (ascii + slack + wide).div_ceil(UNIT)
}

/// `approx` costs are counted in these fractions of a token.
const APPROX_UNIT: usize = 120;

/// What a character is to `approx`: the classes the encodings' pre-tokenizers split on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Class {
    #[default]
    Start,
    Lower,
    Upper,
    Digit,
    Punct,
    Space,
    /// Anything outside ASCII that is not whitespace: priced one by one ([`wide_cost`]).
    Wide,
}

impl Class {
    fn of(c: char) -> Class {
        match c {
            'a'..='z' => Class::Lower,
            'A'..='Z' => Class::Upper,
            '0'..='9' => Class::Digit,
            c if c.is_whitespace() => Class::Space,
            c if c.is_ascii() => Class::Punct,
            _ => Class::Wide,
        }
    }

    fn is_alphanumeric(self) -> bool {
        matches!(self, Class::Lower | Class::Upper | Class::Digit)
    }
}

/// A run of one class (letters: one case change at most, as the pre-tokenizers split them).
#[derive(Default)]
struct Segment {
    class: Class,
    len: usize,
    uppers: usize,
    /// It starts the text.
    first: bool,
}

impl Segment {
    /// What the run costs at most in practice, in [`APPROX_UNIT`]ths of a token.
    fn cost(&self) -> usize {
        const UNIT: usize = APPROX_UNIT;
        match self.class {
            Class::Lower | Class::Upper => {
                // A word is one token, but rarer words split: long ones (a sixth of a token a
                // letter past six), words at the very start of a text, which lack the leading
                // space the vocabularies favour (a sixth of a token a letter past the first),
                // capitalised ones, and runs of capitals.
                let long = self.len.saturating_sub(6) * UNIT / 6;
                let start = if self.first {
                    (self.len - 1) * UNIT / 6
                } else {
                    0
                };
                let capitalised = if self.uppers == 1 && self.len >= 5 {
                    UNIT / 4
                } else {
                    0
                };
                let capitals = self.uppers.saturating_sub(2) * UNIT / 4;
                UNIT + long.max(start) + capitalised + capitals
            }
            // Every number of up to three digits is one token.
            Class::Digit => self.len.div_ceil(3) * UNIT,
            Class::Punct => UNIT + (self.len - 1) * UNIT / 2,
            Class::Space => UNIT,
            Class::Start | Class::Wide => 0,
        }
    }
}

/// A run of ASCII letters and digits: ids and hashes that keep switching between lower case,
/// capitals and digits (every six characters or more often), or mix all three, cost close to a
/// token a character
/// (0.85), whatever their pieces say.
#[derive(Default)]
struct Word {
    cost: usize,
    len: usize,
    switches: usize,
    /// Which of lower case, capitals and digits it holds (bits 1, 2, 4).
    kinds: u8,
}

impl Word {
    fn close(&mut self) -> usize {
        let w = std::mem::take(self);
        // Random ids (`toolu_01VPTLXLFuQTTtprw3ivgh18`, `call_TURGCug0TIGwh`) mix all three
        // kinds, or switch often.
        if w.len >= 8 && (w.switches * 6 >= w.len || w.kinds == 7) {
            w.cost.max(w.len * APPROX_UNIT * 17 / 20)
        } else {
            w.cost
        }
    }
}

/// The `approx` cost of a character outside ASCII: CJK, kana and hangul two tokens (what
/// `cl100k_base` spends on them), general punctuation (dashes, curly quotes) one, other
/// two-byte characters (accented Latin, Greek, Cyrillic, Arabic, Hebrew) one, other
/// characters their UTF-8 length (a token is at least one byte).
fn wide_cost(c: char) -> usize {
    APPROX_UNIT
        * match c.len_utf8() {
            _ if is_wide(c) => 2,
            _ if ('\u{2000}'..='\u{206F}').contains(&c) => 1,
            2 => 1,
            bytes => bytes,
        }
}

fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x2E80..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7FF |
        0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF | 0x20000..=0x3FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_strings() {
        // Values from OpenAI's "How to count tokens with tiktoken" cookbook.
        assert_eq!(Encoding::Cl100kBase.count("tiktoken is great!"), 6);
        assert_eq!(Encoding::O200kBase.count("お誕生日おめでとう"), 8);
        assert_eq!(Encoding::Cl100kBase.count("お誕生日おめでとう"), 9);
        assert_eq!(Encoding::P50kBase.count("お誕生日おめでとう"), 14);
        assert_eq!(Encoding::R50kBase.count("お誕生日おめでとう"), 14);
    }

    #[test]
    fn special_token_text_is_ordinary_text() {
        assert!(Encoding::O200kBase.count("<|endoftext|>") > 1);
    }

    #[test]
    fn parse_rejects_unknown() {
        assert_eq!(
            Encoding::parse("cl100k_base").unwrap(),
            Encoding::Cl100kBase
        );
        assert!(
            Encoding::parse("gpt2")
                .unwrap_err()
                .to_string()
                .contains("o200k_base")
        );
    }

    #[test]
    fn approx_is_an_upper_bound_on_hard_strings() {
        assert_eq!(approx_count(""), 0);
        assert_eq!(approx_count("hello world"), 4);
        assert_eq!(approx_count("お誕生日"), 8);
        for text in [
            " ",
            "\n- ",
            "Kiwi",
            "suzie",
            "Do a bing bong",
            "pamelafox-boolean",
            "ephemeral",
            "observation",
            "call_xK8mN2pQr5vSjTyL9hB3zWc",
            "toolu_01JPiYRg5YH3kq9zwgCtaZLh",
            "MICROSECONDS since 1970-01-01T00:00:00Z",
            "  0     0    0     0 --:--:-- --:--:--     0",
            "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}",
            "お誕生日おめでとう",
            "你决定前往熊猫炭岛体育馆挑战火属性馆主布莱恩。",
            "emoji 😀👍🏽 family 👨\u{200d}👩\u{200d}👧 flag 🇫🇷",
            "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم",
            "fn main() {\n    println!(\"{}\", 42);\n}\n",
        ] {
            let approx = approx_count(text);
            for e in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let exact = e.count(text);
                assert!(approx >= exact, "{text:?}: approx {approx} < {exact} ({e})");
            }
        }
    }
}
