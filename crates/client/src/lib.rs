//! slotgate-client: a Redis Cluster client library for Rust (async and
//! blocking) and C, built on the same sans-IO `resp` and `cluster` crates as
//! the slotgate proxy.
//!
//! It exists so applications can talk to a cluster directly with the
//! guarantees the field reports ask for: one multiplexed connection per node
//! owned by one task, replies that can never reach the wrong caller (field
//! report 004), pipelines that keep the caller's order across nodes and
//! redirects, and a throttled, single-flight topology refresh (report 000).
//!
//! Commands that hold or change a connection stay off the shared one:
//! blocking commands (BLPOP, BLMOVE, XREAD ... BLOCK, WAIT...) run through
//! [`Client::cmd`] on dedicated connections from a small per-node idle pool,
//! bounded by their own timeout argument plus [`Config::timeout`]; pub/sub
//! uses [`Client::subscribe`], [`Client::psubscribe`] and
//! [`Client::ssubscribe`], each [`Subscription`] on its own connection.
//! [`Config::with_resp3`] switches every connection to RESP3 (`HELLO 3`).
//!
//! # Limits (not implemented yet)
//!
//! Connections are shared, so the remaining connection-state commands do not
//! belong on them: MULTI/EXEC/WATCH (a keyless MULTI is routed to a random
//! node) and SELECT. Pipelines refuse blocking and subscribe commands. Keyless
//! commands go to one random master (PUBLISH: its channel's slot owner); there
//! is no fan-out (KEYS, DBSIZE, FLUSHALL...). No AUTH/TLS, no replica reads,
//! no client-side caching (RESP3 pushes on shared connections are dropped).
//!
//! # Examples
//!
//! ```no_run
//! # async fn f() -> slotgate_client::Result<()> {
//! use slotgate_client::{Client, Pipeline};
//! let client = Client::cluster(["127.0.0.1:7000"]).await?;
//! client.set("k", "v").await?;
//! let mut p = Pipeline::new();
//! p.cmd(["GET", "k"]).cmd(["INCR", "n"]);
//! for reply in client.execute(&p).await {
//!     println!("{:?}", reply?);
//! }
//! # Ok(()) }
//! ```

mod blockcmd;
pub mod blocking;
mod client;
mod cmd;
mod commands;
mod conn;
mod dedicated;
mod engine;
mod error;
#[allow(unsafe_code)]
pub mod ffi;
mod pipeline;
mod pool;
mod pubsub;
mod reply;
mod stats;
mod topology;

pub use ::topology::TopologyCommand;
pub(crate) use client::Inner;
pub use client::{Client, Config};
pub use cmd::{Cmd, ToArg};
pub use error::{Error, Result};
pub use pipeline::Pipeline;
pub use pubsub::{Message, Subscription};
pub use resp::Value;
pub use stats::Stats;
