//! The one error type of the client, so callers can match on what went wrong
//! (and decide whether a retry is safe) instead of parsing strings.

/// Everything a client call can fail with.
///
/// Server error replies that are not cluster redirections come back as
/// [`Error::Server`] with Redis's own text. Variants say whether the request
/// may have reached the server: [`Error::NotSent`] is always safe to retry,
/// [`Error::OutcomeUnknown`] is not for writes.
///
/// # Examples
///
/// ```no_run
/// # async fn f(client: slotgate_client::Client) {
/// match client.get("k").await {
///     Err(slotgate_client::Error::Server(text)) => eprintln!("redis said {text}"),
///     Err(e) => eprintln!("client error: {e}"),
///     Ok(v) => println!("{v:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Connecting or talking to a node failed before the request was written.
    #[error("I/O error: {0}")]
    Io(String),
    /// The request was never written to any socket; retrying it is safe.
    #[error("request not sent: {0}")]
    NotSent(String),
    /// The connection died after the request was (maybe) written and before its
    /// reply arrived. A write may or may not have been applied, so the client
    /// never resends it on its own.
    #[error("connection lost after sending; outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The server sent bytes that are not valid RESP, or an unexpected reply.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An error reply from Redis, without the leading `-`.
    #[error("server error: {0}")]
    Server(String),
    /// MOVED/ASK were followed more times than allowed.
    #[error("too many redirects; last: {0}")]
    RedirectLimit(String),
    /// TRYAGAIN/CLUSTERDOWN persisted through every retry.
    #[error("retries exhausted; last: {0}")]
    RetriesExhausted(String),
    /// The request did not complete within the client's deadline.
    #[error("request timed out")]
    Timeout,
    /// No usable cluster topology, or no node serves the slot.
    #[error("topology: {0}")]
    Topology(String),
    /// The call itself is invalid (empty command, bad seed address...).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The reply has another type than the typed helper expects.
    #[error("unexpected reply type: {0}")]
    UnexpectedReply(String),
}

/// Shorthand used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
