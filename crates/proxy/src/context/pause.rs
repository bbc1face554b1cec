//! CLIENT PAUSE: the proxy pauses its own dispatch, as Redis pauses its clients.
//!
//! One state for the whole proxy (every worker's sessions read it), packed into one atomic
//! so a session's check while nothing is paused is a single relaxed load. A pause only
//! grows, as in Redis: a second CLIENT PAUSE keeps the later end and the stricter kind;
//! CLIENT UNPAUSE ends it (and the caller wakes every session, `client_command.rs`). The
//! nodes are not paused: their connections are shared, and a node that postponed one
//! client's write would hold every other client's reads queued behind it on that
//! connection. So what the nodes do on their own (expiring keys) goes on during a pause.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What a pause holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PauseKind {
    /// Commands that write or may replicate (Redis's `write` and `may_replicate` flags,
    /// EXEC of a transaction holding one, scripts not marked read-only).
    Write = 1,
    /// Every command.
    All = 2,
}

/// The pause in force: the end in milliseconds on the proxy's clock (`Shared::started`)
/// in the low 62 bits, the kind in the top two (0: none).
#[derive(Debug, Default)]
pub(crate) struct ClientPause(AtomicU64);

const KIND_SHIFT: u32 = 62;
const END_MASK: u64 = (1 << KIND_SHIFT) - 1;

impl ClientPause {
    /// Pause until `end_ms` (or later, if already so), `kind` or stricter.
    /// A pause that ended before `now_ms` counts for nothing: its kind does not carry over
    /// (a past PAUSE ALL made a later PAUSE WRITE an ALL).
    pub(crate) fn pause(&self, now_ms: u64, end_ms: u64, kind: PauseKind) {
        let _ = self.0.fetch_update(Relaxed, Relaxed, |packed| {
            let (old_kind, old_end) = match unpack(packed) {
                (_, end) if end <= now_ms => (None, 0),
                old => old,
            };
            let kind = old_kind.map_or(kind, |k| k.max(kind));
            Some(pack(kind, old_end.max(end_ms.min(END_MASK))))
        });
    }

    pub(crate) fn unpause(&self) {
        self.0.store(0, Relaxed);
    }

    /// Whether a pause was set and not yet lifted (it may have ended by the clock).
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Relaxed) != 0
    }

    /// The pause in force at `now_ms`, with its end; None when there is none or it ended.
    /// While nothing is paused this is one relaxed load and a compare: `now_ms` is only
    /// called when something is.
    pub(crate) fn current(&self, now_ms: impl FnOnce() -> u64) -> Option<(PauseKind, u64)> {
        let packed = self.0.load(Relaxed);
        if packed == 0 {
            return None;
        }
        let (kind, end) = unpack(packed);
        (now_ms() < end).then_some((kind?, end))
    }
}

fn pack(kind: PauseKind, end_ms: u64) -> u64 {
    ((kind as u64) << KIND_SHIFT) | end_ms
}

fn unpack(packed: u64) -> (Option<PauseKind>, u64) {
    let kind = match packed >> KIND_SHIFT {
        1 => Some(PauseKind::Write),
        2 => Some(PauseKind::All),
        _ => None,
    };
    (kind, packed & END_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_only_grows_until_unpaused() {
        let p = ClientPause::default();
        assert_eq!(p.current(|| 0), None);
        p.pause(0, 100, PauseKind::All);
        p.pause(0, 50, PauseKind::Write);
        assert_eq!(p.current(|| 10), Some((PauseKind::All, 100)));
        p.pause(10, 200, PauseKind::Write);
        assert_eq!(p.current(|| 150), Some((PauseKind::All, 200)));
        assert_eq!(p.current(|| 200), None, "ended");
        p.unpause();
        assert_eq!(p.current(|| 0), None);
        p.pause(0, u64::MAX, PauseKind::Write);
        assert_eq!(p.current(|| 1 << 40), Some((PauseKind::Write, END_MASK)));
    }

    #[test]
    fn an_ended_pause_leaves_nothing_to_a_new_one() {
        let p = ClientPause::default();
        p.pause(0, 200, PauseKind::All);
        p.pause(0, 20, PauseKind::Write);
        // Redis's unit/pause: a PAUSE WRITE after an ALL that ended pauses writes only.
        p.pause(300, 60_300, PauseKind::Write);
        assert_eq!(p.current(|| 400), Some((PauseKind::Write, 60_300)));
    }
}
