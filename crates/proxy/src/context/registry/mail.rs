//! Invalidations handed from one client to another, on any worker: CLIENT TRACKING
//! REDIRECT.
//!
//! A client tracking with `REDIRECT id` has its invalidations delivered to client `id`
//! (a RESP2 client subscribed to `__redis__:invalidate`, or a RESP3 one), which may be served
//! by another worker thread. The tracking session finds its target once, when it turns
//! tracking on, and keeps a `Recipient` (the worker's registry, the slot, the id); each
//! invalidation is then posted into that slot under the worker's registry lock, and the
//! target's task is woken. The target checks one relaxed flag per wake-up and takes its mail
//! under the same lock. The lock is the one connect and close take: posting is per
//! invalidation, never per request.
//!
//! ```text
//!   tracking session ──post(Keys)──▶ [slot.mail] ──wake──▶ target session ──▶ its client
//!                                    (registry lock)        (one flag load per wake-up)
//! ```
//!
//! Bounded: past `MAIL_MAX` waiting, the mail is replaced by one flush (the target's client
//! drops its whole cache, which is safe), never left to grow.

use bytes::Bytes;

/// Invalidations waiting for one client, at most.
const MAIL_MAX: usize = 4096;

/// One invalidation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mail {
    /// The keys, as the RESP array Redis sends (`*N` of bulk strings).
    Keys(Bytes),
    /// Everything (FLUSHALL, a lost connection): Redis sends a null.
    Flush,
}

/// One client's waiting invalidations, kept in its registry slot (under the registry lock).
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    waiting: Vec<Mail>,
}

impl Mailbox {
    /// Past `MAIL_MAX` waiting, everything becomes one flush.
    pub(crate) fn post(&mut self, mail: Mail) {
        if self.waiting.len() >= MAIL_MAX {
            self.waiting.clear();
            self.waiting.push(Mail::Flush);
        } else {
            self.waiting.push(mail);
        }
    }

    pub(crate) fn take(&mut self, into: &mut Vec<Mail>) {
        into.append(&mut self.waiting);
    }

    pub(crate) fn clear(&mut self) {
        self.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_much_mail_becomes_one_flush() {
        let mut mailbox = Mailbox::default();
        for _ in 0..MAIL_MAX + 1 {
            mailbox.post(Mail::Keys(Bytes::from_static(b"*0\r\n")));
        }
        let mut got = Vec::new();
        mailbox.take(&mut got);
        assert_eq!(got, [Mail::Flush]);
    }
}
