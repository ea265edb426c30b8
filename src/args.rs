//! Tool-call arguments: the short form a placeholder names a call by (`pytest -x tests/x.py`,
//! `str_replace /repo/src/x.py …`), and shortening long string values inside old calls' arguments
//! (SPEC §4 `ctx prune --shorten-args`, `ctx fit` step 3).
//!
//! Arguments are OpenAI's `arguments` (a JSON text in a string) or Anthropic's `input` (an
//! object). Shortening keeps them valid JSON: a JSON text is parsed, its string values are cut,
//! and it is written back compactly; a text that is not JSON is left as it is. Object keys,
//! numbers and the structure never change. Each cut keeps the value's start and ends with a
//! marker giving the chars cut ([`clip_start`]), and a cut value counts at most the limit, so
//! shortening again changes nothing. This module decides nothing about which calls to shorten
//! (that is `prune`'s job) and counts tokens only through [`Encoding::count`].

use anyhow::Result;
use serde_json::Value;

use crate::clip::{clip_start, is_cut_marker};
use crate::excerpt::{ARGS_CHARS, clip_line};
use crate::tokenizer::Encoding;

/// A one-line form of a call's arguments, at most [`ARGS_CHARS`] chars: the values of an object's
/// keys in order, each its first line (`…` when it has more), joined by spaces; a text that is not
/// JSON, its first line.
pub fn short_form(args: &Value) -> String {
    let mut out = String::new();
    match args {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => describe(&v, &mut out),
            Err(_) => push_first_line(s, &mut out),
        },
        other => describe(other, &mut out),
    }
    clip_line(&out, ARGS_CHARS)
}

fn describe(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            for value in map.values() {
                if out.chars().count() > ARGS_CHARS {
                    break;
                }
                match value {
                    Value::Null => {}
                    Value::String(s) if s.trim().is_empty() => {}
                    Value::String(s) => push_first_line(s, out),
                    other => push_part(&compact(other), out),
                }
            }
        }
        Value::String(s) => push_first_line(s, out),
        Value::Null => {}
        other => push_part(&compact(other), out),
    }
}

/// A value's compact JSON, read no further than a short form needs.
fn compact(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(ARGS_CHARS + 1) {
        Some((i, _)) => s[..i].to_string(),
        None => s,
    }
}

fn push_first_line(s: &str, out: &mut String) {
    let mut lines = s.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return;
    };
    let first = clip_line(first, ARGS_CHARS + 1);
    if lines.next().is_some() {
        push_part(&format!("{first} …"), out);
    } else {
        push_part(&first, out);
    }
}

fn push_part(part: &str, out: &mut String) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(part);
}

/// Cuts every string value over `max_tokens` tokens inside `args` (a JSON text in a string, or a
/// JSON value) to its start and a cut marker, keeping the JSON valid. Returns whether anything
/// changed; a string that is not JSON is never changed.
pub fn shorten(args: &mut Value, enc: Encoding, max_tokens: usize) -> Result<bool> {
    match args {
        Value::String(text) => {
            // Nothing in it can be over the limit: a token is at least one byte.
            if text.len() <= max_tokens {
                return Ok(false);
            }
            let Ok(mut parsed) = serde_json::from_str::<Value>(text) else {
                return Ok(false);
            };
            if !shorten_values(&mut parsed, enc, max_tokens)? {
                return Ok(false);
            }
            *text = parsed.to_string();
            Ok(true)
        }
        other => shorten_values(other, enc, max_tokens),
    }
}

