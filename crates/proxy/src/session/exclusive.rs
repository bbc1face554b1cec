//! Requests that must wait for every earlier request of their client to be answered before
//! they run: blocking commands (BLPOP, XREAD BLOCK…), WATCH and EXEC on the session's own
//! connection, pub/sub commands, KEYS (read in two rounds), and the local commands that
//! change the connection's mode (QUIT, RESET, HELLO).
//!
//! ```text
//!   request that changes or needs the connection ─▶ Held until every earlier request is
//!        answered and every pub/sub command confirmed ─▶ run ─▶ no further request is read
//!        until it completes (Redis runs a client's commands one at a time too)
//! ```
//!
//! Holding keeps the client's order of execution, not only its order of replies: a request
//! pipelined before a BLPOP has been answered before the BLPOP is sent, and a RESET or QUIT
//! never overtakes a reply (or a subscribe confirmation) still on its way. A blocked client
//! never stalls the shared connections of its worker. The dedicated connection is kept for
//! the session's next exclusive request to the same node, and closed when the session ends:
//! the node sees the socket close, which releases a client blocked there. The connection
//! that carries a WATCH is kept apart (`transaction.rs`), so a blocking command to another
//! node cannot close it and lose the WATCH.

use bytes::Bytes;

use crate::backend::Outgoing;
use crate::session::held::{Exclusive, Held, Intake, Via};
use crate::session::queue::{Conn, Entry, Sent};
use crate::session::Session;

impl Session {
    /// Queue `held` to run alone once the requests before it are answered.
    pub(crate) fn hold(&mut self, held: Held) {
        self.intake = Intake::Held(held);
        self.release_held();
    }

    /// Whether every earlier request is answered and every pub/sub command confirmed.
    fn settled(&self) -> bool {
        self.client.cell.in_flight() == 0 && !self.pubsub.syncing()
    }

    /// Run the held request if nothing is in flight any more; also ends serial mode. True
    /// when a held request ran.
    pub(crate) fn release_held(&mut self) -> bool {
        if !self.settled() {
            return false;
        }
        let held = match std::mem::take(&mut self.intake) {
            Intake::Held(held) => held,
            // A waiting upload resumes from the parse loop; serial mode ends here.
            Intake::UploadWaiting => {
                self.intake = Intake::UploadWaiting;
                return false;
            }
            Intake::Open | Intake::Serial | Intake::Blocked => return false,
        };
        match held {
            Held::PubSub(frame, target) => self.pubsub.send(&self.client, frame, target),
            Held::Local(req, cmd) => self.run_mode_change(&req, cmd),
            Held::Exclusive(ex) => self.run_exclusive(ex),
            Held::Keys(req) => {
                crate::session::send::parts::keys_twice(&self.client, &req);
                self.intake = Intake::Serial;
            }
        }
        true
    }

    fn run_exclusive(&mut self, mut ex: Exclusive) {
        let map = self.client.worker.topology().current();
        let addr = match ex.slot {
            Some(slot) => map.node_of(slot).map(|n| n.addr.clone()),
            None => map.nodes().first().map(|n| n.addr.clone()),
        };
        let Some(addr) = addr else {
            self.client.cell.push(Entry::ready(Bytes::from_static(
                b"-CLUSTERDOWN Hash slot not served\r\n",
            )));
            return;
        };
        let backend = match ex.via {
            Via::Watch => {
                let conn = self.tx.watch_connection(&mut self.client, &addr);
                crate::session::transaction::switch_first(&self.client, &conn, &mut ex);
                conn
            }
            Via::Dedicated => self.client.dedicated_for(&addr),
            Via::WatchedExec => match self.tx.watched_exec_connection(&mut self.client, &addr) {
                Some(conn) => {
                    crate::session::transaction::switch_first(&self.client, &conn, &mut ex);
                    conn
                }
                None => {
                    let nil = crate::session::transaction::exec_aborted(&self.client);
                    self.client.cell.push(Entry::ready(nil));
                    return;
                }
            },
        };
        let mut sent = Sent::new(ex.resend, &backend, ex.slot, Conn::Own);
        sent.map_version = map.version();
        let seq = self.client.cell.push(Entry::sent(sent));
        let out = Outgoing {
            skip: ex.skip,
            ..Outgoing::new(ex.frame, self.client.cell.clone(), seq)
        };
        backend.send(out);
        self.intake = match ex.blocks {
            true => Intake::Blocked,
            false => Intake::Serial,
        };
    }

    /// True while an exclusive request waits or runs, a pub/sub command is not yet
    /// confirmed, or a streamed upload waits for the requests before it: no further request
    /// is read (it might depend on the mode they leave).
    pub(crate) fn exclusive_busy(&self) -> bool {
        let waiting = match self.intake {
            Intake::Open => false,
            Intake::Held(_) => true,
            Intake::Serial | Intake::Blocked | Intake::UploadWaiting => {
                self.client.cell.in_flight() > 0
            }
        };
        waiting || self.pubsub.syncing()
    }
}
