//! ctx's tokenizer against the reference, tiktoken-rs (OpenAI's tiktoken, vendored in Rust).
//!
//! Every comparison is token for token (the ranks, not only their number): on the rank tables
//! themselves, on every string of the corpus (tests/corpus), on generated text (random Unicode,
//! whitespace runs, digits, contractions, emoji, CJK, marks) for every encoding, and on
//! megabyte-long runs, where the reference's regex cannot split the text (fancy-regex overflows
//! its stack) and so the split is given by construction and the merges come from tiktoken-rs's
//! own byte-pair code. Each text is split both by the hand-written pre-tokenizer and by the
//! encoding's pattern on the generic matcher, and both must split it as the reference does. The
//! generic matcher is also compared with fancy-regex on other tokenizers' patterns.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

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

/// The hand-written pre-tokenizer `fast` names.
fn splitter(fast: Fast) -> fn(&[u8], usize) -> usize {
    match fast {
        Fast::O200k => split::o200k,
        Fast::Cl100k => split::cl100k,
        Fast::Gpt2 => split::gpt2,
    }
}

/// The data of an exact encoding.
fn spec(encoding: Encoding) -> &'static Spec {
    encoding.spec().expect("an exact encoding")
}

/// The pieces the encoding's hand-written pre-tokenizer splits `text` into.
fn pieces(encoding: Encoding, text: &str) -> Vec<&str> {
    let split = splitter(spec(encoding).fast.expect("a hand-written pre-tokenizer"));
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let end = split(text.as_bytes(), i);
        pieces.push(&text[i..end]);
        i = end;
    }
    pieces
}

/// The pieces the encoding's pattern, run by the generic matcher, splits `text` into.
fn pattern_pieces(encoding: Encoding, text: &str) -> Vec<&str> {
    matches(spec(encoding).pattern, text)
}

fn matches<'t>(pattern: &Pattern, text: &'t str) -> Vec<&'t str> {
    let mut pieces = Vec::new();
    pattern.for_each_piece(text.as_bytes(), |start, end| pieces.push(&text[start..end]));
    pieces
}

/// The token ranks of `text` (special-token strings as ordinary text).
fn encode(encoding: Encoding, text: &str) -> Vec<u32> {
    let ranks = spec(encoding).ranks;
    let mut out = Vec::new();
    let mut scratch = Scratch::default();
    for piece in pieces(encoding, text) {
        ranks.encode_piece(piece.as_bytes(), &mut scratch, &mut out);
    }
    out
}

/// The bytes of token `rank`, if the encoding has it.
fn token_bytes(encoding: Encoding, rank: u32) -> Option<&'static [u8]> {
    let ranks = spec(encoding).ranks;
    ((rank as usize) < ranks.len()).then(|| ranks.token(rank))
}

/// The count through the generic matcher, as an encoding without a hand-written
/// pre-tokenizer is counted.
fn count_by_pattern(encoding: Encoding, text: &str) -> usize {
    let spec = spec(encoding);
    count_with_pattern(spec.ranks, spec.pattern, text.as_bytes())
}

/// The exact encodings, with the reference constructor of each.
type Reference = fn() -> anyhow::Result<CoreBPE>;

const ENCODINGS: [(Encoding, Reference); 5] = [
    (Encoding::O200kBase, tiktoken_rs::o200k_base),
    (Encoding::O200kHarmony, tiktoken_rs::o200k_harmony),
    (Encoding::Cl100kBase, tiktoken_rs::cl100k_base),
    (Encoding::P50kBase, tiktoken_rs::p50k_base),
    (Encoding::R50kBase, tiktoken_rs::r50k_base),
];

/// The reference encoder of `encoding`, built once per test process.
fn reference(encoding: Encoding) -> &'static CoreBPE {
    static CELLS: [OnceLock<CoreBPE>; 5] = [const { OnceLock::new() }; 5];
    let n = ENCODINGS.iter().position(|(e, _)| *e == encoding).unwrap();
    CELLS[n].get_or_init(|| ENCODINGS[n].1().unwrap())
}

/// The split patterns exactly as tiktoken-rs compiles them (tiktoken_ext/openai_public.rs).
const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// The reference pre-tokenizer of `encoding`: its pattern run by fancy-regex.
fn reference_pattern(encoding: Encoding) -> &'static fancy_regex::Regex {
    static CELLS: [OnceLock<fancy_regex::Regex>; 3] = [const { OnceLock::new() }; 3];
    let (n, pattern) = match encoding {
        Encoding::O200kBase | Encoding::O200kHarmony => (0, tiktoken_rs::O200K_BASE_PAT_STR),
        Encoding::Cl100kBase => (1, CL100K_PATTERN),
        _ => (2, GPT2_PATTERN),
    };
    CELLS[n].get_or_init(|| fancy_regex::Regex::new(pattern).unwrap())
}

