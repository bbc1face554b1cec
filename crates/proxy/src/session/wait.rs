//! WAIT through the proxy: the guarantee one Redis gives for the client's own writes, without
//! blocking anyone else.
//!
//! Redis answers WAIT with how many replicas acknowledged the client's last write. Sent on a
//! shared, pipelined connection, WAIT would hold every other client's replies queued behind
//! it (for ever with timeout 0); sent on a fresh connection it would vouch for nothing, since
//! that connection wrote nothing. So the proxy answers it itself:
//!
//! ```text
//!   writes ─▶ masters by slot, recorded here (which masters, since connect or last WAIT)
//!   WAIT n t ─▶ held until every earlier reply is in (so the writes have run), then a probe
//!      task per WAIT (`wait_probe.rs`), on its own connections:
//!        each master written: INFO replication ─▶ target = master_repl_offset
//!        loop: count online replicas with offset >= target; the least over the masters
//!              >= n, or t passed ─▶ answer that least
//!              else WAIT <huge> 1 on each (Redis asks its replicas for an ack: GETACK),
//!              a short sleep, and count again
//! ```
//!
//! The target is read after the client's writes ran, so it covers them (and maybe later
//! writes of others: the answer can only err on the safe side). The session reads no
//! further request until WAIT is answered, as Redis blocks the client.

use std::rc::Rc;

use bytes::Bytes;
use cluster::slot_map::SlotMap;
use resp::Request;

use crate::context::Shared;
use crate::reply::error;
use crate::route::Route;
use crate::session::queue::{ClientCell, Entry};
use crate::session::wait_probe::{probe, Probe};

/// Masters the client wrote to since it connected or last sent WAIT, as bits of their index
/// in the map of `version`; `all` when that cannot be told (more masters than bits, a write
/// to every master or to keys of several slots, or a map change since).
#[derive(Default, Clone, Copy)]
pub(crate) struct Written {
    masters: u128,
    version: u64,
    all: bool,
}

impl Written {
    /// A write went somewhere the map does not say: WAIT asks every master.
    pub(crate) fn note_unknown(&mut self) {
        self.all = true;
    }

    /// Remember where a write command goes under `map`. O(1): a bit.
    pub(crate) fn note(&mut self, route: &Route, map: &SlotMap) {
        let slot = match route {
            Route::Slot(slot) | Route::Read(slot) | Route::Exclusive(Some(slot)) => *slot,
            Route::Tx {
                slot: Some(slot), ..
            } => *slot,
            Route::AnyNode | Route::Split(_) | Route::Broadcast(_) | Route::Exclusive(None) => {
                self.all = true;
                return;
            }
            _ => return,
        };
        if self.masters != 0 && self.version != map.version() {
            self.all = true;
        }
        self.version = map.version();
        match map.node_index(slot).filter(|i| *i < 128) {
            Some(i) => self.masters |= 1u128 << i,
            None => self.all = true,
        }
    }
}

/// WAIT numreplicas timeout, once every earlier reply of `cell` is in: the writes noted
/// since the last WAIT (taken from `written`) decide which masters of `map` are probed, and
/// the answer goes to the entry pushed now. Err: WAIT's own error reply (bad arguments).
pub(crate) fn start(
    req: &Request,
    written: &mut Written,
    map: &SlotMap,
    shared: &Shared,
    cell: &Rc<ClientCell>,
) -> Result<(), Bytes> {
    let Some(numreplicas) = parse_i64(req.arg(1)) else {
        return Err(error("value is not an integer or out of range"));
    };
    let Some(timeout_ms) = parse_i64(req.arg(2)) else {
        return Err(error("timeout is not an integer or out of range"));
    };
    if timeout_ms < 0 {
        return Err(error("timeout is negative"));
    }
    let written = std::mem::take(written);
    let wrote = written.all || written.masters != 0;
    let every = !wrote || written.all || written.version != map.version();
    let masters: Vec<String> = map
        .nodes()
        .iter()
        .enumerate()
        .filter(|(i, _)| every || (*i < 128 && written.masters & (1u128 << i) != 0))
        .map(|(_, n)| n.addr.clone())
        .collect();
    let plan = Probe {
        masters,
        wrote,
        numreplicas,
        timeout_ms: timeout_ms as u64,
        auth: shared.backend_auth.clone(),
        tls: shared.backend_tls.clone(),
    };
    let seq = cell.push(Entry::pending_local());
    let cell = cell.clone();
    tokio::task::spawn_local(async move {
        let acked = probe(plan, &cell).await;
        cell.deliver_local(seq, Bytes::from(format!(":{acked}\r\n")));
    });
    Ok(())
}

/// An integer argument as Redis's `string2ll` reads it.
fn parse_i64(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}
