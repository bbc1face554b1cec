//! Reuse of big frame buffers, per worker thread.
//!
//! A request or reply of many megabytes is framed whole into one buffer of its exact size.
//! glibc maps every allocation above 32 MB fresh and unmaps it on free, so without reuse each
//! 100 MB value faults in 25,600 new zeroed pages: a third of the proxy's time in the
//! big-values scenario before requests and replies were streamed (`upload.rs`,
//! `backend/replies.rs`). Alone it took 10 × 100 MB SETs from 2,130 to 1,820 ms in an A/B;
//! it now serves the big frames that are still framed whole (a big value inside an array).
//!
//! The fix keeps a handle (an empty `BytesMut` view) on the allocation of each big frame
//! that was split off a read buffer. Once the frame itself is dropped (written to its
//! socket), the handle is the allocation's only owner and `try_reclaim` turns it back into a
//! whole, already-faulted buffer for the next big frame. Nothing is copied and nothing is
//! locked: each worker thread has its own pool, and handles age out after `MAX_IDLE_TICKS`
//! so memory returns to the system once big values stop.

use std::cell::RefCell;

use bytes::BytesMut;

/// Frames at least this big go through the pool; smaller ones are served by the heap, which
/// reuses them cheaply already.
pub(crate) const BIG: usize = 4 << 20;
/// Handles kept per worker: two frames in flight (one being read, one being written) plus
/// one for each direction.
const MAX_HANDLES: usize = 4;
/// Worker ticks (250 ms) a handle may stay unused before its memory is released.
const MAX_IDLE_TICKS: u32 = 8;

struct Handle {
    view: BytesMut,
    idle_ticks: u32,
}

thread_local! {
    static POOL: RefCell<Vec<Handle>> = const { RefCell::new(Vec::new()) };
}

/// Make room in `buf` for a frame of `total` bytes (of which `buf` holds the start). Big
/// frames take a retired buffer when one is free, so their pages are already mapped.
pub(crate) fn reserve_frame(buf: &mut BytesMut, total: usize) {
    let additional = total.saturating_sub(buf.len());
    if total < BIG || buf.capacity() >= total {
        buf.reserve(additional);
        return;
    }
    match take(total) {
        Some(mut reused) => {
            reused.extend_from_slice(buf);
            *buf = reused;
        }
        None => buf.reserve(additional),
    }
}

/// Call after splitting a frame of `frame_len` bytes off the front of `buf`: for a big
/// frame, keep a handle on its allocation (which `buf` still shares) for reuse.
pub(crate) fn retire(buf: &mut BytesMut, frame_len: usize) {
    if frame_len < BIG {
        return;
    }
    // `buf` keeps only what follows the frame; its next reserve lets go of the allocation.
    let view = match buf.is_empty() {
        true => std::mem::take(buf),
        false => buf.split_off(buf.len()),
    };
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() == MAX_HANDLES {
            pool.remove(0);
        }
        pool.push(Handle {
            view,
            idle_ticks: 0,
        });
    });
}

/// A whole free buffer of at least `total` bytes, if a retired frame's allocation is free.
fn take(total: usize) -> Option<BytesMut> {
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let at = pool
            .iter_mut()
            .position(|h| h.view.capacity() >= total || h.view.try_reclaim(total))?;
        let mut view = pool.swap_remove(at).view;
        view.clear();
        Some(view)
    })
}

/// The worker's periodic tick: release allocations nobody reused for a while.
pub(crate) fn tick() {
    POOL.with(|pool| {
        pool.borrow_mut().retain_mut(|h| {
            h.idle_ticks += 1;
            h.idle_ticks <= MAX_IDLE_TICKS
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_frame_buffer_is_reused_once_the_frame_is_gone() {
        let mut buf = BytesMut::new();
        reserve_frame(&mut buf, BIG);
        buf.resize(BIG, b'x');
        let first = buf.as_ptr();
        let frame = buf.split_to(BIG).freeze();
        retire(&mut buf, BIG);
        // Still referenced by the frame: a new allocation.
        let mut other = BytesMut::new();
        reserve_frame(&mut other, BIG);
        assert_ne!(other.as_ptr(), first);
        drop(frame);
        let mut again = BytesMut::from(&b"*3\r\n"[..]);
        reserve_frame(&mut again, BIG);
        assert_eq!(again.as_ptr(), first);
        assert_eq!(&again[..], b"*3\r\n");
        assert!(again.capacity() >= BIG);
    }

    #[test]
    fn unused_handles_age_out() {
        let mut buf = BytesMut::with_capacity(BIG);
        buf.resize(BIG, 0);
        drop(buf.split_to(BIG));
        retire(&mut buf, BIG);
        for _ in 0..=MAX_IDLE_TICKS {
            tick();
        }
        assert!(take(BIG).is_none());
    }
}
