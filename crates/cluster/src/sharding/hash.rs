//! The key hashes twemproxy (nutcracker) offers for its pools, bit for bit.
//!
//! A fleet moving from nutcracker to slotgate keeps its data where it is only if every key
//! hashes to the same value nutcracker computes. Several of nutcracker's functions differ
//! from the textbook ones, and those differences are kept here on purpose:
//!
//! - nutcracker reads key bytes through `const char *`, signed on x86: a byte of 0x80 or
//!   more is sign-extended before it is mixed in (`fnv1_64`, `fnv1a_64`, `fnv1_32`,
//!   `fnv1a_32`, `one_at_a_time`, and `hsieh`'s third tail byte). `signed` below does that.
//! - `crc16` keeps a 32-bit register and never masks it to 16 bits, so the value returned
//!   carries the shifted-out bits above the CRC.
//! - `crc32` is memcached's: bits 16..30 of the CRC-32; `crc32a` is the whole CRC-32.
//! - `fnv1a_64` works in 32 bits, with the 64-bit basis and prime truncated.
//! - `murmur` is MurmurHash2 seeded with `0xdeadbeef * len`.
//! - `md5` is the digest's first four bytes, little-endian.
//!
//! The tests compare these with the real nutcracker (`crates/proxy/tests/sharded.rs`).

use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};

/// A twemproxy `hash:` setting (the FNV variants keep nutcracker's names).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashFn {
    OneAtATime,
    Md5,
    Crc16,
    Crc32,
    Crc32a,
    Fnv1_64,
    #[default]
    Fnv1a_64,
    Fnv1_32,
    Fnv1a_32,
    Hsieh,
    Murmur,
    Jenkins,
}

/// The names, as a nutcracker configuration spells them.
const NAMES: [(&str, HashFn); 12] = [
    ("one_at_a_time", HashFn::OneAtATime),
    ("md5", HashFn::Md5),
    ("crc16", HashFn::Crc16),
    ("crc32", HashFn::Crc32),
    ("crc32a", HashFn::Crc32a),
    ("fnv1_64", HashFn::Fnv1_64),
    ("fnv1a_64", HashFn::Fnv1a_64),
    ("fnv1_32", HashFn::Fnv1_32),
    ("fnv1a_32", HashFn::Fnv1a_32),
    ("hsieh", HashFn::Hsieh),
    ("murmur", HashFn::Murmur),
    ("jenkins", HashFn::Jenkins),
];

/// A `hash:` value nutcracker does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown hash '{0}' (one of: one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins)")]
pub struct UnknownHash(pub String);

impl FromStr for HashFn {
    type Err = UnknownHash;

    fn from_str(s: &str) -> Result<HashFn, UnknownHash> {
        NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, f)| *f)
            .ok_or_else(|| UnknownHash(s.to_string()))
    }
}

impl fmt::Display for HashFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = NAMES
            .iter()
            .find(|(_, h)| h == self)
            .map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

impl HashFn {
    /// Every hash, for tests and docs.
    pub fn all() -> impl Iterator<Item = HashFn> {
        NAMES.iter().map(|(_, f)| *f)
    }

    /// The 32-bit hash of `key`, as nutcracker computes it.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            HashFn::OneAtATime => one_at_a_time(key),
            HashFn::Md5 => md5_le32(key, 0),
            HashFn::Crc16 => crc16(key),
            HashFn::Crc32 => (crc32fast::hash(key) >> 16) & 0x7fff,
            HashFn::Crc32a => crc32fast::hash(key),
            HashFn::Fnv1_64 => fnv1_64(key),
            HashFn::Fnv1a_64 => fnv1a_64(key),
            HashFn::Fnv1_32 => fnv1_32(key),
            HashFn::Fnv1a_32 => fnv1a_32(key),
            HashFn::Hsieh => hsieh(key),
            HashFn::Murmur => murmur(key),
            HashFn::Jenkins => jenkins(key),
        }
    }
}

/// A key byte as nutcracker's signed `char` widens it.
fn signed(b: u8) -> u32 {
    b as i8 as i32 as u32
}

/// Bytes `4 * word .. 4 * word + 4` of the MD5 digest of `data`, little-endian (ketama's
/// points take all four words of one digest).
pub(crate) fn md5_le32(data: &[u8], word: usize) -> u32 {
    let digest = Md5::digest(data);
    let at = word * 4;
    u32::from_le_bytes([digest[at], digest[at + 1], digest[at + 2], digest[at + 3]])
}

fn one_at_a_time(key: &[u8]) -> u32 {
    let mut v: u32 = 0;
    for &b in key {
        v = v.wrapping_add(signed(b));
        v = v.wrapping_add(v << 10);
        v ^= v >> 6;
    }
    v = v.wrapping_add(v << 3);
    v ^= v >> 11;
    v.wrapping_add(v << 15)
}

fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        let index = ((crc >> 8) ^ signed(b)) & 0xff;
        crc = (crc << 8) ^ u32::from(crate::slot::CRC16_TABLE[index as usize]);
    }
    crc
}

const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_32_INIT: u32 = 2_166_136_261;
const FNV_32_PRIME: u32 = 16_777_619;

fn fnv1_64(key: &[u8]) -> u32 {
    let mut h = FNV_64_INIT;
    for &b in key {
        h = h.wrapping_mul(FNV_64_PRIME);
        h ^= b as i8 as i64 as u64;
    }
    h as u32
}

fn fnv1a_64(key: &[u8]) -> u32 {
    let mut h = FNV_64_INIT as u32;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(FNV_64_PRIME as u32);
    }
    h
}

fn fnv1_32(key: &[u8]) -> u32 {
    let mut h = FNV_32_INIT;
    for &b in key {
        h = h.wrapping_mul(FNV_32_PRIME);
        h ^= signed(b);
    }
    h
}

fn fnv1a_32(key: &[u8]) -> u32 {
    let mut h = FNV_32_INIT;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(FNV_32_PRIME);
    }
    h
}

fn get16(d: &[u8]) -> u32 {
    (u32::from(d[1]) << 8) + u32::from(d[0])
}

fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let mut h: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        h = h.wrapping_add(get16(c));
        let tmp = (get16(&c[2..]) << 11) ^ h;
        h = (h << 16) ^ tmp;
        h = h.wrapping_add(h >> 11);
    }
    let rest = chunks.remainder();
    match rest.len() {
        3 => {
            h = h.wrapping_add(get16(rest));
            h ^= h << 16;
            h ^= signed(rest[2]) << 18;
            h = h.wrapping_add(h >> 11);
        }
        2 => {
            h = h.wrapping_add(get16(rest));
            h ^= h << 11;
            h = h.wrapping_add(h >> 17);
        }
        1 => {
            h = h.wrapping_add(u32::from(rest[0]));
            h ^= h << 10;
            h = h.wrapping_add(h >> 1);
        }
        _ => {}
    }
    h ^= h << 3;
    h = h.wrapping_add(h >> 5);
    h ^= h << 4;
    h = h.wrapping_add(h >> 17);
    h ^= h << 25;
    h.wrapping_add(h >> 6)
}

fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let mut h = 0xdead_beef_u32.wrapping_mul(len) ^ len;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// Bob Jenkins' lookup3 `hashlittle`, initial value 13 (every alignment path of
/// nutcracker's copy gives this byte-wise result on a little-endian machine).
fn jenkins(key: &[u8]) -> u32 {
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(13);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |k: &[u8]| {
        let mut w = [0u8; 4];
        w[..k.len()].copy_from_slice(k);
        u32::from_le_bytes(w)
    };
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        (a, b, c) = mix(a, b, c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    let at = |from: usize, to: usize| word(&rest[from.min(rest.len())..to.min(rest.len())]);
    a = a.wrapping_add(at(0, 4));
    b = b.wrapping_add(at(4, 8));
    c = c.wrapping_add(at(8, 12));
    final_mix(a, b, c)
}

fn mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(4);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(6);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(8);
    b = b.wrapping_add(a);
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(16);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(19);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(4);
    b = b.wrapping_add(a);
    (a, b, c)
}

fn final_mix(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in HashFn::all() {
            assert_eq!(h.to_string().parse::<HashFn>(), Ok(h));
        }
        assert!("sha1".parse::<HashFn>().is_err());
    }

    #[test]
    fn textbook_values_where_nutcracker_is_textbook() {
        // FNV-1a 32 of "a" and CRC-32 of "123456789", as published.
        assert_eq!(HashFn::Fnv1a_32.hash(b"a"), 0xe40c_292c);
        assert_eq!(HashFn::Crc32a.hash(b"123456789"), 0xcbf4_3926);
        // CRC-16/XMODEM of "123456789" in the low 16 bits.
        assert_eq!(HashFn::Crc16.hash(b"123456789") & 0xffff, 0x31c3);
        // lookup3's published hashlittle("", 0) is 0xdeadbeef; nutcracker seeds with 13.
        assert_eq!(HashFn::Jenkins.hash(b""), 0xdead_beef + 13);
    }

    #[test]
    fn high_bytes_are_sign_extended_as_nutcracker_does() {
        // 0xff as signed char is -1: FNV-1a 32 xors in 0xffffffff, not 0xff.
        let expect = (FNV_32_INIT ^ 0xffff_ffff).wrapping_mul(FNV_32_PRIME);
        assert_eq!(HashFn::Fnv1a_32.hash(&[0xff]), expect);
    }

    #[test]
    fn every_hash_takes_any_length() {
        for h in HashFn::all() {
            for len in 0..40 {
                let key: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
                let _ = h.hash(&key);
            }
        }
    }
}
