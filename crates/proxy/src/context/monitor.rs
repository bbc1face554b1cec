//! MONITOR's feeds: every client that ran MONITOR, on any worker, gets a line for each
//! command any client of the proxy runs (`session/monitor.rs` writes the lines).
//!
//! While nobody monitors, a command costs one relaxed load (`Monitors::active`). With
//! monitors, each line is built once and appended to every feed under the feed's own lock,
//! and the monitoring session is woken to write it out; a feed more than `FEED_LIMIT` bytes
//! behind is closed, as Redis closes a monitor past its output buffer limit.
//!
//! ```text
//!   session (any worker) ─ line ─▶ Monitors ─▶ Feed (queue + waker) ─▶ monitoring session
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use bytes::Bytes;

/// The most bytes a feed holds before its monitor is closed (Redis's replica class hard
/// limit is 256 MiB; a monitor that falls this far behind has lost the thread anyway).
pub(crate) const FEED_LIMIT: usize = 64 << 20;

/// Every monitor of the proxy.
#[derive(Debug, Default)]
pub(crate) struct Monitors {
    active: AtomicUsize,
    feeds: Mutex<Vec<Arc<Feed>>>,
    /// A task follows the masters' own MONITOR for what scripts run there
    /// (`session/monitor.rs`): at most one per proxy.
    pub(crate) following_nodes: std::sync::atomic::AtomicBool,
    /// Masters whose MONITOR has not answered yet (a new monitor's `+OK` waits for them,
    /// so a script it sees run next is followed).
    pub(crate) nodes_pending: AtomicUsize,
}

/// One monitoring client's lines, waiting to be written.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    inner: Mutex<FeedInner>,
}

#[derive(Debug, Default)]
struct FeedInner {
    lines: VecDeque<Bytes>,
    bytes: usize,
    overflow: bool,
    waker: Option<Waker>,
}

impl Monitors {
    /// Whether anyone monitors: the one check every command pays.
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// A new monitor's feed.
    pub(crate) fn subscribe(&self) -> Arc<Feed> {
        let feed = Arc::new(Feed::default());
        let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        feeds.push(feed.clone());
        self.active.store(feeds.len(), Ordering::Relaxed);
        feed
    }

    /// The monitor of `feed` stopped (RESET, or it left).
    pub(crate) fn unsubscribe(&self, feed: &Arc<Feed>) {
        let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        feeds.retain(|f| !Arc::ptr_eq(f, feed));
        self.active.store(feeds.len(), Ordering::Relaxed);
    }

    /// Give `line` to every monitor.
    pub(crate) fn feed(&self, line: &Bytes) {
        let feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        for feed in feeds.iter() {
            feed.push(line.clone());
        }
    }
}

impl Feed {
    fn push(&self, line: Bytes) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.overflow {
            return;
        }
        inner.bytes += line.len();
        if inner.bytes > FEED_LIMIT {
            inner.overflow = true;
            inner.lines.clear();
        } else {
            inner.lines.push_back(line);
        }
        if let Some(waker) = inner.waker.take() {
            waker.wake();
        }
    }

    /// Move the lines waiting into `out` and remember `waker` for the next ones. Returns the
    /// bytes moved, or None when the feed overflowed (the monitor must be closed).
    pub(crate) fn take(&self, out: &mut VecDeque<Bytes>, waker: &Waker) -> Option<usize> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.overflow {
            return None;
        }
        let moved = inner.bytes;
        out.extend(inner.lines.drain(..));
        inner.bytes = 0;
        if !inner.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            inner.waker = Some(waker.clone());
        }
        Some(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_reach_every_feed_until_one_overflows() {
        let monitors = Monitors::default();
        assert!(!monitors.active());
        let (a, b) = (monitors.subscribe(), monitors.subscribe());
        assert!(monitors.active());
        monitors.feed(&Bytes::from_static(b"+1 [0 x] \"PING\"\r\n"));
        let waker = Waker::noop();
        let mut out = VecDeque::new();
        assert_eq!(a.take(&mut out, waker), Some(17));
        assert_eq!(out.len(), 1);
        monitors.unsubscribe(&a);
        monitors.feed(&Bytes::from(vec![b'x'; FEED_LIMIT + 1]));
        assert_eq!(b.take(&mut out, waker), None, "past the limit: closed");
        assert_eq!(
            a.take(&mut out, waker),
            Some(0),
            "unsubscribed: nothing more"
        );
        monitors.unsubscribe(&b);
        assert!(!monitors.active());
    }
}
