//! OpenAI function definitions rendered as the model reads them (docs/counting.md, "Tool
//! definitions").
//!
//! Chat Completions turns `tools` (and legacy `functions`) into a TypeScript-like namespace
//! before the model sees them:
//!
//! ```text
//! namespace functions {
//!
//! // Get the current weather in a given location
//! type get_current_weather = (_: {
//! // The city and state, e.g. San Francisco, CA
//! location: string,
//! unit?: "celsius" | "fahrenheit",
//! }) => any;
//!
//! } // namespace functions
//! ```
//!
//! The layout follows what public measurements of the API's prompt tokens reproduce (the
//! community's worked-out rendering, checked against 47 API counts in
//! src/tests/tool_definitions.rs).
//! Constructs those measurements do not cover are rendered too, on the side that costs more
//! tokens, and each one leaves a note saying the count is an estimate. Where measurements from
//! different model snapshots disagree, the rendering takes the larger count.
//!
//! Rendering never fails and never recurses without bound: `$ref`s are expanded in place with a
//! cycle guard and a size budget, and schemas deeper than [`MAX_DEPTH`] are counted by their text.
//! This module only writes text: it neither tokenizes nor reads the request around the
//! definitions (the framing, `tool_choice` and the system message are the counter's).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Schema levels rendered as types; deeper ones are counted by their text.
pub const MAX_DEPTH: usize = 64;
/// Bytes of text `$ref` expansions may add to one namespace before further references are
/// rendered by name only (a schema whose references fan out can otherwise grow exponentially).
pub const MAX_REF_BYTES: usize = 1 << 20;

/// A namespace and what in it is not verified by API measurements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The namespace text, `namespace functions {` to `} // namespace functions`.
    pub text: String,
    /// One note per unverified or disputed construct, ready for the report's `estimated`.
    pub notes: BTreeSet<String>,
}

/// Renders function definitions (the objects with `name`, `description`, `parameters`) into
/// the namespace the model reads.
pub fn render(functions: &[&Value]) -> Rendered {
    let mut r = Renderer {
        out: String::from("namespace functions {\n\n"),
        notes: BTreeSet::new(),
        root: &Value::Null,
        expanding: Vec::new(),
        ref_bytes: 0,
        outer_start: 0,
    };
    for f in functions {
        r.function(f);
    }
    r.out.push_str("} // namespace functions");
    Rendered {
        text: r.out,
        notes: r.notes,
    }
}

/// Prefix of a note about a construct no API measurement covers.
fn unverified_note(what: &str) -> String {
    format!("tool definitions: {what} is not verified against API counts")
}

/// Prefix of a note about a construct on which measurements of different snapshots disagree.
fn disputed_note(what: &str) -> String {
    format!("tool definitions: {what}: API measurements disagree, counted on the high side")
}

/// Keywords of a property schema that the measured cases cover (rendered or ignored as the
/// API does). Others are rendered where ctx knows how, and noted.
const VERIFIED_KEYS: &[&str] = &[
    "type",
    "description",
    "enum",
    "items",
    "properties",
    "required",
    "anyOf",
    "const",
    "default",
    "additionalProperties",
];

struct Renderer<'a> {
    out: String,
    notes: BTreeSet<String>,
    /// The current function's `parameters`, which `$ref`s point into.
    root: &'a Value,
    /// `$ref`s being expanded, outermost first (the cycle guard).
    expanding: Vec<&'a str>,
    /// Bytes added by finished outermost `$ref` expansions.
    ref_bytes: usize,
    /// Where the outermost expansion under way started in `out`.
    outer_start: usize,
}

impl<'a> Renderer<'a> {
    fn unverified(&mut self, what: &str) {
        self.notes.insert(unverified_note(what));
    }

    fn disputed(&mut self, what: &str) {
        self.notes.insert(disputed_note(what));
    }

