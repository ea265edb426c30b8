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
    /// `<|endoftext|>` are ordinary text. (The `Result` is kept for encodings that may one day
    /// be loaded from outside the binary; the built-in ones cannot fail.)
    pub fn count(self, text: &str) -> Result<usize> {
        let b = text.as_bytes();
        Ok(match self {
            Encoding::Approx => approx_count(text),
            Encoding::O200kBase | Encoding::O200kHarmony => {
                count_with(&bpe::O200K_BASE, split::o200k, b)
            }
            Encoding::Cl100kBase => count_with(&bpe::CL100K_BASE, split::cl100k, b),
            Encoding::P50kBase => count_with(&bpe::P50K_BASE, split::gpt2, b),
            Encoding::R50kBase => count_with(&bpe::R50K_BASE, split::gpt2, b),
        })
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

/// The `approx` heuristic: one token per CJK/kana/hangul character, one per four other
/// non-space characters (rounded up per word), whitespace free. Deliberately simple and
/// documented in docs/counting.md.
fn approx_count(text: &str) -> usize {
    let mut tokens = 0usize;
    let mut run = 0usize;
    for c in text.chars() {
        if is_wide(c) {
            tokens += run.div_ceil(4) + 1;
            run = 0;
        } else if c.is_whitespace() {
            tokens += run.div_ceil(4);
            run = 0;
        } else {
            run += 1;
        }
    }
    tokens + run.div_ceil(4)
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
        assert_eq!(Encoding::Cl100kBase.count("tiktoken is great!").unwrap(), 6);
        assert_eq!(Encoding::O200kBase.count("お誕生日おめでとう").unwrap(), 8);
        assert_eq!(Encoding::Cl100kBase.count("お誕生日おめでとう").unwrap(), 9);
        assert_eq!(Encoding::P50kBase.count("お誕生日おめでとう").unwrap(), 14);
        assert_eq!(Encoding::R50kBase.count("お誕生日おめでとう").unwrap(), 14);
    }

    #[test]
    fn special_token_text_is_ordinary_text() {
        assert!(Encoding::O200kBase.count("<|endoftext|>").unwrap() > 1);
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
    fn approx_is_rough_but_sane() {
        assert_eq!(approx_count(""), 0);
        assert_eq!(approx_count("hello world"), 4);
        assert_eq!(approx_count("お誕生日"), 4);
    }
}