fn shorten_values(v: &mut Value, enc: Encoding, max_tokens: usize) -> Result<bool> {
    Ok(match v {
        Value::String(s) => {
            if s.len() <= max_tokens || is_cut_marker(s) {
                return Ok(false);
            }
            match clip_start(enc, s, max_tokens)? {
                Some(cut) => {
                    *s = cut;
                    true
                }
                None => false,
            }
        }
        Value::Array(items) => {
            let mut changed = false;
            for x in items {
                changed |= shorten_values(x, enc, max_tokens)?;
            }
            changed
        }
        Value::Object(map) => {
            let mut changed = false;
            for x in map.values_mut() {
                changed |= shorten_values(x, enc, max_tokens)?;
            }
            changed
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_forms_name_what_the_call_did() {
        let cases = [
            (
                json!("{\"command\": \"pytest -x tests/test_io.py\"}"),
                "pytest -x tests/test_io.py",
            ),
            (
                json!({"command": "str_replace", "path": "/repo/src/x.py", "old_str": "def f():\n    return 1", "new_str": "x"}),
                "str_replace /repo/src/x.py def f(): … x",
            ),
            (
                json!("{\"command\": \"cat <<'EOF' > fix.py\\nimport os\\nEOF\"}"),
                "cat <<'EOF' > fix.py …",
            ),
            (
                json!({"path": "src/x.py", "line": 12, "recursive": true}),
                "src/x.py 12 true",
            ),
            (json!({"paths": ["a", "b"]}), "[\"a\",\"b\"]"),
            (json!("not json at all\nsecond line"), "not json at all …"),
            (json!("{}"), ""),
            (json!({}), ""),
            (Value::Null, ""),
        ];
        for (args, want) in cases {
            assert_eq!(short_form(&args), want, "{args}");
        }
        let long = json!({"command": "x".repeat(500)});
        let s = short_form(&long);
        assert_eq!(s.chars().count(), ARGS_CHARS);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn shortening_keeps_valid_json_and_the_start_and_is_idempotent() {
        let enc = Encoding::O200kBase;
        let script = format!(
            "cat <<'EOF' > fix.py\n{}EOF",
            "print('patched line')\n".repeat(200)
        );
        let mut args =
            json!(json!({"command": script, "timeout": 30, "tags": ["a", "b"]}).to_string());
        assert!(shorten(&mut args, enc, 50).unwrap());
        let text = args.as_str().unwrap();
        let parsed: Value = serde_json::from_str(text).expect("still valid JSON");
        let command = parsed["command"].as_str().unwrap();
        assert!(
            command.starts_with("cat <<'EOF' > fix.py\nprint('patched line')"),
            "{command}"
        );
        assert!(command.ends_with(" chars cut]"), "{command}");
        assert!(enc.count(command) <= 50);
        assert_eq!(parsed["timeout"], json!(30));
        assert_eq!(parsed["tags"], json!(["a", "b"]));
        let once = args.clone();
        assert!(
            !shorten(&mut args, enc, 50).unwrap(),
            "shortening again changes nothing"
        );
        assert_eq!(args, once);

        // Anthropic input: an object, shortened in place.
        let mut input = json!({"file_text": "word ".repeat(1000), "path": "a.txt"});
        assert!(shorten(&mut input, enc, 30).unwrap());
        assert!(
            input["file_text"]
                .as_str()
                .unwrap()
                .starts_with("word word")
        );
        assert_eq!(input["path"], "a.txt");
        assert!(!shorten(&mut input, enc, 30).unwrap());

        // Not JSON: left alone. Short values: left alone.
        let mut broken = json!(format!("{{\"command\": \"{}", "x ".repeat(500)));
        let before = broken.clone();
        assert!(!shorten(&mut broken, enc, 10).unwrap());
        assert_eq!(broken, before);
        let mut small = json!("{\"path\": \"a.txt\"}");
        assert!(!shorten(&mut small, enc, 10).unwrap());
        assert_eq!(
            small,
            json!("{\"path\": \"a.txt\"}"),
            "formatting kept when nothing is cut"
        );

        // A limit too small for any start: the bare marker, recognised next time.
        let mut tiny = json!({"v": "alpha beta gamma delta ".repeat(20)});
        assert!(shorten(&mut tiny, enc, 2).unwrap());
        assert!(is_cut_marker(tiny["v"].as_str().unwrap()), "{tiny}");
        let once = tiny.clone();
        assert!(!shorten(&mut tiny, enc, 2).unwrap());
        assert_eq!(tiny, once);
    }
}
