//! `[mirror]`: a copy of a client's request sent to a second pool, beside the request itself,
//! never in its way.
//!
//! ```text
//!   SET k v ─▶ forwarded as always ─▶ the client's reply
//!      └─ drawn (percent) ─▶ the mirror server of k (its pool's placement)
//!                            ─▶ its reply counted and dropped (MirrorSink)
//! ```
//!
//! A copy is sent only for a single-slot request that may write (or any keyed one with
//! `commands = "all"`), of at most 16 KiB, in the client's database and RESP2, on the
//! worker's shared connection to the mirror server. Its reply never reaches the client, its
//! failure never fails the client, and a mirror server whose connection is behind (queue
//! full) costs the client nothing: the copy is dropped and counted.

use std::rc::Rc;

use bytes::Bytes;
use cluster::flags;
use resp::Request;

use crate::backend::{Outgoing, ReplySink, Wire};
use crate::context::traffic_mirror::{MirrorCounters, TrafficMirror};
use crate::context::WorkerStats;
use crate::patience::Patience;
use crate::session::client::Client;

/// Copies queued on one mirror connection past which new ones are dropped, and the largest
/// request copied: a copy holds its request's bytes (a slice of the client's read buffer)
/// until written, so a slow mirror server pins at most 1,024 × 16 KiB = 16 MiB per worker
/// and mirror server, whatever the clients send. Larger requests are dropped, counted.
const MAX_QUEUED: usize = 1024;
const MAX_COPY_BYTES: usize = 16 * 1024;

/// Copy `req` to the mirror pool if it is drawn and eligible.
pub(crate) fn copy(client: &Client, req: &Request, mirror: &TrafficMirror) {
    let worker = &client.worker;
    let Some(spec) = cluster::lookup(req.arg(0)) else {
        return;
    };
    let spec = spec.resolve(req.argc(), |i: usize| req.arg(i));
    if mirror.writes_only && !spec.has(flags::WRITE) {
        return;
    }
    if !worker.mirror_drawn(mirror.percent) {
        return;
    }
    let counters = &worker.stats.mirror;
    if req.raw().len() > MAX_COPY_BYTES {
        return MirrorCounters::bump(&counters.dropped);
    }
    let Ok(keys) = spec.key_positions(req.argc(), |i: usize| req.arg(i)) else {
        return;
    };
    let mut servers = keys.iter().map(|i| mirror.pool.server_of(req.arg(i)));
    let Some(server) = servers.next() else {
        return;
    };
    if servers.any(|s| s != server) {
        return MirrorCounters::bump(&counters.dropped);
    }
    let addr = &mirror.pool.servers()[usize::from(server)].addr;
    let wire = Wire {
        resp3: false,
        db: client.info.db,
        no_touch: false,
        import_source: false,
        tracker: 0,
    };
    let backend = worker.backend_for_addr(addr, wire);
    if backend.queued() >= MAX_QUEUED {
        return MirrorCounters::bump(&counters.dropped);
    }
    let sink = worker.mirror_sink(|| Rc::new(MirrorSink(worker.stats.clone())));
    let out = Outgoing::new(req.raw().clone(), sink, 0);
    backend.send_with(out, Patience::of_request(req));
    MirrorCounters::bump(&counters.sent);
}

/// Where the mirror servers' replies go: counted, then dropped.
struct MirrorSink(std::sync::Arc<WorkerStats>);

impl ReplySink for MirrorSink {
    fn deliver(&self, _seq: u64, _frag: u32, reply: Bytes) {
        let counters = &self.0.mirror;
        match resp::is_error_frame(&reply) {
            true => MirrorCounters::bump(&counters.failed),
            false => MirrorCounters::bump(&counters.answered),
        }
    }

    fn not_sent(&self, _seq: u64, _frag: u32, _reply: Bytes) {
        MirrorCounters::bump(&self.0.mirror.failed);
    }

    fn may_stream_reply(&self, _seq: u64, _frag: u32) -> bool {
        false
    }

    fn deliver_piece(&self, _seq: u64, _piece: Bytes, _total: usize) {}

    fn push_frame(&self, _source: usize, _frame: Bytes) {}

    fn stream_lost(&self) {}
}