    /// One function: its description, then its type line(s), then a blank line.
    fn function(&mut self, f: &'a Value) {
        let Some(obj) = f.as_object() else {
            self.unverified("a function that is not an object");
            self.out.push_str("// ");
            leaves(f, &mut self.out);
            self.out.push_str("\ntype  = () => any;\n\n");
            return;
        };
        for (key, v) in obj {
            match key.as_str() {
                "name" | "description" | "parameters" => {}
                // A Responses API function tool carries its own `type`.
                "type" if v == "function" => {}
                "strict" if v == &Value::Bool(false) || v.is_null() => {}
                "strict" => self.unverified("`strict`"),
                other => self.unverified(&format!("`{other}` in a function")),
            }
        }
        match obj.get("description") {
            None | Some(Value::Null) => {}
            Some(Value::String(d)) if d.is_empty() => {}
            Some(Value::String(d)) => self.comment(d, 0),
            Some(other) => {
                self.unverified("a description that is not a string");
                self.comment(&other.to_string(), 0);
            }
        }
        let name = match obj.get("name") {
            Some(Value::String(n)) => n.as_str(),
            _ => {
                self.unverified("a function without a name");
                ""
            }
        };
        self.root = obj.get("parameters").unwrap_or(&Value::Null);
        self.expanding.clear();
        let params = match self.root {
            Value::Null => None,
            Value::Object(p) => Some(p),
            other => {
                self.unverified("parameters that are not an object schema");
                let _ = write!(self.out, "type {name} = () => any; // ");
                leaves(other, &mut self.out);
                self.out.push_str("\n\n");
                return;
            }
        };
        let props = params
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object)
            .filter(|p| !p.is_empty());
        match (params, props) {
            (Some(p), Some(props)) => {
                self.root_keys(p);
                let _ = writeln!(self.out, "type {name} = (_: {{");
                self.properties(p, props, 0, 1);
                self.out.push_str("\n}) => any;\n\n");
                if !props.values().any(|s| {
                    s.get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| !d.is_empty())
                }) {
                    self.disputed("parameters none of which has a description");
                }
            }
            (Some(p), None)
                if ["anyOf", "oneOf", "allOf", "$ref"]
                    .iter()
                    .any(|k| p.contains_key(*k)) =>
            {
                self.root_keys(p);
                self.unverified("parameters that are not a list of properties");
                let _ = write!(self.out, "type {name} = (_: ");
                self.ty(self.root, 0, 1);
                self.out.push_str(") => any;\n\n");
            }
            (p, _) => {
                if let Some(p) = p {
                    self.root_keys(p);
                }
                let _ = write!(self.out, "type {name} = () => any;\n\n");
            }
        }
    }

    /// Notes the keywords of the `parameters` object itself.
    fn root_keys(&mut self, p: &Map<String, Value>) {
        for (key, v) in p {
            match key.as_str() {
                "properties" | "required" => {}
                "type" if v == "object" => {}
                "additionalProperties" if v == &Value::Bool(false) => {}
                "description" => self.unverified("a description of the parameters object"),
                "anyOf" | "oneOf" | "allOf" | "$ref" => {}
                other => self.unverified(&format!("`{other}`")),
            }
        }
    }

    /// `// text`, one comment line per line of `text` (split at `\n`, so that no line of a
    /// multi-line description goes uncommented), each starting at `indent`.
    fn comment(&mut self, text: &str, indent: usize) {
        if text.contains(['\n', '\r']) {
            self.unverified("a multi-line description");
        }
        for line in text.split('\n') {
            indent_to(&mut self.out, indent);
            self.out.push_str("// ");
            self.out.push_str(line);
            self.out.push('\n');
        }
    }

    /// The properties of object schema `obj`, one entry per property, entries separated by
    /// newlines (no newline before the first or after the last). Every entry starts at
    /// `indent`; lines inside a nested type carry their own indentation.
    fn properties(
        &mut self,
        obj: &'a Map<String, Value>,
        props: &'a Map<String, Value>,
        indent: usize,
        depth: usize,
    ) {
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => {
                self.unverified("`required` that is not a list of names");
                Vec::new()
            }
        };
        let mut first = true;
        for (key, schema) in props {
            if !first {
                self.out.push('\n');
            }
            first = false;
            if let Some(title) = schema.get("title") {
                self.unverified("`title`");
                self.comment(&as_text(title), indent);
                indent_to(&mut self.out, indent);
                self.out.push_str("//\n");
            }
            let own = schema.get("description").filter(|d| !d.is_null());
            match own {
                Some(Value::String(d)) if d.is_empty() => {}
                Some(Value::String(d)) => self.comment(d, indent),
                Some(other) => {
                    self.unverified("a description that is not a string");
                    self.comment(&other.to_string(), indent);
                }
                None => {}
            }
            // Descriptions the verified layout has no place for (array items, union variants,
            // referenced schemas): counted as comment lines rather than dropped.
            let mut inner = Vec::new();
            inner_descriptions(schema, self.root, &mut inner, 0, &mut 64);
            inner.retain(|d| Some(*d) != own.and_then(Value::as_str) && !d.is_empty());
            inner.dedup();
            if !inner.is_empty() {
                self.unverified("a description inside array items, union variants or references");
                for d in inner {
                    self.comment(d, indent);
                }
            }
            if let Some(ex) = schema.get("examples") {
                self.unverified("`examples`");
                indent_to(&mut self.out, indent);
                self.out.push_str("// Examples:\n");
                for e in ex
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(std::slice::from_ref(ex))
                {
                    self.comment(&format!("- {e}"), indent);
                }
            }
            indent_to(&mut self.out, indent);
            self.out.push_str(key);
            if !required.contains(&key.as_str()) {
                self.out.push('?');
            }
            self.out.push_str(": ");
            self.ty(schema, indent, depth + 1);
            self.out.push(',');
            match schema.get("default") {
                None => {}
                Some(d) => {
                    if !d.is_string() {
                        self.unverified("a `default` that is not a string");
                    }
                    let _ = write!(self.out, " // default: {d}");
                }
            }
        }
    }

    /// The type of `schema`. `indent` is the indentation of the entry the type belongs to;
    /// `depth` counts schema levels from the parameters object.
    fn ty(&mut self, schema: &'a Value, indent: usize, depth: usize) {
        if depth > MAX_DEPTH {
            self.unverified(&format!(
                "a schema nested more than {MAX_DEPTH} levels deep"
            ));
            self.out.push_str("any // ");
            leaves(schema, &mut self.out);
            return;
        }
        let s = match schema {
            Value::Object(s) => s,
            Value::Bool(_) => {
                self.unverified("a boolean schema");
                self.out.push_str("any");
                return;
            }
            other => {
                self.unverified("a schema that is not an object");
                self.out.push_str("any // ");
                leaves(other, &mut self.out);
                return;
            }
        };
        for (key, v) in s {
            match key.as_str() {
                k if VERIFIED_KEYS.contains(&k) => {}
                // Noted where they are rendered.
                "$ref" | "oneOf" | "allOf" | "nullable" => {}
                "additionalProperties" if v == &Value::Bool(false) => {}
                other => self.unverified(&format!("`{other}`")),
            }
        }
        if let Some(ap) = s.get("additionalProperties") {
            if ap != &Value::Bool(false) {
                self.unverified("`additionalProperties` other than false");
            }
        }
        let nullable = match s.get("nullable") {
            Some(Value::Bool(true)) => {
                self.unverified("`nullable`");
                true
            }
            Some(Value::Bool(false)) | None => false,
            Some(_) => {
                self.unverified("`nullable`");
                false
            }
        };
        self.ty_body(s, indent, depth);
        if nullable {
            self.out.push_str(" | null");
        }
    }

    fn ty_body(&mut self, s: &'a Map<String, Value>, indent: usize, depth: usize) {
        if let Some(r) = s.get("$ref") {
            self.reference(r, indent, depth);
            return;
        }
        for (key, note) in [
            ("anyOf", None),
            ("oneOf", Some("`oneOf`")),
            ("allOf", Some("`allOf`")),
        ] {
            let Some(variants) = s.get(key) else { continue };
            if let Some(note) = note {
                self.unverified(note);
            }
            let sep = if key == "allOf" { " & " } else { " | " };
            match variants.as_array() {
                Some(vs) if !vs.is_empty() => {
                    for (k, v) in vs.iter().enumerate() {
                        if k > 0 {
                            self.out.push_str(sep);
                        }
                        self.ty(v, indent, depth + 1);
                    }
                }
                _ => {
                    self.unverified(&format!("`{key}` that is not a list of schemas"));
                    self.out.push_str("any");
                }
            }
            return;
        }
        match s.get("type") {
            Some(Value::String(t)) => self.typed(t, s, indent, depth),
            Some(Value::Array(types)) if !types.is_empty() && s.contains_key("enum") => {
                // Strict mode's optional enums: `"type": ["string", "null"]` with `null`
                // among the values. The values are the type.
                self.unverified("a list of types");
                self.literals(s.get("enum"), true, false);
            }
            Some(Value::Array(types)) if !types.is_empty() => {
                self.unverified("a list of types");
                for (k, t) in types.iter().enumerate() {
                    if k > 0 {
                        self.out.push_str(" | ");
                    }
                    match t {
                        Value::String(t) => self.typed(t, s, indent, depth),
                        other => {
                            self.unverified("a schema whose type is not a name");
                            self.out.push_str(&other.to_string());
                        }
                    }
                }
            }
            None if s.contains_key("properties") => {
                self.unverified("an object schema without `type`");
                self.typed("object", s, indent, depth);
            }
            None if s.contains_key("items") => {
                self.unverified("an array schema without `type`");
                self.typed("array", s, indent, depth);
            }
            None if s.contains_key("enum") => {
                self.unverified("an `enum` without a type");
                self.literals(s.get("enum"), false, false);
            }
            None => self.out.push_str("any"),
            Some(other) => {
                self.unverified("a schema whose type is not a name");
                self.out.push_str("any // ");
                leaves(other, &mut self.out);
            }
        }
    }

    /// A schema of JSON type `t`.
    fn typed(&mut self, t: &str, s: &'a Map<String, Value>, indent: usize, depth: usize) {
        match t {
            "string" if s.contains_key("enum") => self.literals(s.get("enum"), true, true),
            "number" | "integer" if s.contains_key("enum") => {
                self.disputed("number enums");
                self.literals(s.get("enum"), false, false);
            }
            "string" => self.out.push_str("string"),
            "number" | "integer" => self.out.push_str("number"),
            "boolean" | "null" => {
                if s.contains_key("enum") {
                    self.unverified("an `enum` on a boolean or null");
                    self.literals(s.get("enum"), false, false);
                } else {
                    self.out.push_str(t);
                }
            }
            "object" => {
                if depth > 1 {
                    self.disputed("nested objects");
                }
                if s.contains_key("enum") {
                    self.unverified("an `enum` on an object");
                }
                match s.get("properties") {
                    Some(Value::Object(props)) if !props.is_empty() => {
                        self.out.push_str("{\n");
                        self.properties(s, props, indent + 2, depth);
                        self.out.push_str("\n}");
                    }
                    Some(Value::Object(_)) | None => {
                        self.unverified("an object without `properties`");
                        self.out.push_str("{\n\n}");
                    }
                    Some(other) => {
                        self.unverified("`properties` that is not an object");
                        self.out.push_str("{\n// ");
                        leaves(other, &mut self.out);
                        self.out.push_str("\n}");
                    }
                }
            }
            "array" => {
                if s.contains_key("enum") {
                    self.unverified("an `enum` on an array");
                }
                match s.get("items") {
                    Some(items @ Value::Object(_)) => {
                        let union = is_union(items, self.root);
                        if union {
                            self.unverified("an array of a union");
                            self.out.push('(');
                        }
                        self.ty(items, indent, depth + 1);
                        if union {
                            self.out.push(')');
                        }
                        self.out.push_str("[]");
                    }
                    Some(Value::Array(tuple)) => {
                        self.unverified("a tuple of `items`");
                        self.out.push('[');
                        for (k, item) in tuple.iter().enumerate() {
                            if k > 0 {
                                self.out.push_str(", ");
                            }
                            self.ty(item, indent, depth + 1);
                        }
                        self.out.push(']');
                    }
                    Some(other) => {
                        self.unverified("an array without an `items` schema");
                        if other.is_boolean() {
                            self.out.push_str("any[]");
                        } else {
                            self.out.push_str("any[] // ");
                            leaves(other, &mut self.out);
                        }
                    }
                    None => {
                        self.unverified("an array without `items`");
                        self.out.push_str("any[]");
                    }
                }
            }
            other => {
                self.unverified(&format!("the type `{other}`"));
                self.out.push_str("any");
            }
        }
    }

    /// An enum's values joined by ` | `; strings double-quoted when `quote`, anything else as
    /// its JSON text (noted when `note_others`: a string enum should hold only strings).
    fn literals(&mut self, values: Option<&Value>, quote: bool, note_others: bool) {
        let Some(values) = values.and_then(Value::as_array).filter(|v| !v.is_empty()) else {
            self.unverified("an `enum` that is not a list of values");
            self.out.push_str("any");
            return;
        };
        for (k, v) in values.iter().enumerate() {
            if k > 0 {
                self.out.push_str(" | ");
            }
            match v {
                Value::String(s) if quote => {
                    self.out.push('"');
                    self.out.push_str(s);
                    self.out.push('"');
                }
                other => {
                    if quote && note_others {
                        self.unverified("an `enum` of strings with other values");
                    }
                    let _ = write!(self.out, "{other}");
                }
            }
        }
    }

    /// A `$ref`, expanded in place: by name only when it refers to itself (directly or not),
    /// cannot be resolved, or the expansions have outgrown [`MAX_REF_BYTES`].
    fn reference(&mut self, r: &'a Value, indent: usize, depth: usize) {
        self.unverified("`$ref`");
        let Some(path) = r.as_str() else {
            self.unverified("a `$ref` that is not a string");
            self.out.push_str("any");
            return;
        };
        let name = path
            .rsplit(['/', '#'])
            .next()
            .filter(|n| !n.is_empty())
            .unwrap_or("any");
        if self.expanding.contains(&path) {
            self.unverified("a recursive `$ref`");
            self.out.push_str(name);
            return;
        }
        // Bytes written by expansions: the finished outermost ones, plus the current one's.
        let written = self.ref_bytes
            + if self.expanding.is_empty() {
                0
            } else {
                self.out.len() - self.outer_start
            };
        if written > MAX_REF_BYTES {
            self.unverified("`$ref`s expanding to more than 1 MiB");
            self.out.push_str(name);
            return;
        }
        match resolve(self.root, path) {
            Some(target) => {
                let outermost = self.expanding.is_empty();
                if outermost {
                    self.outer_start = self.out.len();
                }
                self.expanding.push(path);
                self.ty(target, indent, depth + 1);
                self.expanding.pop();
                if outermost {
                    self.ref_bytes += self.out.len() - self.outer_start;
                }
            }
            None => {
                self.unverified("a `$ref` that cannot be resolved");
                self.out.push_str(name);
            }
        }
    }
}

