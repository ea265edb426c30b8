//! The tokenizer boundary: the only module that talks to the BPE library.
//!
//! It turns text into a token count for one named encoding. Encodings are built lazily, once per
//! process, and only the one a document needs. Nothing else in ctx may import `tiktoken_rs`, so
//! that the implementation can be replaced by a faster one without touching the callers.

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

use anyhow::{Result, bail};
use tiktoken_rs::CoreBPE;

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
    /// `<|endoftext|>` are ordinary text.
    pub fn count(self, text: &str) -> Result<usize> {
        if text.is_empty() {
            return Ok(0);
        }
        let bpe = match self {
            Encoding::Approx => return Ok(approx_count(text)),
            _ => self.bpe()?,
        };
        match bpe.encode(text, &HashSet::new()) {
            Ok((tokens, _)) => Ok(tokens.len()),
            Err(e) => bail!(
                "the {} tokenizer cannot split this text ({} bytes): {}",
                self.name(),
                text.len(),
                e.message
            ),
        }
    }

    fn bpe(self) -> Result<&'static CoreBPE> {
        static O200K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
        static HARMONY: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
        static CL100K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
        static P50K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
        static R50K: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
        let (cell, build): (_, fn() -> anyhow::Result<CoreBPE>) = match self {
            Encoding::O200kBase => (&O200K, tiktoken_rs::o200k_base),
            Encoding::O200kHarmony => (&HARMONY, tiktoken_rs::o200k_harmony),
            Encoding::Cl100kBase => (&CL100K, tiktoken_rs::cl100k_base),
            Encoding::P50kBase => (&P50K, tiktoken_rs::p50k_base),
            Encoding::R50kBase => (&R50K, tiktoken_rs::r50k_base),
            Encoding::Approx => unreachable!("approx has no BPE"),
        };
        match cell.get_or_init(|| build().map_err(|e| format!("{e:#}"))) {
            Ok(bpe) => Ok(bpe),
            Err(e) => bail!("cannot load encoding {}: {e}", self.name()),
        }
    }
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
