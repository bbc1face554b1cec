//! What lets a client log in as a user: ACL SETUSER's `on`/`off`, its passwords and `nopass`.
//!
//! Passwords are kept as their SHA-256, as Redis keeps them (`#<hex>` in ACL LIST), so a
//! password set at runtime is never held in clear; a configured one is hashed at load.

use ring::digest;

/// A user's login state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Passwords {
    /// `on`: the user may log in; `off` (a new user's state): no password matches.
    pub enabled: bool,
    /// Any password matches (the hashes are then empty).
    pub nopass: bool,
    /// SHA-256 of each password, in the order they were added.
    pub hashes: Vec<[u8; 32]>,
    /// `sanitize-payload` or `skip-sanitize-payload` when set (shown, not acted on: the
    /// nodes check RESTORE payloads of the backend user).
    pub payload: Option<&'static str>,
}

impl Passwords {
    /// A configured user: on, with one password.
    pub(crate) fn one(password: &str) -> Passwords {
        Passwords {
            enabled: true,
            nopass: false,
            hashes: vec![sha256(password.as_bytes())],
            payload: None,
        }
    }

    /// Does `given` log in? Compared hash against hash, every hash looked at, so the time
    /// taken says nothing about which byte differed.
    pub(crate) fn matches(&self, given: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let given = sha256(given);
        let mut found = false;
        for hash in &self.hashes {
            let diff = hash.iter().zip(given).fold(0u8, |d, (a, b)| d | (a ^ b));
            found |= diff == 0;
        }
        found
    }

    /// Add a hash (`>password`, `#hex`); adding one clears `nopass`, as in Redis.
    pub(crate) fn add(&mut self, hash: [u8; 32]) {
        self.nopass = false;
        if !self.hashes.contains(&hash) {
            self.hashes.push(hash);
        }
    }

    /// Remove a hash (`<password`, `!hex`); false when the user has no such password.
    pub(crate) fn remove(&mut self, hash: &[u8; 32]) -> bool {
        let before = self.hashes.len();
        self.hashes.retain(|h| h != hash);
        self.hashes.len() != before
    }
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

/// `#<hex>`'s 64 lowercase hex digits, or None (Redis refuses uppercase too).
pub(crate) fn parse_hex(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_match_by_hash_and_state() {
        let mut p = Passwords::one("pw");
        assert!(p.matches(b"pw") && !p.matches(b"pw2") && !p.matches(b""));
        p.enabled = false;
        assert!(!p.matches(b"pw"), "off: nothing matches");
        p.enabled = true;
        p.add(sha256(b"second"));
        assert!(p.matches(b"second") && p.matches(b"pw"));
        assert!(p.remove(&sha256(b"pw")) && !p.remove(&sha256(b"pw")));
        assert!(!p.matches(b"pw"));
        let text = hex(&sha256(b"123"));
        assert_eq!(
            text,
            "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3"
        );
        assert_eq!(parse_hex(text.as_bytes()), Some(sha256(b"123")));
        assert_eq!(parse_hex(text.to_uppercase().as_bytes()), None);
        assert_eq!(parse_hex(b"abc"), None);
    }
}
