//! MULTI/EXEC/DISCARD/WATCH/UNWATCH through the proxy.
//!
//! Commands after MULTI are checked and kept here. A transaction is pinned to one slot
//! (that of WATCH or of its first key): a key of another slot gets CROSSSLOT and the
//! transaction is discarded at EXEC (`-EXECABORT`), as is any command Redis would refuse at
//! queue time.
//!
//! Once its slot is known, the transaction lives on the node (`cluster.live_multi`, `Live`):
//! MULTI and what was kept go to the slot's master on a connection of the session's own
//! (the WATCH's, if one holds), and every later command as it comes, so the node answers
//! each `+QUEUED` or refuses it at queue time on its own state (out of memory, a failed
//! save, too few replicas, a script running) and checks EXEC at EXEC time, exactly as one
//! Redis does; EXEC then goes alone. A redirect at queue time is kept for EXEC
//! (`backend/refusal.rs`) and the client told `+QUEUED`: the transaction is resent whole
//! to the new owner. A transaction ended otherwise (DISCARD, a refusal of the proxy's)
//! closes that connection once what was queued is answered (`Held::Discard`).
//!
//! Before its slot is known, and with `live_multi` off, commands are answered `+QUEUED`
//! here and sent at EXEC as one write: `MULTI, cmd…, EXEC`, the node's `+OK`/`+QUEUED`
//! dropped; the node's queue-time refusals then come at EXEC (EXECABORT, nothing runs). If
//! the slot moved meanwhile, the node refuses the queued commands and EXEC answers
//! EXECABORT: nothing was applied, and the client is told so.
//!
//! WATCH runs on a connection of its own (`Watch`), which EXEC then uses. A WATCH can be
//! lost without the node saying so: its connection broke and was redialled, the slot moved
//! to another node, or the client switched protocol (HELLO) so EXEC cannot use it. EXEC then
//! answers nil, as Redis does when a watched key was touched: nothing runs unwatched, and
//! every client library already retries an optimistic transaction on nil.
//!
//! A command that no node can run inside the node's transaction (one for every master, as
//! SCRIPT FLUSH or FLUSHALL, or one the proxy answers, as SLOWLOG RESET or CLIENT PAUSE) is
//! queued too, as Redis queues it. Such a transaction cannot run as one unit on one node, so
//! it may hold at most one command for a node, and no WATCH and no blocking command: then
//! atomicity is not lost, as one command is atomic anyway. At EXEC its commands are
//! dispatched again in their order (`Replay`, before anything the client sent after EXEC),
//! and their replies written as EXEC's array: a header entry and one entry per command,
//! with no pushed frame between them (`ClientCell::push_group`). A command for every master
//! runs there inside a transaction of its own (`fanout::Part::in_multi`): FLUSHALL, for
//! one, frees at once inside a transaction and in the background outside one.
//!
//! CLIENT PAUSE and UNPAUSE, well formed, are no such command: the proxy applies them at
//! EXEC (Redis starts a pause queued in a transaction once the transaction ran), and the
//! node's transaction holds `UNWATCH` in their place, a no-op there whose reply is theirs
//! (`+OK`), so a transaction of writes and a pause runs as one unit.
//!
//! A transaction of (un)subscribe commands, PINGs and ECHOs runs on the client's
//! subscription bus instead (`ClientPubSub::exec_on_bus`): the node there answers EXEC with
//! the confirmations in its array, and subscribed mode changes with EXEC, as in Redis.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::backend::Backend;
use crate::budget::Budget;
use crate::reply::error;
use crate::route::{Local, PubSubTarget, Route, TxCommand};
use crate::session::client::Client;
use crate::session::client_command::{self, PauseChange};
use crate::session::held::{Exclusive, Held, OnNode, Via};
use crate::session::queue::{Conn, Entry, Resend, Sent};