/// Asserts that ctx splits `text` into the reference's pieces, encodes it to exactly the
/// reference's ranks, and counts as many.
fn assert_same(encoding: Encoding, text: &str) {
    let expected_pieces: Vec<&str> = reference_pattern(encoding)
        .find_iter(text)
        .map(|m| m.unwrap().as_str())
        .collect();
    assert_eq!(
        pieces(encoding, text),
        expected_pieces,
        "{encoding} splits {text:?} differently"
    );
    assert_eq!(
        pattern_pieces(encoding, text),
        expected_pieces,
        "{encoding}'s pattern splits {text:?} differently"
    );
    let expected = reference(encoding).encode_ordinary(text);
    let actual = encode(encoding, text);
    if actual != expected {
        panic!(
            "{encoding} encodes {text:?} differently\n  ctx:       {actual:?}\n  reference: {expected:?}"
        );
    }
    assert_eq!(
        encoding.count(text),
        expected.len(),
        "{encoding} count of {text:?}"
    );
    assert_eq!(
        count_by_pattern(encoding, text),
        expected.len(),
        "{encoding} count of {text:?} through its pattern"
    );
}

fn assert_same_everywhere(text: &str) {
    for (encoding, _) in ENCODINGS {
        assert_same(encoding, text);
    }
}

/// The reference's ordinary (non-special) tokens: bytes to rank.
fn reference_ranks(encoding: Encoding) -> HashMap<Vec<u8>, u32> {
    let bpe = reference(encoding);
    let special: HashSet<&str> = bpe.special_tokens();
    (0..210_000u32)
        .filter_map(|rank| Some((bpe.decode_bytes(&[rank]).ok()?, rank)))
        .filter(|(bytes, _)| !std::str::from_utf8(bytes).is_ok_and(|s| special.contains(s)))
        .collect()
}

#[test]
fn rank_tables_equal_the_reference() {
    for (encoding, _) in ENCODINGS {
        let ranks = reference_ranks(encoding);
        for (bytes, &rank) in &ranks {
            assert_eq!(
                token_bytes(encoding, rank),
                Some(bytes.as_slice()),
                "{encoding} rank {rank}"
            );
        }
        let ours = (0..210_000u32)
            .filter(|&r| token_bytes(encoding, r).is_some_and(|b| !b.is_empty()))
            .count();
        assert_eq!(ours, ranks.len(), "{encoding}: number of tokens");
    }
}

#[test]
fn edge_cases_of_the_split_patterns() {
    let cases = [
        "",
        " ",
        "\n",
        "a",
        "Hello world",
        "I'm sure they'll say we've done it, they're sure he's right, I'd say.",
        "I'M SURE THEY'LL SAY WE'VE DONE IT",
        "don\u{2019}t ' s 's 'S 'ſ 'ſt x'ſ O'NEIL",
        "  leading and trailing  ",
        "tabs\tand\u{a0}nbsp\u{3000}ideographic\u{2028}line\u{85}next",
        "a\r\nb\n\n\nc \n d\r\r\n",
        "end with newlines\n\n  ",
        "end with spaces   ",
        "  \n  x",
        "1234567 12 1 ١٢٣٤ ⅫⅫ ½½½½ 𝟘𝟙𝟚𝟛",
        "!!!/// ...\n/\r\n// // 'quoted' \"double\"",
        "CamelCaseWord HTTPServer iPhone XMLHttpRequest ǅemal ᾈᾈ",
        "e\u{301}te\u{301} \u{301}\u{301}a \u{903}x Ṩ\u{323}",
        "ʰʰa aʰ ªb ー長音 ﾃｽﾄ",
        "中文字符，标点。日本語のテキスト한국어 텍스트",
        "emoji 😀👍🏽 family 👨\u{200d}👩\u{200d}👧 flag 🇫🇷 ❤\u{fe0f}",
        "zero\u{200b}width\u{feff}bom",
        "<|endoftext|> <|fim_prefix|> <|endofprompt|>",
        "{\"role\":\"tool\",\"content\":\"{\\\"ok\\\":true,\\\"n\\\":[1,2,3]}\"}",
        "fn main() {\n    println!(\"{}\", 42);\n}\n",
    ];
    for text in cases {
        assert_same_everywhere(text);
    }
}

/// Every string of every corpus conversation, and each file's raw text.
#[test]
fn the_whole_corpus() {
    let mut files = Vec::new();
    collect_json(Path::new("tests/corpus"), &mut files);
    assert!(
        files.len() >= 20,
        "the corpus of real conversations is in tests/corpus"
    );
    for file in files {
        let raw = std::fs::read_to_string(&file).unwrap();
        let mut strings = vec![raw.clone()];
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&raw) {
            collect_strings(&value, &mut strings);
        }
        for text in &strings {
            for encoding in [
                Encoding::O200kBase,
                Encoding::Cl100kBase,
                Encoding::P50kBase,
                Encoding::R50kBase,
            ] {
                assert_same(encoding, text);
            }
        }
    }
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_json(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl")
        {
            out.push(path);
        }
    }
}

