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

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::Bytes;

use super::{ClientHandle, Registry};

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

/// Where a tracking client's invalidations go.
#[derive(Debug, Clone)]
pub(crate) struct Recipient {
    pub id: u64,
    registry: Arc<Registry>,
    index: usize,
}

impl Registry {
    /// The client `id`, if this worker serves it.
    pub(crate) fn recipient(self: &Arc<Self>, id: u64) -> Option<Recipient> {
        let slab = self.lock();
        let index = slab
            .slots
            .iter()
            .position(|s| s.meta.as_ref().is_some_and(|m| m.id == id))?;
        Some(Recipient {
            id,
            registry: self.clone(),
            index,
        })
    }
}

impl Recipient {
    /// Post `mail` and wake the client; false when it has left (its slot holds another).
    pub(crate) fn post(&self, mail: Mail) -> bool {
        let mut slab = self.registry.lock();
        let Some(slot) = slab.slots.get_mut(self.index) else {
            return false;
        };
        let Some(meta) = slot.meta.as_ref().filter(|m| m.id == self.id) else {
            return false;
        };
        let waker = meta.waker.clone();
        if slot.mail.len() >= MAIL_MAX {
            slot.mail.clear();
            slot.mail.push(Mail::Flush);
        } else {
            slot.mail.push(mail);
        }
        slot.live.has_mail.store(true, Relaxed);
        drop(slab);
        waker.wake();
        true
    }
}

impl ClientHandle {
    /// Take what other clients' tracking posted here (one relaxed load when nothing).
    pub(crate) fn take_mail(&self, into: &mut Vec<Mail>) {
        // A plain load first: the common case writes nothing.
        if !self.live.has_mail.load(Relaxed) || !self.live.has_mail.swap(false, Relaxed) {
            return;
        }
        let mut slab = self.registry.lock();
        into.append(&mut slab.slots[self.index].mail);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::meta;
    use super::*;

    #[test]
    fn mail_reaches_its_client_only_while_it_is_there() {
        let registry = Arc::new(Registry::default());
        let handle = registry.insert(meta(7));
        let to = registry.recipient(7).expect("client 7");
        assert!(registry.recipient(8).is_none());
        assert!(to.post(Mail::Keys(Bytes::from_static(b"*0\r\n"))));
        let mut got = Vec::new();
        handle.take_mail(&mut got);
        assert_eq!(got, [Mail::Keys(Bytes::from_static(b"*0\r\n"))]);
        drop(handle);
        let other = registry.insert(meta(9)); // reuses the slot
        assert!(!to.post(Mail::Flush));
        let mut got = Vec::new();
        other.take_mail(&mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn too_much_mail_becomes_one_flush() {
        let registry = Arc::new(Registry::default());
        let handle = registry.insert(meta(1));
        let to = registry.recipient(1).unwrap();
        for _ in 0..MAIL_MAX + 1 {
            to.post(Mail::Keys(Bytes::from_static(b"*0\r\n")));
        }
        let mut got = Vec::new();
        handle.take_mail(&mut got);
        assert_eq!(got, [Mail::Flush]);
    }
}
