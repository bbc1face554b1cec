//! The write queue as vectored I/O: a `VecDeque<Bytes>` handed to `writev` without copying,
//! then trimmed by what the socket took. Shared by the backend and client socket sides.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// Point `slices` at the front of `queue` (no allocation); returns how many were filled.
pub(crate) fn fill_slices<'a>(queue: &'a VecDeque<Bytes>, slices: &mut [IoSlice<'a>]) -> usize {
    let mut count = 0;
    for (slot, buf) in slices.iter_mut().zip(queue.iter()) {
        *slot = IoSlice::new(buf);
        count += 1;
    }
    count
}

/// Drop `n` written bytes from the front of the queue.
pub(crate) fn advance(queue: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = queue.front_mut() else {
            return;
        };
        if front.len() <= n {
            n -= front.len();
            queue.pop_front();
        } else {
            front.advance(n);
            n = 0;
        }
    }
}
