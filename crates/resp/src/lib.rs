//! RESP2/RESP3 wire protocol for the slotgate proxy: request parsing, reply
//! framing, value decoding and encoding.
//!
//! This crate exists so that everything byte-level lives in one place that can
//! be tested and fuzzed in isolation. Its invariants: no I/O (callers own the
//! sockets and buffers), never panics on any input, an incomplete input is
//! "need more" and never an error, and framing never copies payloads (results
//! are `Bytes` slices of the input).
//!
//! * client → proxy: [`RequestParser`] turns bytes into [`Request`]s, answering
//!   malformed input with Redis's exact [`ProtocolError`] text;
//! * server → proxy: [`ReplyFramer`] finds where each reply ends so it can be
//!   forwarded untouched, and [`decode`] reads the few replies the proxy needs;
//! * proxy → anyone: [`Value::encode`] and the `write_*` helpers build replies.

#![warn(missing_docs)]

mod encode;
mod error;
mod header;
mod inline;
mod limits;
mod num;
mod reply_framer;
mod request;
mod request_parser;
mod scan;
mod value;
mod value_encode;

pub use encode::{
    encode_command, write_array_header, write_bulk, write_error, write_int, write_map_header,
    write_null, write_simple,
};
pub use error::{FrameError, ProtocolError};
pub use inline::InlineQuotes;
pub use limits::Limits;
/// Redis's strict integer syntax (`string2ll`): optional `-`, digits, no `+`, no leading
/// zeros, no spaces, within i64. Shared by every crate that reads a number from a request.
pub use num::string2ll;
pub use reply_framer::{is_error_frame, ReplyFramer};
pub use request::Request;
pub use request_parser::{Parsed, PendingTail, Progress, RequestParser};
pub use value::{decode, Value};
