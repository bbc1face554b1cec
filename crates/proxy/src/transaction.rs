//! MULTI/EXEC/DISCARD/WATCH/UNWATCH through the proxy.
//!
//! Commands after MULTI are checked and queued here, answered `+QUEUED` as Redis does, and
//! only at EXEC sent to the node owning their slot, as one write on the session's dedicated
//! connection: `MULTI, cmd…, EXEC`. The client gets EXEC's reply; the node's `+OK`/`+QUEUED`
//! replies are read and dropped. A transaction is pinned to one slot (that of WATCH or of its
//! first key): a key of another slot gets CROSSSLOT and the transaction is discarded at EXEC
//! (`-EXECABORT`), as is any command Redis would refuse at queue time. If the slot moved
//! meanwhile, the node refuses the queued commands and EXEC answers EXECABORT: nothing was
//! applied, and the client is told so.

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::exclusive::Held;
use crate::pending::Entry;
use crate::router::{error, Local, Route};
use crate::session::Session;

/// A MULTI in progress.
#[derive(Default)]
pub(crate) struct Transaction {
    queued: Vec<Request>,
    slot: Option<u16>,
    aborted: bool,
}

/// The transaction commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxCommand {
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

const CROSSSLOT: &[u8] = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n";

impl Transaction {
    /// Commands queued so far (CLIENT LIST's `multi=`).
    pub(crate) fn len(&self) -> usize {
        self.queued.len()
    }
}

// === impl Session (transactions) ===

impl Session {
    /// MULTI, EXEC, DISCARD, WATCH or UNWATCH. `slot` is WATCH's keys' slot.
    pub(crate) fn transaction_command(&mut self, cmd: TxCommand, req: Request, slot: Option<u16>) {
        let reply: &'static [u8] = match (cmd, self.tx.is_some()) {
            (TxCommand::Multi, true) => b"-ERR MULTI calls can not be nested\r\n",
            (TxCommand::Multi, false) => {
                self.tx = Some(Transaction {
                    slot: self.watch_slot,
                    ..Transaction::default()
                });
                b"+OK\r\n"
            }
            (TxCommand::Exec, false) => b"-ERR EXEC without MULTI\r\n",
            (TxCommand::Exec, true) => return self.exec(),
            (TxCommand::Discard, false) => b"-ERR DISCARD without MULTI\r\n",
            (TxCommand::Discard, true) => {
                self.tx = None;
                self.forget_watch();
                b"+OK\r\n"
            }
            (TxCommand::Watch, true) => b"-ERR WATCH inside MULTI is not allowed\r\n",
            (TxCommand::Watch, false) => return self.watch(req, slot),
            (TxCommand::Unwatch, _) => {
                self.forget_watch();
                b"+OK\r\n"
            }
        };
        self.cell.push(Entry::ready(Bytes::from_static(reply)));
    }

    /// A command between MULTI and EXEC: check it as the node would, then queue it.
    pub(crate) fn queue_in_transaction(&mut self, req: Request, route: Route) {
        let Some(tx) = self.tx.as_mut() else { return };
        let reply = match route {
            Route::Refuse(err) => Some(err),
            Route::Slot(slot) if tx.slot.is_some_and(|s| s != slot) => {
                Some(Bytes::from_static(CROSSSLOT))
            }
            Route::Slot(slot) => {
                tx.slot = Some(slot);
                None
            }
            Route::AnyNode | Route::Local(Local::Ping | Local::Echo | Local::ClusterFlag) => None,
            Route::Split { .. } => Some(Bytes::from_static(CROSSSLOT)),
            _ => Some(error(
                "slotgate: this command cannot be used inside MULTI through the proxy",
            )),
        };
        match reply {
            Some(err) => {
                tx.aborted = true;
                self.cell.push(Entry::ready(err));
            }
            None => {
                tx.queued.push(req);
                self.cell
                    .push(Entry::ready(Bytes::from_static(b"+QUEUED\r\n")));
            }
        }
    }

    fn exec(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        self.watch_slot = None;
        if tx.aborted {
            self.drop_dedicated();
            let abort = b"-EXECABORT Transaction discarded because of previous errors.\r\n";
            return self.cell.push_ready(Bytes::from_static(abort));
        }
        let mut frame = BytesMut::new();
        resp::encode_command(&mut frame, &[b"MULTI"]);
        for req in &tx.queued {
            frame.extend_from_slice(req.raw());
        }
        resp::encode_command(&mut frame, &[b"EXEC"]);
        let skip = tx.queued.len() as u32 + 1;
        self.hold(Held {
            frame: frame.freeze(),
            skip,
            slot: tx.slot,
            resend: None,
            pubsub: None,
        });
    }

    fn watch(&mut self, req: Request, slot: Option<u16>) {
        let Some(slot) = slot else {
            return self.cell.push_ready(Bytes::from_static(CROSSSLOT));
        };
        if self.watch_slot.is_some_and(|s| s != slot) {
            return self.cell.push_ready(Bytes::from_static(CROSSSLOT));
        }
        self.watch_slot = Some(slot);
        self.hold(Held::single(req, Some(slot)));
    }

    /// Forget WATCHed keys: closing the dedicated connection drops them on the node.
    fn forget_watch(&mut self) {
        if self.watch_slot.take().is_some() {
            self.drop_dedicated();
        }
    }
}