/// A MULTI in progress.
#[derive(Default)]
pub(crate) struct Transaction {
    queued: Vec<Request>,
    /// Bytes queued: bounded by `limits.max_query_buffer_bytes`, as the query buffer is.
    bytes: usize,
    /// The worker's memory budget, charged `bytes` while they are held (released on drop:
    /// EXEC, DISCARD, RESET or the client's end, whichever comes).
    budget: Option<Rc<Budget>>,
    slot: Option<u16>,
    aborted: bool,
    /// Commands queued for a node (keyed or keyless), and whether one of them blocks.
    for_node: u32,
    blocking: bool,
    /// Commands queued that run beside the node's transaction (`runs_beside`).
    beside: u32,
    /// (Un)subscribe commands queued: the transaction runs on the subscription bus
    /// (module doc).
    bus: u32,
    /// CLIENT PAUSE/UNPAUSE queued with the node's commands: applied at EXEC (module doc).
    pauses: Vec<PauseChange>,
    /// The node's side, once the transaction lives there (module doc).
    live: Option<Live>,
}

/// A transaction held on its node: the connection with its MULTI, and whether that is the
/// WATCH's (then the WATCH owns it) or one of the transaction's own (closed with it).
struct Live {
    on: OnNode,
    watched: bool,
}

impl Transaction {
    /// Bytes queued, part of the client's size for the memory budget.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// A command was refused at queue time: EXEC answers EXECABORT and runs nothing.
    pub(crate) fn abort(&mut self) {
        self.aborted = true;
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.release(self.bytes);
        }
        // The client left or reset: the node drops the transaction with its connection.
        if let Some(live) = self.live.take().filter(|l| !l.watched) {
            live.on.conn.close();
        }
    }
}

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
pub(crate) const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
pub(crate) const EXECABORT: &[u8] =
    b"-EXECABORT Transaction discarded because of previous errors.\r\n";

const CROSSSLOT: &[u8] = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n";

/// Queue-time refusal of a transaction that would mix commands the proxy cannot run as
/// one unit (module doc).
const MIXED: &str = "slotgate: inside MULTI, a command for every master or for the proxy may only \
                     share its transaction with one other command, and not with WATCH or a \
                     blocking command";

/// Queue-time refusal of a transaction that would mix (un)subscribe commands with anything
/// but PING and ECHO: it runs on the subscription connection, where nothing else can.
const BUS_MIXED: &str = "slotgate: inside MULTI, SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE and \
                         PUNSUBSCRIBE may only share their transaction with each other, PING \
                         and ECHO, and not with WATCH";

/// Whether `route`, inside MULTI, runs beside the node's transaction at EXEC instead of
/// in it: commands for every master and commands the proxy answers that neither change
/// the connection's mode nor wait for anything but their own reply.
fn runs_beside(route: &Route, req: &Request) -> bool {
    match route {
        Route::Broadcast(_) | Route::Scan => true,
        Route::Local(Local::Client) => {
            let sub = req.argc() > 1;
            !(sub
                && [&b"tracking"[..], b"caching", b"reply"]
                    .iter()
                    .any(|s| req.arg(1).eq_ignore_ascii_case(s)))
        }
        Route::Local(local) => matches!(
            local,
            Local::Slowlog
                | Local::Auth
                | Local::Info
                | Local::Acl
                | Local::AclUsers
                | Local::ClusterKeyslot
                | Local::ClusterSlots
                | Local::ClusterShards
                | Local::ClusterNodes
                | Local::ClusterInfo
                | Local::ClusterMyid
                | Local::ClusterMyShardId
        ),
        _ => false,
    }
}

/// A transaction that holds commands run beside the node's, at EXEC: its commands, each
/// dispatched again in turn (module doc).
pub(crate) struct Replay {
    requests: std::vec::IntoIter<Request>,
    /// The transaction, emptied: its charge to the memory budget lasts until the last
    /// command was dispatched.
    _charge: Transaction,
}

