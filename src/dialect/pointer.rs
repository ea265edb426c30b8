//! The one way ctx addresses a place inside a document: RFC 6901 JSON pointers
//! (`/messages/3/content/0`), as [`Value::pointer`] reads them. The conversation model, the
//! dialect markers and every operation store pointers; a jq-style path (`.messages[3].content[0]`)
//! is only a way of showing one to the user ([`to_path`]).

use serde_json::Value;

/// The value at `pointer` in `v`, exactly as [`Value::pointer`] finds it, without allocating
/// (ctx's pointers name fixed keys and indices, so nothing needs unescaping on the hot paths).
#[inline]
pub fn get<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(v);
    }
    let rest = pointer.strip_prefix('/')?;
    if rest.contains('~') {
        return v.pointer(pointer);
    }
    rest.split('/').try_fold(v, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => items.get(index(key)?),
        _ => None,
    })
}

/// The value at `pointer` in `v`, for changing it ([`Value::pointer_mut`]: writers are not hot).
pub fn get_mut<'a>(v: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    v.pointer_mut(pointer)
}

/// An array index as RFC 6901 writes it: digits, no sign, no leading zero.
fn index(key: &str) -> Option<usize> {
    if key.starts_with('+') || (key.len() > 1 && key.starts_with('0')) {
        return None;
    }
    key.parse().ok()
}

/// A pointer as the jq-style path ctx shows users: `/messages/3/content/0` →
/// `.messages[3].content[0]`, `/2/tool_calls` → `.[2].tool_calls`, `""` → `""`.
pub fn to_path(pointer: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + 4);
    for token in pointer.split('/').skip(1) {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            if out.is_empty() {
                out.push('.');
            }
            out.push('[');
            out.push_str(token);
            out.push(']');
        } else {
            out.push('.');
            out.push_str(&token.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_as_value_pointer_does() {
        let v = json!({"messages": [{"content": [{"text": "t"}], "a/b": 1, "m~n": 2, "": 3}],
                       "01": 4, "+1": 5});
        for p in [
            "",
            "/",
            "/messages",
            "/messages/0",
            "/messages/0/content/0/text",
            "/messages/00",
            "/messages/+0",
            "/messages/1",
            "/messages/-",
            "/messages/0/a~1b",
            "/messages/0/m~0n",
            "/messages/0/",
            "/01",
            "/+1",
            "messages",
            "/messages/0/content/0/text/x",
        ] {
            assert_eq!(get(&v, p), v.pointer(p), "{p}");
            let mut w = v.clone();
            let mut x = v.clone();
            assert_eq!(get_mut(&mut w, p), x.pointer_mut(p), "{p}");
        }
    }

    #[test]
    fn shows_pointers_as_jq_paths() {
        assert_eq!(to_path("/messages/3/content/0"), ".messages[3].content[0]");
        assert_eq!(to_path("/2/tool_calls"), ".[2].tool_calls");
        assert_eq!(to_path("/tools/1"), ".tools[1]");
        assert_eq!(to_path("/system"), ".system");
        assert_eq!(
            to_path("/tool_calls/0/function/arguments"),
            ".tool_calls[0].function.arguments"
        );
        assert_eq!(to_path(""), "");
    }
}