/// The schema a local `$ref` (`#`, `#/$defs/Name`, `#/definitions/Name`, any JSON pointer into
/// the parameters) points to.
fn resolve<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let pointer = path.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// Whether `items` renders as a union (`a | b`), which an array type must parenthesise.
fn is_union(items: &Value, root: &Value) -> bool {
    let items = match items.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(root, r).unwrap_or(items),
        None => items,
    };
    let many = |k: &str| {
        items
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() > 1)
    };
    many("anyOf")
        || many("oneOf")
        || many("allOf")
        || many("enum")
        || many("type")
        || items.get("nullable") == Some(&Value::Bool(true))
}

/// Descriptions of `schema`'s array items, union variants and referenced schemas (its own only
/// when `depth > 0`), followed through those wrappers but not into properties. `budget` bounds
/// the schemas visited, however the references fan out.
fn inner_descriptions<'a>(
    schema: &'a Value,
    root: &'a Value,
    out: &mut Vec<&'a str>,
    depth: usize,
    budget: &mut usize,
) {
    if depth > 8 || *budget == 0 {
        return;
    }
    *budget -= 1;
    if depth > 0 {
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            out.push(d);
        }
    }
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(p) => match resolve(root, p) {
            Some(target) => {
                if let Some(d) = target.get("description").and_then(Value::as_str) {
                    out.push(d);
                }
                target
            }
            None => return,
        },
        None => schema,
    };
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        inner_descriptions(items, root, out, depth + 1, budget);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for v in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            inner_descriptions(v, root, out, depth + 1, budget);
        }
    }
}

