//! The generic pre-tokenizer: an encoding's split pattern, compiled by build.rs (compile.rs) into
//! a tree of [`Node`]s, run by a small backtracking matcher with the regex semantics tiktoken's
//! patterns are written for (fancy-regex's: leftmost-first alternation, greedy, lazy and
//! possessive quantifiers, atomic groups, look-ahead, `^` and `$` at the ends of the text).
//!
//! It is what makes a new encoding a data change: its pattern is compiled with its rank file,
//! and counting runs it when the encoding has no hand-written splitter (split.rs). The built-in
//! encodings all have one, proven equal to both this matcher and tiktoken by the tests
//! (tests.rs), so this matcher is never on their hot path.
//!
//! A repetition of one character class, the only kind tiktoken's patterns quantify unboundedly,
//! scans and backtracks in a loop, so a megabyte-long run of one character costs time in
//! proportion to its length and constant stack. A repeated group recurses once per repetition.

use super::split::char_at;

include!(concat!(env!("OUT_DIR"), "/patterns.rs"));

#[cfg(test)]
pub use test_patterns::TEST_PATTERNS;

/// A compiled split pattern.
pub struct Pattern {
    /// The pattern as tiktoken writes it.
    #[cfg_attr(not(test), allow(dead_code))] // compared with tiktoken's in the tests
    pub source: &'static str,
    root: Node,
}

/// A set of characters: a bitmap of its ASCII members and its sorted, disjoint, inclusive code
/// point ranges (ASCII included).
pub struct Class {
    ascii: u128,
    ranges: &'static [(u32, u32)],
}

/// One node of a compiled pattern.
enum Node {
    /// One character of the class.
    Char(&'static Class),
    /// Each node in turn.
    Concat(&'static [Node]),
    /// The first node that leads to a match, in order.
    Alt(&'static [Node]),
    /// `node` from `min` to `max` times (`u32::MAX`: no limit), as many as possible first
    /// (greedy) or as few (lazy). Possessive repetitions are atomic groups around greedy ones.
    Repeat {
        node: &'static Node,
        min: u32,
        max: u32,
        greedy: bool,
    },
    /// `(?>node)`: the first way `node` matches, never backtracked into.
    Atomic(&'static Node),
    /// `(?=node)`, or `(?!node)` when `negate`: matches no text.
    Ahead { node: &'static Node, negate: bool },
    /// `^` or `\A`: the start of the text.
    #[cfg_attr(not(test), allow(dead_code))] // in no built-in encoding's pattern
    Start,
    /// `$` or `\z`: the end of the text.
    End,
}

/// What to do with the end of a match of a node: true stops the search (the match is taken).
type Then<'k> = &'k mut dyn FnMut(usize) -> bool;

impl Class {
    #[inline]
    fn contains(&self, c: u32) -> bool {
        if c < 128 {
            return self.ascii >> c & 1 == 1;
        }
        self.ranges
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    /// The end of the character at `at` if it is in the class.
    #[inline]
    fn step(&self, b: &[u8], at: usize) -> Option<usize> {
        if at >= b.len() {
            return None;
        }
        let (c, len) = char_at(b, at);
        self.contains(c).then_some(at + len)
    }
}

impl Pattern {
    /// The leftmost match at or after byte `from` of the UTF-8 text `b`: its start and end.
    pub fn find_at(&self, b: &[u8], from: usize) -> Option<(usize, usize)> {
        let mut start = from;
        loop {
            let mut end = start;
            if self.root.matches(b, start, &mut |e| {
                end = e;
                true
            }) {
                return Some((start, end));
            }
            if start >= b.len() {
                return None;
            }
            start += char_at(b, start).1;
        }
    }

    /// Calls `f` with the start and end of each piece of `b`, in order: the pattern's
    /// successive matches, as tiktoken finds them. Text between matches belongs to no piece, and
    /// an empty match is no piece.
    pub fn for_each_piece(&self, b: &[u8], mut f: impl FnMut(usize, usize)) {
        let mut from = 0;
        while let Some((start, end)) = self.find_at(b, from) {
            if end > start {
                f(start, end);
                from = end;
            } else if start < b.len() {
                from = start + char_at(b, start).1;
            } else {
                break;
            }
        }
    }
}

impl Node {
    /// Whether the node matches at `at` with an end that `then` accepts, trying its ways of
    /// matching in the regex's order of preference.
    fn matches(&self, b: &[u8], at: usize, then: Then<'_>) -> bool {
        match self {
            Node::Char(class) => class.step(b, at).is_some_and(then),
            Node::Concat(nodes) => concat(nodes, b, at, then),
            Node::Alt(nodes) => nodes.iter().any(|n| n.matches(b, at, then)),
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => match node {
                Node::Char(class) => repeat_class(class, *min, *max, *greedy, b, at, then),
                _ => repeat(node, *min, *max, *greedy, 0, b, at, then),
            },
            Node::Atomic(node) => {
                let mut first = None;
                node.matches(b, at, &mut |e| {
                    first = Some(e);
                    true
                }) && first.is_some_and(then)
            }
            Node::Ahead { node, negate } => {
                node.matches(b, at, &mut |_| true) != *negate && then(at)
            }
            Node::Start => at == 0 && then(at),
            Node::End => at == b.len() && then(at),
        }
    }
}

fn concat(nodes: &[Node], b: &[u8], at: usize, then: Then<'_>) -> bool {
    match nodes.split_first() {
        None => then(at),
        Some((first, rest)) => first.matches(b, at, &mut |e| concat(rest, b, e, then)),
    }
}

/// A repetition of one character class: the longest run is scanned once, then given back one
/// character at a time (greedy), or taken one character at a time (lazy).
fn repeat_class(
    class: &Class,
    min: u32,
    max: u32,
    greedy: bool,
    b: &[u8],
    at: usize,
    then: Then<'_>,
) -> bool {
    let mut end = at;
    let mut n = 0;
    while n < min {
        match class.step(b, end) {
            Some(e) => end = e,
            None => return false,
        }
        n += 1;
    }
    if !greedy {
        loop {
            if then(end) {
                return true;
            }
            match class.step(b, end) {
                Some(e) if n < max => end = e,
                _ => return false,
            }
            n += 1;
        }
    }
    let floor = end;
    while n < max
        && let Some(e) = class.step(b, end)
    {
        end = e;
        n += 1;
    }
    loop {
        if then(end) {
            return true;
        }
        if end == floor {
            return false;
        }
        // Back to the start of the previous character.
        end -= 1;
        while b[end] & 0xC0 == 0x80 {
            end -= 1;
        }
    }
}

/// A repetition of any other node, `done` times matched so far. An iteration that matches no
/// text ends the repetition (it could only repeat forever).
#[allow(clippy::too_many_arguments)]
fn repeat(
    node: &Node,
    min: u32,
    max: u32,
    greedy: bool,
    done: u32,
    b: &[u8],
    at: usize,
    then: Then<'_>,
) -> bool {
    let again = |then: Then<'_>| {
        done < max
            && node.matches(b, at, &mut |e| {
                if e == at {
                    done + 1 >= min && then(e)
                } else {
                    repeat(node, min, max, greedy, done + 1, b, e, then)
                }
            })
    };
    if done < min {
        return again(then);
    }
    if greedy {
        return again(then) || then(at);
    }
    then(at) || again(then)
}

/// Patterns only the tests run (see build.rs).
#[cfg(test)]
mod test_patterns {
    use super::{Class, Node, Pattern};
    include!(concat!(env!("OUT_DIR"), "/test_patterns.rs"));
}
