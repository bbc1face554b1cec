//! Key → hash slot mapping, the one piece of arithmetic every routing decision
//! in a Redis Cluster depends on. It must agree bit for bit with the servers,
//! so it is pinned by golden values collected from `CLUSTER KEYSLOT`.

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: usize = 16384;

/// CRC16 lookup table for the XMODEM variant (polynomial 0x1021, initial
/// value 0, no reflection), built at compile time so no runtime setup exists.
/// twemproxy's `crc16` hash reads it too (`sharding/hash.rs`).
pub(crate) const CRC16_TABLE: [u16; 256] = build_crc16_table();

const fn build_crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
}

/// Two bytes per step (slicing-by-2): the CRC is linear, so after bytes `b0 b1` from
/// `crc = h:l` it is `CRC16_PAIR[h ^ b0] ^ CRC16_TABLE[l ^ b1]`, where `CRC16_PAIR[x]` is
/// `x` pushed through two bytes. Half the dependent steps of the table per byte.
const CRC16_PAIR: [u16; 256] = build_crc16_pair();

const fn build_crc16_pair() -> [u16; 256] {
    let mut pair = [0u16; 256];
    let mut x = 0;
    while x < 256 {
        let t = CRC16_TABLE[x];
        pair[x] = (t << 8) ^ CRC16_TABLE[(t >> 8) as usize];
        x += 1;
    }
    pair
}

/// CRC16/XMODEM of `data`, a byte at a time (the reference `key_slot`'s pairs must equal).
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// The part of `key` that is hashed: the bytes between the first `{` and the
/// first `}` after it, if that span is non-empty; otherwise the whole key.
/// An empty tag (`{}`) hashes the whole key because that is what the servers
/// do; it lets keys that merely contain braces spread over the cluster.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// Hash slot (0..16384) of `key`, honouring hash tags exactly as Redis
/// Cluster does. Never allocates and accepts any bytes.
///
/// One pass for the common key without `{`: the CRC is computed while looking
/// for it (every request's key goes through here), and only a key that has one
/// is hashed again over its tag (`hash_tag`).
pub fn key_slot(key: &[u8]) -> u16 {
    // SLOT_COUNT is a power of two, so the modulo is a mask.
    const MASK: u16 = SLOT_COUNT as u16 - 1;
    let mut crc = 0u16;
    let mut pairs = key.chunks_exact(2);
    for pair in &mut pairs {
        let (b0, b1) = (pair[0], pair[1]);
        if b0 == b'{' || b1 == b'{' {
            return crc16(hash_tag(key)) & MASK;
        }
        let [h, l] = crc.to_be_bytes();
        crc = CRC16_PAIR[usize::from(h ^ b0)] ^ CRC16_TABLE[usize::from(l ^ b1)];
    }
    if let [b] = *pairs.remainder() {
        if b == b'{' {
            return crc16(hash_tag(key)) & MASK;
        }
        crc = (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)];
    }
    crc & MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic 1 KiB key: byte i is (i * 7 + 3) mod 256.
    fn key_1k() -> Vec<u8> {
        (0..1024u32).map(|i| ((i * 7 + 3) % 256) as u8).collect()
    }

    const KEY_1K: &[u8] = b"<1k>";

    /// Collected once from `redis-cli cluster keyslot` on redis 7.0.15
    /// (binary keys sent over a raw socket). `KEY_1K` stands for `key_1k()`.
    const GOLDEN: &[(&[u8], u16)] = &[
        (b"", 0),
        (b"{", 4092),
        (b"}", 12090),
        (b"{}", 15257),
        (b"{}a", 10875),
        (b"a{}", 6082),
        (b"{a}b", 15495),
        (b"a{b}c{d}", 3300),
        (b"{{a}}", 10276),
        (b"a{b", 13340),
        (b"a}b{", 6027),
        (b"}{", 12793),
        (b"{}{a}", 13650),
        (b"a{}b{c}", 7353),
        (b"foo{}{bar}", 8363),
        (b"foo{{bar}}zap", 4015),
        (b"foo{bar}{zap}", 5061),
        (b"{bar", 4015),
        (b"bar}", 6624),
        (b"foo", 12182),
        (b"bar", 5061),
        (b"hello", 866),
        (b"123456789", 12739),
        (b"{user1000}.following", 3443),
        (b"{user1000}.followers", 3443),
        (b"user1000", 3443),
        (b"user:1000", 1649),
        (b"key:{x}:y", 16287),
        (b"x", 16287),
        (b"a", 15495),
        (b"A", 6373),
        (b"{a}", 15495),
        (b"{A}", 6373),
        (b" ", 9314),
        (b"{ }", 9314),
        (b"tab\x09key", 460),
        (b"\x0d\x0a", 5910),
        (b"\x00", 0),
        (b"\x00\x01\x02", 4979),
        (b"\xff\xfe\xfd", 287),
        (b"{\x00}zz", 0),
        (b"caf\xc3\xa9", 5735),
        (b"{b}{a}", 3300),
        (b"mykey", 14687),
        (b"somekey", 11058),
        (b"{}}", 14790),
        (b"{{}}", 4092),
        (b"{{}", 4092),
        (b"}}{a}", 15495),
        (b"\xff", 7920),
        (b"{\xff}", 7920),
        (b"0", 13907),
        (b"16383", 15158),
        (b"slotgate", 2985),
        (KEY_1K, 1533),
    ];

    #[test]
    fn golden_values_match_redis() {
        assert!(GOLDEN.len() >= 40);
        for &(key, want) in GOLDEN {
            let owned;
            let key = if key == KEY_1K {
                owned = key_1k();
                &owned[..]
            } else {
                key
            };
            assert_eq!(
                key_slot(key),
                want,
                "key {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn crc16_check_value() {
        // The published check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn hash_tag_rules() {
        assert_eq!(hash_tag(b"{user}.a"), b"user");
        assert_eq!(hash_tag(b"{}user"), b"{}user");
        assert_eq!(hash_tag(b"a{b}{c}"), b"b");
        assert_eq!(hash_tag(b"{{a}}"), b"{a");
        assert_eq!(hash_tag(b"no}open{"), b"no}open{");
    }

    proptest::proptest! {
        #[test]
        fn pairs_agree_with_a_byte_at_a_time(key in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let want = crc16(hash_tag(&key)) & (SLOT_COUNT as u16 - 1);
            proptest::prop_assert_eq!(key_slot(&key), want);
        }

        #[test]
        fn slot_in_range_and_tag_invariant(tag in proptest::collection::vec(proptest::num::u8::ANY, 1..16),
                                           a in proptest::collection::vec(proptest::num::u8::ANY, 0..16),
                                           b in proptest::collection::vec(proptest::num::u8::ANY, 0..16)) {
            proptest::prop_assume!(!tag.contains(&b'}') && !a.contains(&b'{'));
            let mut key = a.clone();
            key.push(b'{');
            key.extend_from_slice(&tag);
            key.push(b'}');
            key.extend_from_slice(&b);
            proptest::prop_assert_eq!(key_slot(&key), key_slot(&tag));
            proptest::prop_assert!(usize::from(key_slot(&b)) < SLOT_COUNT);
        }
    }
}