fn collect_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                out.push(key.clone());
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Characters chosen to sit on the boundaries of the split patterns' classes.
const TRICKY: &[char] = &[
    ' ',
    ' ',
    ' ',
    '\t',
    '\n',
    '\n',
    '\r',
    '\u{b}',
    '\u{c}',
    '\u{85}',
    '\u{a0}',
    '\u{1680}',
    '\u{2000}',
    '\u{2028}',
    '\u{2029}',
    '\u{202f}',
    '\u{3000}',
    '\u{200b}',
    '\u{feff}',
    '\'',
    '\'',
    '\u{2019}',
    's',
    't',
    'm',
    'd',
    'l',
    'v',
    'r',
    'e',
    'S',
    'T',
    'L',
    'V',
    'R',
    'E',
    'D',
    'M',
    'ſ',
    'K',
    'a',
    'z',
    'A',
    'Z',
    'é',
    'É',
    'ß',
    'ǅ',
    'ᾈ',
    'ʰ',
    'ª',
    'ー',
    'א',
    '字',
    'あ',
    'ア',
    'ﾃ',
    '한',
    '\u{301}',
    '\u{323}',
    '\u{903}',
    '\u{20dd}',
    '\u{5b0}',
    '0',
    '1',
    '9',
    '٣',
    'Ⅻ',
    '½',
    '²',
    '𝟘',
    '!',
    '.',
    ',',
    '/',
    '/',
    '\\',
    '"',
    '#',
    '(',
    ')',
    '{',
    '}',
    '<',
    '|',
    '>',
    '_',
    '-',
    '@',
    '😀',
    '👍',
    '🏽',
    '\u{200d}',
    '\u{fe0f}',
    '🇫',
    '中',
    '。',
    '，',
    'Ж',
    'ж',
    'Ω',
    'ω',
    'ℕ',
    '€',
    '\u{0}',
    '\u{7f}',
    '\u{ad}',
    '\u{e000}',
    '\u{10ffff}',
];

fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        6 => prop::sample::select(TRICKY),
        2 => prop::char::range('a', 'z'),
        1 => any::<char>(),
    ]
}

/// Text made of single characters and runs of one character (up to 300 long).
fn tricky_text() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        8 => tricky_char().prop_map(|c| c.to_string()),
        1 => (tricky_char(), 2..300usize).prop_map(|(c, n)| c.to_string().repeat(n)),
        2 => prop::sample::select(&[
            "'s", "'ll", "'VE", "'Re", " the", " The", "\n\n", "\r\n", " \n", "  ", "123", "4567",
            "://", "/*", "*/", "  \t", "I'm", "DON'T", "ſ's",
        ][..])
        .prop_map(str::to_string),
    ];
    prop::collection::vec(segment, 0..80).prop_map(|parts| parts.concat())
}

