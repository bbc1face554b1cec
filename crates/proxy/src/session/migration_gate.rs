//! `[migration]` as a session sees it (docs/migration.md): a request whose keys may still
//! be on the source waits (`Intake::Migrating`, `exclusive.rs`) until the worker's mover
//! took each from the source and restored it on the target; nothing the client sent after
//! it is read meanwhile, so its order of execution is the one it would have without the
//! migration. A key seen moved is remembered by the worker (moved is for good), so the
//! gate costs one set lookup per key afterwards.
//!
//! ```text
//!   request ─keys─▶ all known moved? ─yes─▶ dispatched as usual
//!                        │ no
//!                        ▼
//!   held ◀─ oneshot ◀─ task on the worker: migration::mover::move_key per unknown key
//!     └─▶ Ok: dispatched as usual │ Err: -TRYAGAIN, nothing sent (a retry is safe)
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;

use bytes::Bytes;
use cluster::flags;
use resp::Request;
use tokio::sync::oneshot;

use crate::migration::mover;
use crate::migration::pipes::Conns;
use crate::session::client::Client;

/// Keys a worker remembers as moved before it starts over (a forgotten key costs one
/// round trip to the source, which answers it absent), and their bytes: clients choose
/// the keys, so the memory is bounded by size as well as by count.
const KNOWN_MAX: usize = 1 << 20;
const KNOWN_MAX_BYTES: usize = 64 << 20;
/// Longer keys are never remembered: each of their requests asks the source again.
const KNOWN_KEY_MAX: usize = 512;

/// A worker's side of the migration: its idle connections and the keys it saw moved.
#[derive(Default)]
struct WorkerGate {
    conns: Rc<Conns>,
    known: RefCell<HashSet<Bytes>>,
    known_bytes: Cell<usize>,
}

impl WorkerGate {
    fn remember(&self, key: Bytes) {
        if key.len() > KNOWN_KEY_MAX {
            return;
        }
        let mut known = self.known.borrow_mut();
        if known.len() >= KNOWN_MAX || self.known_bytes.get() >= KNOWN_MAX_BYTES {
            known.clear();
            self.known_bytes.set(0);
        }
        self.known_bytes.set(self.known_bytes.get() + key.len());
        known.insert(key);
    }
}

thread_local! {
    /// One per worker thread, made at the first gated request.
    static GATE: Rc<WorkerGate> = Rc::default();
}

/// What the gate says of a request.
pub(crate) enum Gate {
    /// Its keys are known moved (or it has none): dispatch it.
    Pass,
    /// Refused while the migration runs, with this reply.
    Refuse(Bytes),
    /// Hold it until the answer: Ok, its keys moved; Err, the TRYAGAIN to answer.
    Wait(oneshot::Receiver<Result<(), Bytes>>),
}

/// The gate's word on `req` (module doc).
pub(crate) fn check(client: &Client, req: &Request) -> Gate {
    let Some(m) = client.worker.shared.migration.as_ref() else {
        return Gate::Pass;
    };
    if !m.gating() {
        return Gate::Pass;
    }
    let Some(spec) = cluster::lookup(req.arg(0)).map(|s| s.resolve(req.argc(), |i| req.arg(i)))
    else {
        return Gate::Pass;
    };
    if matches!(spec.name, "flushall" | "flushdb") {
        return Gate::Refuse(crate::reply::error(
            "slotgate: FLUSHALL and FLUSHDB would empty the target only while a migration \
             runs (the source's keys would come back); cut the migration over first",
        ));
    }
    if spec.has(flags::SHARD_CHANNEL) {
        return Gate::Pass;
    }
    let Ok(positions) = spec.key_positions(req.argc(), |i| req.arg(i)) else {
        return Gate::Pass;
    };
    let unknown: Vec<Bytes> = GATE.with(|g| {
        let known = g.known.borrow();
        positions
            .iter()
            .map(|i| req.arg(i))
            .filter(|k| !known.contains(*k))
            .map(Bytes::copy_from_slice)
            .collect()
    });
    if unknown.is_empty() {
        return Gate::Pass;
    }
    m.stats
        .gated
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    let (m, topology) = (m.clone(), client.worker.shared.topology.clone());
    let gate = GATE.with(Rc::clone);
    tokio::task::spawn_local(async move {
        for key in unknown {
            match mover::move_key(&m, &gate.conns, &topology, &key).await {
                Ok(moved) => {
                    if moved == mover::Moved::Restored {
                        m.stats
                            .gate_moves
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    let text = format!("TRYAGAIN slotgate: migration: {e}; nothing was run");
                    let _ = tx.send(Err(crate::reply::error_line(&text)));
                    return;
                }
            }
            gate.remember(key);
        }
        let _ = tx.send(Ok(()));
    });
    Gate::Wait(rx)
}
