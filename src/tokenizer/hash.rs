// The hash of the rank tables. build.rs lays the tables out with it (it `include!`s this file)
// and the tokenizer probes them with it, so the two always agree bit for bit.

/// Hashes a token's bytes. The table index is the top bits, the tag stored beside each rank is
/// the low 32 bits.
#[inline]
pub fn token_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
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
    (h ^ (h >> 29)).wrapping_mul(K)
}