/// Long runs of letters from a small alphabet: pieces of hundreds or thousands of bytes, which
/// are merged with the heap (as they are in the reference, from 100 bytes on).
fn long_words() -> impl Strategy<Value = String> {
    (
        prop::sample::select(&["ab", "abc", "xyz", "aeiou", "hello", "字中文", "éa"][..]),
        100..3000usize,
    )
        .prop_flat_map(|(alphabet, len)| {
            let chars: Vec<char> = alphabet.chars().collect();
            prop::collection::vec(prop::sample::select(chars), len)
        })
        .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn generated_text_encodes_like_the_reference(text in tricky_text()) {
        assert_same_everywhere(&text);
    }

    #[test]
    fn arbitrary_unicode_encodes_like_the_reference(text in any::<String>()) {
        assert_same_everywhere(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    #[test]
    fn long_pieces_merge_like_the_reference(text in long_words()) {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::R50kBase] {
            assert_same(encoding, &text);
        }
    }
}

/// Pieces longer than ctx's merge window (64 KB), of words run together, whose parts change
/// near any cut: ctx merges them a window at a time and must still match the reference token
/// for token.
#[test]
fn pieces_longer_than_a_merge_window_encode_like_the_reference() {
    let syllables = [
        "th", "e", "re", "in", "an", "er", "on", "at", "ing", "tion", "s", "ou", "ee", "ab", "x",
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut text = String::new();
    while text.len() < 300_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(syllables[(x >> 33) as usize % syllables.len()]);
    }
    for encoding in [
        Encoding::O200kBase,
        Encoding::Cl100kBase,
        Encoding::R50kBase,
    ] {
        assert_eq!(pieces(encoding, &text).len(), 1);
        assert_same(encoding, &text);
    }
}

/// The reference's byte-pair merges with no pre-tokenizer: the pattern takes the whole text as
/// one piece (a pattern without look-around, which fancy-regex hands to the regex crate, so it
/// does not recurse).
fn whole_piece_reference(encoding: Encoding) -> CoreBPE {
    let ranks: HashMap<Vec<u8>, u32> = reference_ranks(encoding);
    CoreBPE::new(ranks.into_iter().collect(), Default::default(), r"(?s:.+)").unwrap()
}

/// A megabyte-long run of one character, and of whitespace, split as the pattern must split it
/// (checked against ctx's pieces), with each piece merged by the reference.
#[test]
fn megabyte_runs_count_exactly() {
    const N: usize = 1 << 20;
    let families = [
        Encoding::O200kBase,
        Encoding::Cl100kBase,
        Encoding::R50kBase,
    ];
    for encoding in families {
        let whole = whole_piece_reference(encoding);
        let digits_split = |n: usize| -> Vec<usize> {
            if encoding == Encoding::R50kBase {
                vec![n] // ` ?\p{N}+`
            } else {
                let mut v = vec![3; n / 3]; // `\p{N}{1,3}`
                if n % 3 != 0 {
                    v.push(n % 3);
                }
                v
            }
        };
        // (text, lengths of its pieces in bytes)
        let cases: Vec<(String, Vec<usize>)> = vec![
            ("a".repeat(N), vec![N]),
            ("字".repeat(N / 3), vec![N / 3 * 3]),
            (" ".repeat(N), vec![N]),
            ("\n".repeat(N), vec![N]),
            (format!("{}x", " ".repeat(N)), vec![N - 1, 2]),
            (format!("x{}", "\t".repeat(N)), vec![1, N]),
            ("7".repeat(N), digits_split(N)),
        ];
        for (text, lengths) in cases {
            let pieces = pieces(encoding, &text);
            assert!(
                pattern_pieces(encoding, &text) == pieces,
                "{encoding}: the pattern splits a run of {:?} differently",
                &text[..1]
            );
            let got: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
            assert_eq!(
                got,
                lengths,
                "{encoding}: pieces of a run of {:?}",
                &text[..1]
            );
            let expected: usize = pieces.iter().map(|p| whole.encode_ordinary(p).len()).sum();
            assert_eq!(
                encoding.count(&text),
                expected,
                "{encoding}: count of a run of {:?}",
                &text[..1]
            );
            assert_eq!(
                count_by_pattern(encoding, &text),
                expected,
                "{encoding}: count of a run of {:?} through its pattern",
                &text[..1]
            );
        }
    }
}

/// The patterns build.rs compiled are tiktoken's, character for character.
#[test]
fn the_compiled_patterns_are_the_references() {
    for (encoding, _) in ENCODINGS {
        let expected = match encoding {
            Encoding::O200kBase | Encoding::O200kHarmony => tiktoken_rs::O200K_BASE_PAT_STR,
            Encoding::Cl100kBase => CL100K_PATTERN,
            _ => GPT2_PATTERN,
        };
        assert_eq!(spec(encoding).pattern.source, expected, "{encoding}");
    }
}

/// The generic matcher's matches of each of build.rs's test patterns (other tokenizers' split
/// patterns, and the matcher's features tiktoken's patterns do not use) are fancy-regex's.
fn assert_matches_like_fancy_regex(text: &str) {
    static CELLS: OnceLock<Vec<fancy_regex::Regex>> = OnceLock::new();
    let references = CELLS.get_or_init(|| {
        (pattern::TEST_PATTERNS.iter())
            .map(|p| fancy_regex::Regex::new(p.source).unwrap())
            .collect()
    });
    for (pattern, reference) in pattern::TEST_PATTERNS.iter().zip(references) {
        let expected: Vec<&str> = reference
            .find_iter(text)
            .map(|m| m.unwrap().as_str())
            .collect();
        assert_eq!(
            matches(pattern, text),
            expected,
            "{:?} on {text:?}",
            pattern.source
        );
    }
}

#[test]
fn other_patterns_match_like_fancy_regex_on_edge_cases() {
    for text in [
        "",
        "Hello, World! it's 2024-01-01; THEY'LL   go\n\n  x",
        "aab ab ac aabc abababc a.b. end.   ",
        "12345 x 123x 1234x 99x",
        "  \t lead and trail \r\n ",
        "中文字符，标点。 ſ'S 'll",
    ] {
        assert_matches_like_fancy_regex(text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn other_patterns_match_like_fancy_regex(text in tricky_text()) {
        assert_matches_like_fancy_regex(&text);
    }
}