/// A WATCH in force.
pub(crate) struct Watch {
    /// The slot of the watched keys: every later WATCH and the transaction must use it.
    pub slot: u16,
    /// The connection that carries the WATCH, once it ran.
    conn: Option<Rc<Backend>>,
    /// `conn.breaks()` when it was opened: a change means the node forgot the WATCH.
    breaks: u32,
    /// Known lost (a later WATCH of the same slot had to go to another node).
    lost: bool,
    /// The keys watched, by hash (CLIENT LIST's `watch=`): at most `MAX_WATCH_COUNTED`,
    /// charged to the worker's memory budget (`WATCHED_KEY_BYTES` each) while held.
    keys: std::collections::HashSet<u64>,
    budget: Rc<Budget>,
    charged: usize,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.budget.release(self.charged);
    }
}

/// Watched keys counted one by one; past this, CLIENT LIST shows this many. A client may
/// WATCH keys without end, as Redis lets it (its suite watches 50,000); their count costs
/// it memory, charged to the budget, up to this bound.
const MAX_WATCH_COUNTED: usize = 1 << 20;

/// What one counted key costs in the set, about: its hash and the table's share.
const WATCHED_KEY_BYTES: usize = 16;

impl Transaction {
    /// Commands queued so far (CLIENT LIST's `multi=`).
    pub(crate) fn len(&self) -> usize {
        self.queued.len()
    }
}

impl Transactions {
    /// The queued commands, in order (an empty list outside MULTI).
    pub(crate) fn queued(&self) -> &[Request] {
        self.open.as_ref().map_or(&[], |tx| &tx.queued)
    }

    /// The frames of the commands an EXEC now would run, one after the other, for
    /// SLOWLOG; None outside MULTI or when EXEC would abort. A copy, made only when the
    /// slow log is on.
    pub(crate) fn queued_frames(&self) -> Option<Bytes> {
        let tx = self.open.as_ref().filter(|tx| !tx.aborted)?;
        let mut frames = BytesMut::with_capacity(tx.bytes);
        for req in &tx.queued {
            frames.extend_from_slice(req.raw());
        }
        Some(frames.freeze())
    }
}

/// The client's transaction state: the MULTI in progress and the WATCH in force, each
/// None until used.
#[derive(Default)]
pub(crate) struct Transactions {
    /// MULTI in progress.
    pub(crate) open: Option<Transaction>,
    /// The WATCH in force, if any, and the connection that carries it.
    pub(crate) watch: Option<Watch>,
    /// An EXEC's commands still to dispatch, before anything read after it.
    replay: Option<Replay>,
}

/// EXEC's reply when a watched key was (or may have been) touched.
pub(crate) fn exec_aborted(client: &Client) -> Bytes {
    match client.resp3() {
        true => Bytes::from_static(b"_\r\n"),
        false => Bytes::from_static(b"*-1\r\n"),
    }
}