/// A string's own text, anything else as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn indent_to(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Every key and string (and other scalar) in `v`, separated by spaces, newlines flattened:
/// how a schema that is not rendered as a type is still counted. Iterative, for any depth.
fn leaves(v: &Value, out: &mut String) {
    let mut stack = vec![v];
    let mut first = true;
    let mut push = |out: &mut String, s: &str| {
        if !first {
            out.push(' ');
        }
        first = false;
        out.extend(
            s.chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
    };
    while let Some(v) = stack.pop() {
        match v {
            Value::Null => {}
            Value::String(s) => push(out, s),
            Value::Bool(b) => push(out, if *b { "true" } else { "false" }),
            Value::Number(n) => push(out, &n.to_string()),
            Value::Array(a) => stack.extend(a.iter().rev()),
            Value::Object(o) => {
                for k in o.keys() {
                    push(out, k);
                }
                stack.extend(o.values().rev());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The namespace of one function, without the `namespace functions` lines around it.
    fn one(f: Value) -> (String, BTreeSet<String>) {
        let r = render(&[&f]);
        let body = r
            .text
            .strip_prefix("namespace functions {\n\n")
            .and_then(|t| t.strip_suffix("\n\n} // namespace functions"))
            .expect("framed namespace")
            .to_string();
        (body, r.notes)
    }

    /// The notes' constructs, sorted: `unverified:X` or `disputed:X`.
    fn kinds(notes: &BTreeSet<String>) -> Vec<String> {
        let mut k: Vec<String> = notes
            .iter()
            .map(|n| {
                let n = n.strip_prefix("tool definitions: ").unwrap();
                if let Some(x) = n.strip_suffix(" is not verified against API counts") {
                    format!("unverified:{x}")
                } else {
                    let x = n
                        .strip_suffix(": API measurements disagree, counted on the high side")
                        .unwrap();
                    format!("disputed:{x}")
                }
            })
            .collect();
        k.sort();
        k
    }

    fn params(props: Value, required: &[&str]) -> Value {
        json!({"name": "f", "description": "Do f", "parameters": {
            "type": "object", "properties": props, "required": required}})
    }

    /// Asserts that function `f` renders as `text` with notes of the constructs `notes` (as
    /// [`kinds`] gives them; none when empty).
    fn assert_renders(f: Value, text: &str, notes: &[&str]) {
        let (t, n) = one(f);
        assert_eq!(t, text);
        assert_eq!(kinds(&n), notes, "{n:?}");
    }

    #[test]
    fn the_namespace_frames_every_function() {
        let a = json!({"name": "a", "parameters": {"type": "object", "properties": {}}});
        let b = json!({"name": "b", "description": "Does b"});
        let r = render(&[&a, &b]);
        assert_eq!(
            r.text,
            "namespace functions {\n\ntype a = () => any;\n\n// Does b\ntype b = () => any;\n\n} // namespace functions"
        );
        assert!(r.notes.is_empty());
    }

    #[test]
    fn properties_with_descriptions_required_and_optional() {
        assert_renders(
            json!({
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {"type": "object", "properties": {
                    "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
                }, "required": ["location"]}
            }),
            "// Get the current weather in a given location\n\
             type get_current_weather = (_: {\n\
             // The city and state, e.g. San Francisco, CA\n\
             location: string,\n\
             unit?: \"celsius\" | \"fahrenheit\",\n\
             }) => any;",
            &[],
        );
    }

    #[test]
    fn scalar_types() {
        assert_renders(
            params(
                json!({
                    "s": {"type": "string", "description": "d"},
                    "n": {"type": "number"},
                    "i": {"type": "integer"},
                    "b": {"type": "boolean"},
                    "z": {"type": "null"},
                    "x": {"description": "no type"},
                    "c": {"type": "string", "const": "k"}
                }),
                &["s"],
            ),
            "// Do f\ntype f = (_: {\n// d\ns: string,\nn?: number,\ni?: number,\nb?: boolean,\nz?: null,\n// no type\nx?: any,\nc?: string,\n}) => any;",
            &[],
        );
    }

    #[test]
    fn parameters_without_any_description_are_disputed() {
        assert_renders(
            params(json!({"q": {"type": "string"}}), &["q"]),
            "// Do f\ntype f = (_: {\nq: string,\n}) => any;",
            &["disputed:parameters none of which has a description"],
        );
    }

    #[test]
    fn nested_objects_keep_every_description() {
        assert_renders(
            params(
                json!({"o": {"type": "object", "description": "outer", "properties": {
                    "a": {"type": "string", "description": "inner"},
                    "b": {"type": "object", "properties": {"c": {"type": "boolean"}}, "required": ["c"]}
                }}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// outer\no?: {\n  // inner\n  a?: string,\n  b?: {\n    c: boolean,\n},\n},\n}) => any;",
            &["disputed:nested objects"],
        );
    }

    #[test]
    fn arrays() {
        assert_renders(
            params(
                json!({
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "d"},
                    "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}}
                }),
                &["tags"],
            ),
            "// Do f\ntype f = (_: {\n// d\ntags: string[],\nrows?: {\n  n: number,\n}[],\n}) => any;",
            &["disputed:nested objects"],
        );

        assert_renders(
            params(
                json!({"a": {"type": "array", "description": "d"},
                   "e": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
                   "t": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// d\na?: any[],\ne?: (\"x\" | \"y\")[],\nt?: [string, number],\n}) => any;",
            &[
                "unverified:a tuple of `items`",
                "unverified:an array of a union",
                "unverified:an array without `items`",
            ],
        );
    }

    #[test]
    fn enums_of_numbers_and_untyped_enums() {
        assert_renders(
            params(
                json!({"n": {"type": "integer", "enum": [-1, 1], "description": "d"},
                   "u": {"enum": ["a", 2, null]}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// d\nn?: -1 | 1,\nu?: \"a\" | 2 | null,\n}) => any;",
            &[
                "disputed:number enums",
                "unverified:an `enum` without a type",
            ],
        );
    }

    #[test]
    fn unions() {
        assert_renders(
            params(
                json!({"a": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "d"}}),
                &["a"],
            ),
            "// Do f\ntype f = (_: {\n// d\na: string | null,\n}) => any;",
            &[],
        );

        assert_renders(
            params(
                json!({"o": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number"}], "description": "d"},
                   "l": {"type": ["string", "null"]},
                   "n": {"type": "integer", "nullable": true},
                   "all": {"allOf": [{"type": "string"}]}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// d\n// a name\no?: string | number,\nl?: string | null,\nn?: number | null,\nall?: string,\n}) => any;",
            &[
                "unverified:`allOf`",
                "unverified:`nullable`",
                "unverified:`oneOf`",
                "unverified:a description inside array items, union variants or references",
                "unverified:a list of types",
            ],
        );
    }

    #[test]
    fn refs_resolve_to_defs_and_definitions() {
        assert_renders(
            json!({"name": "f", "parameters": {
                "type": "object",
                "properties": {
                    "p": {"$ref": "#/$defs/Point", "description": "where"},
                    "c": {"$ref": "#/definitions/Color"}
                },
                "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
                "definitions": {"Color": {"type": "string", "enum": ["red", "blue"], "description": "a colour"}}
            }}),
            "type f = (_: {\n// where\np?: {\n  x: number,\n},\n// a colour\nc?: \"red\" | \"blue\",\n}) => any;",
            &[
                "disputed:nested objects",
                "unverified:`$defs`",
                "unverified:`$ref`",
                "unverified:`definitions`",
                "unverified:a description inside array items, union variants or references",
            ],
        );
    }

    #[test]
    fn recursive_and_unresolvable_refs_render_by_name() {
        let (t, notes) = one(json!({"name": "f", "parameters": {
            "type": "object",
            "properties": {
                "tree": {"$ref": "#/$defs/Node", "description": "d"},
                "ext": {"$ref": "https://example.com/s.json#/Thing"},
                "root": {"$ref": "#"}
            },
            "$defs": {"Node": {"type": "object", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        }}));
        assert_eq!(
            t,
            "type f = (_: {\n// d\ntree?: {\n  kids?: Node[],\n},\next?: Thing,\nroot?: {\n  // d\n  tree?: {\n    kids?: Node[],\n},\n  ext?: Thing,\n  root?: any,\n},\n}) => any;"
        );
        let k = kinds(&notes);
        assert!(
            k.contains(&"unverified:a recursive `$ref`".to_string()),
            "{k:?}"
        );
        assert!(
            k.contains(&"unverified:a `$ref` that cannot be resolved".to_string()),
            "{k:?}"
        );
    }

    #[test]
    fn defaults_follow_the_property() {
        assert_renders(
            params(
                json!({"unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                   "loc": {"type": "string", "description": "d"}}),
                &["loc"],
            ),
            "// Do f\ntype f = (_: {\nunit?: \"c\" | \"f\", // default: \"c\"\n// d\nloc: string,\n}) => any;",
            &[],
        );
        assert_renders(
            params(
                json!({"n": {"type": "integer", "default": 5, "description": "d"}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// d\nn?: number, // default: 5\n}) => any;",
            &["unverified:a `default` that is not a string"],
        );
    }

    #[test]
    fn titles_examples_and_multi_line_descriptions_are_comments() {
        assert_renders(
            json!({"name": "f", "description": "Line one\nLine two",
            "parameters": {"type": "object", "title": "FArgs", "properties": {
                "q": {"type": "string", "title": "Query", "description": "d", "examples": ["a", 1]}
            }}}),
            "// Line one\n// Line two\ntype f = (_: {\n// Query\n//\n// d\n// Examples:\n// - \"a\"\n// - 1\nq?: string,\n}) => any;",
            &[
                "unverified:`examples`",
                "unverified:`title`",
                "unverified:a multi-line description",
            ],
        );
    }

    #[test]
    fn strict_and_additional_properties() {
        let mut f = params(json!({"q": {"type": "string", "description": "d"}}), &["q"]);
        f["parameters"]["additionalProperties"] = json!(false);
        let (t, notes) = one(f.clone());
        assert!(notes.is_empty(), "{notes:?}");
        f["strict"] = json!(true);
        let (t2, notes) = one(f.clone());
        assert_eq!(t, t2, "strict changes no text ctx knows of");
        assert_eq!(kinds(&notes), ["unverified:`strict`"]);
        f["parameters"]["properties"]["m"] =
            json!({"type": "object", "additionalProperties": {"type": "string"}});
        let (t, notes) = one(f);
        assert!(t.contains("m?: {\n\n},"), "{t}");
        assert_eq!(
            kinds(&notes),
            [
                "disputed:nested objects",
                "unverified:`additionalProperties` other than false",
                "unverified:`strict`",
                "unverified:an object without `properties`",
            ]
        );
    }

    #[test]
    fn other_keywords_are_named() {
        assert_renders(
            params(
                json!({"n": {"type": "integer", "minimum": 1, "description": "d", "format": "int32"}}),
                &[],
            ),
            "// Do f\ntype f = (_: {\n// d\nn?: number,\n}) => any;",
            &["unverified:`format`", "unverified:`minimum`"],
        );
    }

    #[test]
    fn schemas_deeper_than_the_limit_are_counted_by_their_text() {
        let mut s = json!({"type": "string", "description": "bottom"});
        for _ in 0..(MAX_DEPTH * 3) {
            s = json!({"type": "array", "items": s});
        }
        let (t, notes) = one(params(json!({"deep": s}), &[]));
        assert!(
            t.contains("any // type items array type items array"),
            "{t}"
        );
        assert!(t.contains("type description string bottom[][]"), "{t}");
        assert!(kinds(&notes).contains(&format!(
            "unverified:a schema nested more than {MAX_DEPTH} levels deep"
        )));
    }

    #[test]
    fn fanned_out_refs_stay_bounded() {
        // D0 refers to D1 twice, D1 to D2 twice, ...: 2^40 expansions if nothing stopped them.
        let mut defs = Map::new();
        for k in 0..40 {
            defs.insert(
                format!("D{k}"),
                json!({"type": "object", "properties": {
                    "a": {"$ref": format!("#/$defs/D{}", k + 1)},
                    "b": {"$ref": format!("#/$defs/D{}", k + 1)}}}),
            );
        }
        defs.insert("D40".into(), json!({"type": "string"}));
        let f = json!({"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}});
        let r = render(&[&f]);
        assert!(r.text.len() < 4 * MAX_REF_BYTES, "{}", r.text.len());
        assert!(r.text.len() > MAX_REF_BYTES / 2, "{}", r.text.len());
        assert!(
            kinds(&r.notes)
                .contains(&"unverified:`$ref`s expanding to more than 1 MiB".to_string())
        );
    }

    #[test]
    fn odd_values_never_panic() {
        for f in [
            json!(null),
            json!("f"),
            json!({"name": 3, "description": ["x"], "parameters": "string"}),
            json!({"name": "f", "parameters": {"type": "object", "properties": {"a": "string", "b": true, "c": {"type": 7}, "d": {"type": "object", "properties": []}}, "required": "a"}}),
            json!({"name": "f", "parameters": {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}}),
            json!({"name": "f", "parameters": {"type": "object", "properties": {"e": {"type": "string", "enum": []}, "o": {"oneOf": {}}}}}),
        ] {
            let r = render(&[&f]);
            assert!(r.text.starts_with("namespace functions {"));
            assert!(!r.notes.is_empty(), "{f}");
        }
    }
}
