// The character classes of the encodings' split patterns, as bit flags. build.rs `include!`s this
// file and asks regex-syntax (the parser behind the regex crate that tiktoken's patterns run on)
// which code points each pattern matches, so ctx's tables have exactly the Unicode version and
// the class boundaries of the reference implementation.

/// `\p{L}`
pub const LETTER: u8 = 1;
/// `\p{N}`
pub const NUMBER: u8 = 2;
/// `\s` (Unicode White_Space)
pub const SPACE: u8 = 4;
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, the "upper" run of o200k's word pattern
pub const UPPER: u8 = 8;
/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, the "lower" run of o200k's word pattern
pub const LOWER: u8 = 16;

/// Each flag with the pattern that defines it.
#[allow(dead_code)] // read by build.rs
pub const CLASS_PATTERNS: [(u8, &str); 5] = [
    (LETTER, r"\p{L}"),
    (NUMBER, r"\p{N}"),
    (SPACE, r"\s"),
    (UPPER, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
    (LOWER, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
];