impl Transactions {
    /// MULTI, EXEC, DISCARD, WATCH or UNWATCH. `slot` is WATCH's keys' slot.
    /// Returns the request to hold when one must run alone (EXEC, WATCH).
    pub(crate) fn command(
        &mut self,
        client: &Client,
        cmd: TxCommand,
        req: Request,
        slot: Option<u16>,
    ) -> Option<Held> {
        let reply: &'static [u8] = match (cmd, self.open.is_some()) {
            (TxCommand::Multi | TxCommand::Watch, true) => {
                let name = if cmd == TxCommand::Multi {
                    "multi"
                } else {
                    "watch"
                };
                let id = client.worker.shared.identity.current();
                if id.inside_multi_aborts() {
                    if let Some(tx) = self.open.as_mut() {
                        tx.abort();
                    }
                }
                let text = id.inside_multi_error(name);
                client.cell.push(Entry::ready(Bytes::from(text)));
                return None;
            }
            (TxCommand::Multi, false) => {
                let mut tx = Transaction::default();
                tx.slot = self.watch.as_ref().map(|w| w.slot);
                self.open = Some(tx);
                b"+OK\r\n"
            }
            (TxCommand::Exec, false) => b"-ERR EXEC without MULTI\r\n",
            (TxCommand::Exec, true) => return self.exec(client),
            (TxCommand::Discard, false) => b"-ERR DISCARD without MULTI\r\n",
            (TxCommand::Discard, true) => {
                if let Some(held) = self.end_live(b"+OK\r\n") {
                    return Some(held);
                }
                self.open = None;
                self.forget_watch();
                b"+OK\r\n"
            }
            (TxCommand::Watch, false) => return self.watch_command(client, req, slot),
            (TxCommand::Unwatch, _) => {
                self.forget_watch();
                b"+OK\r\n"
            }
        };
        client.cell.push(Entry::ready(Bytes::from_static(reply)));
        None
    }

    /// A command between MULTI and EXEC: check it as the node would, then queue it.
    pub(crate) fn queue(&mut self, client: &mut Client, req: Request, route: Route) {
        let limit = client.worker.live().config.limits.max_query_buffer_bytes;
        let Some(tx) = self.open.as_mut() else { return };
        if tx.bytes + req.raw().len() > limit {
            // Held until EXEC, the queue would otherwise grow without bound.
            tx.aborted = true;
            let err = error("slotgate: transaction larger than limits.max_query_buffer_bytes");
            return client.cell.push_ready(err);
        }
        // CLIENT PAUSE/UNPAUSE with the node's commands: a placeholder there (module doc).
        let pause = match (&route, tx.beside) {
            (Route::Local(Local::Client), 0) => client_command::pause_change(&req),
            _ => None,
        };
        let beside = runs_beside(&route, &req) && pause.is_none();
        let watching = self.watch.is_some();
        let no_multi = cluster::lookup(req.arg(0))
            .map(|spec| spec.resolve(req.argc(), |i| req.arg(i)))
            .filter(|spec| spec.has(cluster::command::flags::NO_MULTI));
        let for_bus = route == Route::PubSub(PubSubTarget::Bus)
            && crate::route::keyspace::notification_part(&req).is_none();
        let reply = match route {
            Route::Refuse(err) => Some(err),
            // As the servers refuse it, before anything else is checked.
            _ if no_multi.is_some() => {
                let name = no_multi.map_or("", |spec| spec.name);
                let id = client.worker.shared.identity.current();
                Some(Bytes::from(id.no_multi_error(name)))
            }
            _ if for_bus => {
                tx.bus += 1;
                (watching || tx.for_node > 0 || tx.beside > 0).then(|| error(BUS_MIXED))
            }
            Route::Local(Local::Ping | Local::Echo) => None,
            _ if tx.bus > 0 => Some(error(BUS_MIXED)),
            _ if pause.is_some() => {
                tx.for_node += 1;
                None
            }
            _ if beside => {
                tx.beside += 1;
                (watching || tx.blocking || tx.for_node > 1).then(|| error(MIXED))
            }
            // A blocking command inside MULTI does not block (Redis runs it with no wait),
            // so it travels with the transaction like any keyed command.
            Route::Slot(slot) | Route::Read(slot) | Route::Exclusive(Some(slot))
                if tx.slot.is_some_and(|s| s != slot) =>
            {
                Some(Bytes::from_static(CROSSSLOT))
            }
            Route::Slot(_) | Route::Read(_) | Route::Exclusive(Some(_)) | Route::AnyNode => {
                if let Route::Slot(slot) | Route::Read(slot) | Route::Exclusive(Some(slot)) = route
                {
                    tx.slot = Some(slot);
                }
                tx.for_node += 1;
                tx.blocking |= matches!(route, Route::Exclusive(_));
                let mixed = tx.beside > 0 && (tx.for_node > 1 || tx.blocking);
                mixed.then(|| error(MIXED))
            }
            Route::Local(Local::ClusterFlag | Local::ReadOnly(_)) => None,
            Route::Split(_) => Some(Bytes::from_static(CROSSSLOT)),
            _ => Some(error(
                "slotgate: this command cannot be used inside MULTI through the proxy",
            )),
        };
        match reply {
            Some(err) => {
                tx.aborted = true;
                client.cell.push(Entry::ready(err));
            }
            None => {
                let req = match pause {
                    Some(change) => {
                        tx.pauses.push(change);
                        Request::from_args(&[b"UNWATCH"])
                    }
                    None => req,
                };
                tx.bytes += req.raw().len();
                let budget = tx
                    .budget
                    .get_or_insert_with(|| client.worker.budget.clone());
                budget.add(req.raw().len());
                let mut frame = req.raw().clone();
                let mut skip = 0;
                if tx.live.is_none() && !beside && tx.beside == 0 {
                    tx.live = go_live(tx, self.watch.as_ref(), client);
                    if tx.live.is_some() {
                        // MULTI and what was kept go first, in the same write.
                        let mut first = BytesMut::from(MULTI);
                        for kept in &tx.queued {
                            first.extend_from_slice(kept.raw());
                        }
                        first.extend_from_slice(&frame);
                        frame = first.freeze();
                        skip = 1 + tx.queued.len() as u32;
                    }
                }
                match (&tx.live, beside) {
                    (Some(live), false) => queue_on_node(client, &live.on, frame, skip),
                    _ => client.cell.push_ready(Bytes::from_static(b"+QUEUED\r\n")),
                }
                tx.queued.push(req);
            }
        }
    }

    /// The transaction leaves the node without EXEC: what the session holds until the
    /// commands queued there are answered, then closes their connection and answers `reply`.
    fn end_live(&mut self, reply: &'static [u8]) -> Option<Held> {
        let live = self.open.as_mut()?.live.take()?;
        self.open = None;
        if live.watched {
            // The connection is the WATCH's: it closes with the transaction (DISCARD and a
            // discarded EXEC unwatch).
            self.watch = None;
        } else {
            self.forget_watch();
        }
        Some(Held::Discard {
            conn: live.on.conn,
            reply: Some(reply),
        })
    }

    fn exec(&mut self, client: &Client) -> Option<Held> {
        if self.open.as_ref()?.aborted {
            if let Some(held) = self.end_live(EXECABORT) {
                return Some(held);
            }
            self.open = None;
            self.forget_watch();
            client.cell.push_ready(Bytes::from_static(EXECABORT));
            return None;
        }
        let mut tx = self.open.take()?;
        let live = tx.live.take();
        // As Redis: a pause queued in a transaction starts once it ran; this EXEC, already
        // read, is not held by it.
        for change in tx.pauses.drain(..) {
            change.apply(&client.worker.shared);
        }
        if tx.bus > 0 {
            // Only (un)subscribes, PINGs and ECHOs: the subscription bus's node runs them
            // all, and answers EXEC with their confirmations inside its array.
            let mut frame = BytesMut::new();
            resp::encode_command(&mut frame, &[b"MULTI"]);
            for req in &tx.queued {
                frame.extend_from_slice(req.raw());
            }
            resp::encode_command(&mut frame, &[b"EXEC"]);
            self.forget_watch();
            return Some(Held::BusExec {
                frame: frame.freeze(),
                queued: tx.queued.len() as u32,
            });
        }
        if tx.beside > 0 {
            let requests = std::mem::take(&mut tx.queued);
            client.cell.push_group(requests.len() as u32);
            self.replay = Some(Replay {
                requests: requests.into_iter(),
                _charge: tx,
            });
            // Its one command for a node runs again in turn: the node's copy is dropped.
            return live.map(|live| Held::Discard {
                conn: live.on.conn,
                reply: None,
            });
        }
        let mut frame = BytesMut::new();
        resp::encode_command(&mut frame, &[b"MULTI"]);
        for req in &tx.queued {
            frame.extend_from_slice(req.raw());
        }
        resp::encode_command(&mut frame, &[b"EXEC"]);
        let skip = tx.queued.len() as u32 + 1;
        let via = match self.watch {
            Some(_) => Via::WatchedExec,
            None => Via::Dedicated,
        };
        let frame = frame.freeze();
        let resend = Resend::Transaction {
            frame: frame.clone(),
            skip,
            watched: via == Via::WatchedExec,
        };
        Some(Held::Exclusive(Exclusive {
            frame,
            blocks: false,
            skip,
            slot: tx.slot,
            resend,
            via,
            on_node: live.map(|live| live.on),
        }))
    }

    fn watch_command(&mut self, client: &Client, req: Request, slot: Option<u16>) -> Option<Held> {
        let Some(slot) = slot else {
            client.cell.push_ready(Bytes::from_static(CROSSSLOT));
            return None;
        };
        match &self.watch {
            Some(w) if w.slot != slot => {
                client.cell.push_ready(Bytes::from_static(CROSSSLOT));
                return None;
            }
            Some(_) => {}
            None => {
                self.watch = Some(Watch {
                    slot,
                    conn: None,
                    breaks: 0,
                    lost: false,
                    keys: Default::default(),
                    budget: client.worker.budget.clone(),
                    charged: 0,
                })
            }
        }
        if let Some(w) = self.watch.as_mut() {
            for i in 1..req.argc() {
                if w.keys.len() >= MAX_WATCH_COUNTED {
                    break;
                }
                let mut h = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(req.arg(i), &mut h);
                w.keys.insert(std::hash::Hasher::finish(&h));
            }
            let charge = w.keys.capacity() * WATCHED_KEY_BYTES;
            w.budget.add(charge.saturating_sub(w.charged));
            w.budget.release(w.charged.saturating_sub(charge));
            w.charged = charge;
        }
        let mut ex = Exclusive::one(req, Some(slot), false);
        ex.via = Via::Watch;
        Some(Held::Exclusive(ex))
    }

    /// How many keys the WATCH in force watches.
    pub(crate) fn watched_keys(&self) -> u32 {
        self.watch.as_ref().map_or(0, |w| w.keys.len() as u32)
    }

    /// The next command of an EXEC being replayed (module doc), if any.
    pub(crate) fn next_replayed(&mut self) -> Option<Request> {
        let next = self.replay.as_mut()?.requests.next();
        if next.is_none() {
            self.replay = None;
        }
        next
    }

    /// An EXEC's commands wait to be dispatched.
    pub(crate) fn replaying(&self) -> bool {
        self.replay.is_some()
    }

    /// The connection for a WATCH to `addr`: the one already holding this session's WATCH,
    /// else the dedicated one if it leads there, else a new one.
    pub(crate) fn watch_connection(&mut self, client: &mut Client, addr: &str) -> Rc<Backend> {
        let wire = client.wire();
        let acting = client.login.acting_setup(&client.worker.live());
        let Some(w) = self.watch.as_mut() else {
            return client.dedicated_for(addr);
        };
        if let Some(conn) = &w.conn {
            if &*conn.addr == addr {
                // In another protocol or database since (HELLO, SELECT): `switch_first`
                // brings it to the client's, and neither unwatches.
                return conn.clone();
            }
            // The keys watched so far were watched on another node: that WATCH is gone.
            conn.close();
            w.lost = true;
        }
        let conn = match client.dedicated.take() {
            Some(d) if &*d.addr == addr && d.wire() == wire => d,
            other => {
                client.dedicated = other;
                client.new_backend_as(addr, wire, acting)
            }
        };
        conn.keep_state();
        w.breaks = conn.breaks();
        w.conn = Some(conn.clone());
        conn
    }

    /// The connection for EXEC after WATCH, if the WATCH still holds there; it becomes the
    /// dedicated connection (EXEC unwatches). None: the WATCH was lost, EXEC answers nil.
    pub(crate) fn watched_exec_connection(
        &mut self,
        client: &mut Client,
        addr: &str,
    ) -> Option<Rc<Backend>> {
        let mut w = self.watch.take()?;
        let conn = w.conn.take()?;
        let holds = !w.lost && &*conn.addr == addr && conn.breaks() == w.breaks;
        if !holds {
            conn.close();
            return None;
        }
        client.use_dedicated(conn.clone());
        Some(conn)
    }

    /// The WATCH can no longer be trusted: EXEC will answer nil. Its connection closes.
    pub(crate) fn lose_watch(&mut self) {
        if let Some(w) = self.watch.as_mut() {
            w.lost = true;
            if let Some(conn) = w.conn.take() {
                conn.close();
            }
        }
    }

    /// Forget WATCHed keys: closing their connection drops them on the node.
    pub(crate) fn forget_watch(&mut self) {
        if let Some(conn) = self.watch.take().and_then(|mut w| w.conn.take()) {
            conn.close();
        }
    }
}

