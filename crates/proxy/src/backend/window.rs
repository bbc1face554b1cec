//! How many replies one node connection may owe at once, so that what a node holds for the
//! proxy stays bounded whatever the clients ask for.
//!
//! Why: Redis runs every command of its query buffer before it writes much of the output
//! (64 KiB per client and event loop turn without `maxmemory`). A thousand pipelined GETs of
//! a 1 MiB value, written to a shared connection in one go, become a gigabyte in the node's
//! output buffer before the proxy has read the first reply: memory outside the proxy's
//! budget, and a connection the node may cut (`client-output-buffer-limit`), failing every
//! client's requests on it. The sessions' memory budget (`budget.rs`) cannot prevent it,
//! since it learns a reply's size only once the reply is here.
//!
//! So each connection writes a request only while its replies owed fit `OWED_BYTES` at the
//! size its recent replies had: thousands of small replies, a few dozen megabyte ones. The
//! estimate rises fast (a big reply halves the gap) and falls slowly (1/16 of the gap per
//! reply); a fresh connection starts from a pessimistic guess, so its first write is a
//! bounded one too. Requests held back wait in the backend's queue, in order, counted by the
//! sessions' budget like any request in flight.

/// Estimated reply bytes one connection may owe.
pub(super) const OWED_BYTES: usize = 32 << 20;
/// What a fresh connection expects of each reply before it has seen one.
const FIRST_GUESS: usize = 256 << 10;
/// Requests a connection may always have in flight, however big its replies.
const MIN_IN_FLIGHT: usize = 2;

/// The reply-size estimate of one connection.
pub(super) struct OwedWindow {
    reply_size: usize,
}

impl OwedWindow {
    pub(super) fn new() -> OwedWindow {
        OwedWindow {
            reply_size: FIRST_GUESS,
        }
    }

    /// A reply of `len` bytes arrived.
    pub(super) fn observe(&mut self, len: usize) {
        let e = self.reply_size;
        self.reply_size = match len > e {
            true => e + (len - e) / 2,
            false => e - (e - len) / 16,
        };
    }

    /// Whether a connection owing `in_flight` replies may write one more request.
    pub(super) fn has_room(&self, in_flight: usize) -> bool {
        in_flight < MIN_IN_FLIGHT || in_flight < OWED_BYTES / self.reply_size.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_connection_writes_a_bounded_first_burst() {
        let w = OwedWindow::new();
        assert!(w.has_room(OWED_BYTES / FIRST_GUESS - 1));
        assert!(!w.has_room(OWED_BYTES / FIRST_GUESS));
    }

    #[test]
    fn small_replies_open_the_window_and_big_ones_close_it_fast() {
        let mut w = OwedWindow::new();
        for _ in 0..200 {
            w.observe(10);
        }
        assert!(w.has_room(100_000), "small replies: {}", w.reply_size);
        for _ in 0..4 {
            w.observe(1 << 20);
        }
        assert!(!w.has_room(OWED_BYTES / (512 << 10)), "{}", w.reply_size);
    }

    #[test]
    fn replies_bigger_than_the_whole_window_still_leave_room_for_progress() {
        let mut w = OwedWindow::new();
        w.observe(usize::MAX / 2);
        w.observe(usize::MAX / 2);
        assert!(w.has_room(MIN_IN_FLIGHT - 1));
        assert!(!w.has_room(MIN_IN_FLIGHT));
    }
}
