//! Big keys (issue 27): the largest replies by key a worker saw, on the sampled requests
//! only, so the board costs nothing for the 15 requests in 16 not sampled.
//!
//! A list of `BIG_CAPACITY` keys, each with the largest reply seen for it and the command
//! that asked: a key not on a full list takes the place of the smallest one only when its
//! reply is larger. The list sits in the worker's hot-key `Board` and is windowed with it
//! (the current window and the one before), so a key that shrank or went leaves within two
//! windows. The board hands keys already cut as on the sketch (`MAX_KEY`).

use std::collections::HashMap;

/// Keys a worker's list of big replies holds.
pub const BIG_CAPACITY: usize = 16;

/// One window's largest replies.
#[derive(Debug, Default, Clone)]
pub struct BigKeys {
    entries: Vec<BigKey>,
}

/// A key and the largest reply seen for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigKey {
    pub key: Vec<u8>,
    pub reply_bytes: u64,
    /// The command table's stats index of the request that got that reply.
    pub command: u16,
}

impl BigKeys {
    /// A reply of `bytes` to `command` on `key`. A scan of at most `BIG_CAPACITY` entries;
    /// the key is copied only when it joins the list.
    pub fn offer(&mut self, key: &[u8], bytes: u64, command: u16) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.key == key) {
            if bytes > e.reply_bytes {
                e.reply_bytes = bytes;
                e.command = command;
            }
            return;
        }
        let new = BigKey {
            key: key.to_vec(),
            reply_bytes: bytes,
            command,
        };
        if self.entries.len() < BIG_CAPACITY {
            self.entries.push(new);
            return;
        }
        let smallest = self
            .entries
            .iter_mut()
            .min_by_key(|e| e.reply_bytes)
            .filter(|e| e.reply_bytes < bytes);
        if let Some(slot) = smallest {
            *slot = new;
        }
    }

    pub(super) fn add_into(&self, all: &mut HashMap<Vec<u8>, (u64, u16)>) {
        for e in &self.entries {
            let t = all.entry(e.key.clone()).or_insert((0, e.command));
            if e.reply_bytes > t.0 {
                *t = (e.reply_bytes, e.command);
            }
        }
    }
}

/// The `top` largest of the merged lists, largest first (ties by key).
pub(super) fn ranked(all: HashMap<Vec<u8>, (u64, u16)>, top: usize) -> Vec<BigKey> {
    let mut out: Vec<BigKey> = all
        .into_iter()
        .map(|(key, (reply_bytes, command))| BigKey {
            key,
            reply_bytes,
            command,
        })
        .collect();
    out.sort_by(|a, b| {
        b.reply_bytes
            .cmp(&a.reply_bytes)
            .then_with(|| a.key.cmp(&b.key))
    });
    out.truncate(top);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_replies_stay_and_small_ones_do_not_displace_them() {
        let mut b = BigKeys::default();
        for i in 0..100u64 {
            b.offer(format!("k{i}").as_bytes(), i * 10, 1);
        }
        b.offer(b"k99", 5, 2);
        let mut all = HashMap::new();
        b.add_into(&mut all);
        let top = ranked(all, 3);
        let keys: Vec<&[u8]> = top.iter().map(|k| k.key.as_slice()).collect();
        assert_eq!(keys, [b"k99".as_slice(), b"k98", b"k97"]);
        assert_eq!((top[0].reply_bytes, top[0].command), (990, 1));
        assert_eq!(b.entries.len(), BIG_CAPACITY);
    }
}
