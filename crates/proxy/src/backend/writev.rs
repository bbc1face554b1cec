//! The write queue as vectored I/O: a `VecDeque<Bytes>` handed to `writev` without copying,
//! then trimmed by what the socket took. Shared by the backend and client socket sides.
//!
//! One `writev` is offered at most a turn's remaining quantum. On loopback the kernel copies
//! into the receiver while it drains, so a 100 MB slice offered whole was taken in one call
//! of up to 200 ms, and the worker's other clients waited that long whatever the quantum.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// Fewest bytes one write is offered, so a turn near its quantum still moves a useful piece.
pub(crate) const MIN_WRITE: usize = 64 * 1024;

/// Point `slices` at the front of `queue`, `max` bytes at most (no allocation); returns how
/// many were filled.
pub(crate) fn fill_slices<'a>(
    queue: &'a VecDeque<Bytes>,
    slices: &mut [IoSlice<'a>],
    max: usize,
) -> usize {
    let (mut count, mut room) = (0, max.max(MIN_WRITE));
    for (slot, buf) in slices.iter_mut().zip(queue.iter()) {
        let take = buf.len().min(room);
        *slot = IoSlice::new(&buf[..take]);
        count += 1;
        room -= take;
        if room == 0 {
            break;
        }
    }
    count
}

/// How many bytes a read or write may still move in a turn that moved `moved` of `quantum`.
pub(crate) fn room(quantum: usize, moved: usize) -> usize {
    quantum.saturating_sub(moved).max(MIN_WRITE)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_offered_at_most_the_turns_room() {
        let queue: VecDeque<Bytes> = [vec![1u8; 100], vec![2; 200_000], vec![3; 10]]
            .into_iter()
            .map(Bytes::from)
            .collect();
        let mut slices = [IoSlice::new(&[]); 8];
        let n = fill_slices(&queue, &mut slices, 100_000);
        let offered: usize = slices[..n].iter().map(|s| s.len()).sum();
        assert_eq!((n, offered), (2, 100_000));
        // Below the floor a write still gets MIN_WRITE.
        let n = fill_slices(&queue, &mut slices, 0);
        assert_eq!(
            slices[..n].iter().map(|s| s.len()).sum::<usize>(),
            MIN_WRITE
        );
        let n = fill_slices(&queue, &mut slices, usize::MAX);
        assert_eq!(n, 3);
    }
}