/// A WATCH, or MULTI…EXEC after WATCH, for a WATCH connection opened in another
/// protocol, database or mode (the client switched with HELLO, SELECT, CLIENT NO-TOUCH or
/// CLIENT IMPORT-SOURCE since): those go first on it, so the reply comes in the client's
/// protocol, the commands run in its database and modes, and the WATCH holds (none of
/// them unwatches). Their replies are skipped (an IMPORT-SOURCE ON a node refuses because
/// its import-mode was turned off leaves the connection as it would leave Valkey's client:
/// without import-source semantics while import-mode is off).
pub(crate) fn switch_first(client: &Client, conn: &Backend, ex: &mut Exclusive) {
    let (now, want) = (conn.wire(), client.wire());
    if now == want {
        return;
    }
    let mut frame = BytesMut::new();
    if now.resp3 != want.resp3 {
        let proto: &[u8] = if want.resp3 { b"3" } else { b"2" };
        resp::encode_command(&mut frame, &[b"HELLO", proto]);
        ex.skip += 1;
    }
    if now.db != want.db {
        resp::encode_command(&mut frame, &[b"SELECT", want.db.to_string().as_bytes()]);
        ex.skip += 1;
    }
    if now.no_touch != want.no_touch {
        let mode: &[u8] = if want.no_touch { b"ON" } else { b"OFF" };
        resp::encode_command(&mut frame, &[b"CLIENT", b"NO-TOUCH", mode]);
        ex.skip += 1;
    }
    if now.import_source != want.import_source {
        let mode: &[u8] = if want.import_source { b"ON" } else { b"OFF" };
        resp::encode_command(&mut frame, &[b"CLIENT", b"IMPORT-SOURCE", mode]);
        ex.skip += 1;
    }
    frame.extend_from_slice(&ex.frame);
    ex.frame = frame.freeze();
    conn.switched(want);
}

