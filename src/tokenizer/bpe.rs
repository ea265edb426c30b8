//! Byte-pair encoding over rank tables that build.rs generated from the official rank files.
//!
//! The tables are static data in the binary: nothing is parsed, decoded or allocated when an
//! encoding is first used, and only the pages a text touches are ever read. Counting merges a
//! piece exactly as tiktoken does (repeatedly the lowest-ranked adjacent pair, the leftmost among
//! equals) but only counts the parts that remain: no token vector is built.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::hash::token_hash;

/// One encoding's rank tables (see build.rs for the layout).
pub struct Ranks {
    bytes: &'static [u8],
    offsets: &'static [u8],
    slots: &'static [u8],
    shift: u32,
}

include!(concat!(env!("OUT_DIR"), "/ranks.rs"));

/// Pieces at least this long are merged with a heap (O(n log n)) rather than by rescanning.
const LONG_PIECE: usize = 128;

impl Ranks {
    /// The number of rank values (one more than the largest rank).
    pub fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }

    /// The bytes of token `rank` (empty for a rank the encoding does not use).
    pub fn token(&self, rank: u32) -> &'static [u8] {
        let at = rank as usize * 4;
        let start = u32::from_le_bytes(self.offsets[at..at + 4].try_into().expect("4 bytes"));
        let end = u32::from_le_bytes(self.offsets[at + 4..at + 8].try_into().expect("4 bytes"));
        &self.bytes[start as usize..end as usize]
    }

    /// The rank of the token whose bytes are `key`, if there is one.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let h = token_hash(key);
        let mask = (self.slots.len() / 8) - 1;
        let tag = h as u32;
        let mut i = (h >> self.shift) as usize;
        loop {
            let at = i * 8;
            let slot = u64::from_le_bytes(self.slots[at..at + 8].try_into().expect("8 bytes"));
            let stored = slot as u32;
            if stored == 0 {
                return None;
            }
            if (slot >> 32) as u32 == tag && self.token(stored - 1) == key {
                return Some(stored - 1);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn pair_rank(&self, piece: &[u8], start: usize, end: usize) -> u32 {
        self.get(&piece[start..end]).unwrap_or(u32::MAX)
    }

    /// The number of tokens `piece` encodes to.
    pub fn count_piece(&self, piece: &[u8], parts: &mut Vec<(u32, u32)>) -> usize {
        if piece.len() <= 1 || self.get(piece).is_some() {
            return piece.len().min(1);
        }
        if piece.len() >= LONG_PIECE {
            return self.merge_long(piece, |_, _| {});
        }
        self.merge_short(piece, parts);
        parts.len() - 1
    }

    /// Appends the ranks `piece` encodes to.
    pub fn encode_piece(&self, piece: &[u8], parts: &mut Vec<(u32, u32)>, out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        if let Some(rank) = self.get(piece) {
            out.push(rank);
            return;
        }
        if piece.len() >= LONG_PIECE {
            let mut bounds = Vec::new();
            self.merge_long(piece, |start, end| bounds.push((start, end)));
            out.extend(bounds.into_iter().map(|(s, e)| self.rank_of(&piece[s..e])));
            return;
        }
        self.merge_short(piece, parts);
        out.extend(
            parts
                .windows(2)
                .map(|w| self.rank_of(&piece[w[0].0 as usize..w[1].0 as usize])),
        );
    }

    fn rank_of(&self, token: &[u8]) -> u32 {
        self.get(token)
            .expect("every byte-pair merge result is a token")
    }

    /// tiktoken's merge loop for short pieces: `parts` ends up holding the start of each final
    /// part plus the end of the piece. Entry i also holds the rank of merging parts i and i + 1.
    fn merge_short(&self, piece: &[u8], parts: &mut Vec<(u32, u32)>) {
        parts.clear();
        for i in 0..piece.len() - 1 {
            parts.push((i as u32, self.pair_rank(piece, i, i + 2)));
        }
        parts.push((piece.len() as u32 - 1, u32::MAX));
        parts.push((piece.len() as u32, u32::MAX));
        let rank_at = |parts: &Vec<(u32, u32)>, i: usize| {
            if i + 3 < parts.len() {
                // parts[i + 1] is about to be removed, so the pair ends at parts[i + 3].
                self.pair_rank(piece, parts[i].0 as usize, parts[i + 3].0 as usize)
            } else {
                u32::MAX
            }
        };
        loop {
            let mut min = (u32::MAX, 0);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
            if min.0 == u32::MAX {
                break;
            }
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = rank_at(parts, i - 1);
            }
            parts[i].1 = rank_at(parts, i);
            parts.remove(i + 1);
        }
    }

    /// The same merges for long pieces, with a heap of candidate pairs keyed by (rank, start) so
    /// that the lowest rank and, among equals, the leftmost pair comes first. Calls `part` with
    /// the bounds of each final part, in order, and returns how many there are.
    fn merge_long(&self, piece: &[u8], mut part: impl FnMut(usize, usize)) -> usize {
        let n = piece.len();
        // Parts are identified by their start. end[s] is the end of the part starting at s
        // (0 once s is no longer a part start), prev[s] the start of the part before it, and
        // pair[s] the rank of merging it with the next part.
        let mut end: Vec<u32> = (1..=n as u32).collect();
        let mut prev: Vec<u32> = (0..n as u32).map(|s| s.wrapping_sub(1)).collect();
        let mut pair: Vec<u32> = (0..n)
            .map(|s| {
                if s + 2 <= n {
                    self.pair_rank(piece, s, s + 2)
                } else {
                    u32::MAX
                }
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<u64>> = pair
            .iter()
            .enumerate()
            .filter(|&(_, &rank)| rank != u32::MAX)
            .map(|(s, &rank)| Reverse(((rank as u64) << 32) | s as u64))
            .collect();
        let mut parts = n;
        while let Some(Reverse(key)) = heap.pop() {
            let (rank, left) = ((key >> 32) as u32, (key as u32) as usize);
            if end[left] == 0 || pair[left] != rank {
                continue; // stale: the part was merged away or its neighbour changed
            }
            let right = end[left] as usize;
            let new_end = end[right] as usize;
            end[left] = new_end as u32;
            end[right] = 0;
            pair[right] = u32::MAX;
            parts -= 1;
            if new_end < n {
                prev[new_end] = left as u32;
                let next_end = end[new_end] as usize;
                pair[left] = self.pair_rank(piece, left, next_end);
                if pair[left] != u32::MAX {
                    heap.push(Reverse(((pair[left] as u64) << 32) | left as u64));
                }
            } else {
                pair[left] = u32::MAX;
            }
            if left > 0 {
                let before = prev[left] as usize;
                pair[before] = self.pair_rank(piece, before, new_end);
                if pair[before] != u32::MAX {
                    heap.push(Reverse(((pair[before] as u64) << 32) | before as u64));
                }
            }
        }
        let mut s = 0;
        while s < n {
            let e = end[s] as usize;
            part(s, e);
            s = e;
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [&Ranks; 4] = [&O200K_BASE, &CL100K_BASE, &P50K_BASE, &R50K_BASE];

    #[test]
    fn every_token_is_found_by_its_bytes() {
        for ranks in ALL {
            let mut tokens = 0;
            for rank in 0..ranks.len() as u32 {
                let bytes = ranks.token(rank);
                if !bytes.is_empty() {
                    assert_eq!(ranks.get(bytes), Some(rank));
                    tokens += 1;
                }
            }
            assert!(tokens > 50_000);
            // All 256 single bytes are tokens, so every piece can be encoded.
            for byte in 0..=255u8 {
                assert!(ranks.get(&[byte]).is_some());
            }
        }
    }

    fn short_parts(ranks: &Ranks, piece: &[u8]) -> Vec<(usize, usize)> {
        let mut parts = Vec::new();
        ranks.merge_short(piece, &mut parts);
        parts
            .windows(2)
            .map(|w| (w[0].0 as usize, w[1].0 as usize))
            .collect()
    }

    fn long_parts(ranks: &Ranks, piece: &[u8]) -> Vec<(usize, usize)> {
        let mut parts = Vec::new();
        let n = ranks.merge_long(piece, |s, e| parts.push((s, e)));
        assert_eq!(n, parts.len());
        parts
    }

    proptest! {
        /// The heap merge is the rescanning merge, made fast: same parts on any bytes.
        #[test]
        fn heap_merge_equals_rescanning_merge(
            piece in prop_oneof![
                prop::collection::vec(any::<u8>(), 2..200),
                prop::collection::vec(prop::sample::select(b" eatnsr\n".to_vec()), 2..400),
                (any::<u8>(), 2..300usize).prop_map(|(b, n)| vec![b; n]),
            ]
        ) {
            for ranks in ALL {
                prop_assert_eq!(short_parts(ranks, &piece), long_parts(ranks, &piece));
            }
        }
    }
}
