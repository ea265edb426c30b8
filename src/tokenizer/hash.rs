// The hash of the rank tables. build.rs lays the tables out with it (it `include!`s this file)
// and the tokenizer probes them with it, so the two always agree bit for bit.

/// The first eight bytes of a token (fewer, zero-padded, for shorter tokens), as stored in its
/// hash slot.
#[inline]
pub fn key_prefix(bytes: &[u8]) -> u64 {
    // Overlapping fixed-size reads instead of a variable-length copy, which would be a memcpy
    // call on the hottest path of counting.
    let n = bytes.len();
    let u32_at =
        |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]) as u64;
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]) as u64;
    match n {
        0 => 0,
        1 => bytes[0] as u64,
        2..=3 => u16_at(0) | u16_at(n - 2) << ((n - 2) * 8),
        4..=7 => u32_at(0) | u32_at(n - 4) << ((n - 4) * 8),
        _ => u32_at(0) | u32_at(4) << 32,
    }
}

/// Hashes a token from its length, its prefix (`key_prefix`) and the bytes after the prefix.
/// The slot index is the top bits; the control tag is the low 7 bits.
#[inline]
pub fn token_hash(bytes: &[u8], prefix: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = ((bytes.len() as u64).wrapping_mul(K) ^ prefix)
        .wrapping_mul(K)
        .rotate_left(31);
    if bytes.len() > 8 {
        let mut chunks = bytes[8..].chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(word))
                .wrapping_mul(K)
                .rotate_left(31);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            h = (h ^ u64::from_le_bytes(word))
                .wrapping_mul(K)
                .rotate_left(31);
        }
    }
    (h ^ (h >> 29)).wrapping_mul(K)
}