/// Move the transaction onto its slot's master (module doc), if it may: its slot is known,
/// `cluster.live_multi` is on, and a WATCH, if any, still holds on a connection to that
/// master in the client's protocol and database.
fn go_live(tx: &Transaction, watch: Option<&Watch>, client: &mut Client) -> Option<Live> {
    let slot = tx.slot?;
    if !client.worker.live().config.cluster.live_multi {
        return None;
    }
    let map = client.worker.map();
    let addr = map.node_of(slot)?.addr.clone();
    let wire = client.wire();
    if let Some(w) = watch {
        let conn = w.conn.as_ref()?;
        let holds = !w.lost && *conn.addr == *addr && conn.breaks() == w.breaks;
        return (holds && conn.wire() == wire).then(|| Live {
            on: OnNode {
                conn: conn.clone(),
                breaks: w.breaks,
            },
            watched: true,
        });
    }
    let conn = match client.dedicated.take() {
        Some(d) if *d.addr == *addr && d.wire() == wire => d,
        other => {
            if let Some(d) = other {
                d.close();
            }
            let acting = client.login.acting_setup(&client.worker.live());
            client.new_backend_as(&addr, wire, acting)
        }
    };
    // Queued on a new connection after a break, a command would run outside the
    // transaction: it fails instead (`backend/task.rs`).
    conn.keep_state();
    let breaks = conn.breaks();
    Some(Live {
        on: OnNode { conn, breaks },
        watched: false,
    })
}

/// One command queued on the node holding the transaction, after `skip` others in `frame`
/// whose replies are dropped (MULTI and those kept before it went live): its entry gets the
/// node's `+QUEUED` or refusal (`Outgoing::queued`).
fn queue_on_node(client: &Client, on: &OnNode, frame: Bytes, skip: u32) {
    let sent = Sent::new(Resend::Never, &on.conn, None, Conn::Own);
    let seq = client.cell.push(Entry::sent(sent));
    let out = crate::backend::Outgoing {
        skip,
        queued: true,
        ..crate::backend::Outgoing::new(frame, client.cell.clone(), seq)
    };
    on.conn.send_with(out, crate::patience::Patience::Normal);
}
