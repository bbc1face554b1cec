//! Size limits for client requests.
//!
//! They exist so that a hostile or broken client cannot make the proxy buffer
//! unbounded data or allocate from a declared count. The defaults are Redis's
//! own (`proto-max-bulk-len`, `PROTO_INLINE_MAX_SIZE`, `INT_MAX`), so the proxy
//! rejects exactly what a Redis server would reject.

/// Limits applied by [`crate::RequestParser`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk argument length (`$N` with `N <= max_bulk_len` is accepted).
    /// Default 512 MiB, Redis's `proto-max-bulk-len`.
    pub max_bulk_len: usize,
    /// Longest inline line, and longest `*`/`$` length line, before the request is
    /// rejected as "too big". Default 64 KiB, Redis's `PROTO_INLINE_MAX_SIZE`.
    pub max_inline_len: usize,
    /// Largest accepted multibulk count (`*N`). Default `i32::MAX`, as in Redis.
    pub max_multibulk_len: usize,
}

impl Default for Limits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_multibulk_len: i32::MAX as usize,
        }
    }
}
