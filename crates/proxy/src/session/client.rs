//! The client as every feature of the session sees it: its worker, its reply queue, who it
//! is and what it has done. Features (pub/sub, transactions, tracking, uploads, the send
//! step) take `&mut Client` and their own state, never the whole `Session`, so each reads in
//! one file and none depends on another's fields.

use std::rc::Rc;

use bytes::Bytes;

use crate::backend::{Backend, Wire};
use crate::context::registry::ClientHandle;
use crate::context::WorkerStats;
use crate::session::local::{Protocol, SessionInfo};
use crate::session::login::Login;
use crate::session::queue::{Called, ClientCell, Entry};
use crate::session::slowlog::Tracker;
use crate::session::wait::Written;
use crate::worker::{Worker, READS};

pub(crate) struct Client {
    pub(crate) worker: Rc<Worker>,
    /// The reply queue: every request's entry, in request order.
    pub(crate) cell: Rc<ClientCell>,
    /// Name, protocol, database, QUIT: what CLIENT and HELLO set (`local.rs`).
    pub(crate) info: SessionInfo,
    /// Who the client is (`login.rs`).
    pub(crate) login: Login,
    /// This client's entry in the worker's registry (CLIENT LIST/KILL); dropped on close.
    pub(crate) handle: ClientHandle,
    /// SLOWLOG stamps and marks (`slowlog.rs`).
    pub(crate) slowlog: Tracker,
    /// The masters written to since connect or the last WAIT (`wait.rs`).
    pub(crate) written: Written,
    /// Redirected replies taken from the queue, reused between turns (`redirect.rs`).
    pub(crate) redirected: Vec<(u64, u32)>,
    /// This client's own connection, for blocking commands and transactions.
    pub(crate) dedicated: Option<Rc<Backend>>,
}

impl Client {
    /// Whether this client speaks RESP3 (HELLO 3): its requests go to RESP3 connections.
    pub(crate) fn resp3(&self) -> bool {
        self.info.protocol == Protocol::Resp3
    }

    /// The protocol and database of the connections its requests go to.
    pub(crate) fn wire(&self) -> Wire {
        Wire {
            resp3: self.resp3(),
            db: self.info.db,
            no_touch: self.info.no_touch,
            import_source: self.info.import_source,
            tracker: self.info.tracker,
        }
    }

    /// Queue a reply the proxy made itself, in order behind everything before it.
    pub(crate) fn reply_now(&self, reply: Bytes) {
        self.cell.push(Entry::ready(reply));
    }

    /// The client's dedicated connection to `addr`, opening it (and closing one to another
    /// node) as needed.
    pub(crate) fn dedicated_for(&mut self, addr: &str) -> Rc<Backend> {
        let wire = self.wire();
        if wire.tracker != 0 && wire.tracker != READS {
            // A NOLOOP tracking client's connections are all its own already, and must stay
            // open while it tracks (`tracking/own.rs`): kept in the worker's pool for it.
            return self.worker.backend_for_addr(addr, wire);
        }
        if let Some(d) = &self.dedicated {
            if &*d.addr == addr && d.wire() == wire {
                return d.clone();
            }
            d.close();
        }
        let acting = self.login.acting_setup(&self.worker.live());
        let backend = self.new_backend_as(addr, wire, acting);
        self.dedicated = Some(backend.clone());
        backend
    }

    /// A connection of this client's own (`Worker::new_backend_as`). In the default mode of
    /// tracking the node tracks what it reads there: its break or close flushes the
    /// client's cache (`tracking/own.rs`).
    pub(crate) fn new_backend_as(
        &self,
        addr: &str,
        wire: Wire,
        acting: Option<Bytes>,
    ) -> Rc<Backend> {
        let backend = self.worker.new_backend_as(addr, wire, acting);
        if wire.tracker == READS {
            backend.report_to(crate::session::follow::flush_sink(&self.cell), true);
        }
        backend
    }

    /// Make `conn` the dedicated connection (closing another): one a transaction held its
    /// MULTI on, now that EXEC goes there.
    pub(crate) fn use_dedicated(&mut self, conn: Rc<Backend>) {
        if conn.wire().tracker != 0 && conn.wire().tracker != READS {
            // Its own pool keeps it (`dedicated_for`).
            return self.drop_dedicated();
        }
        if let Some(old) = self.dedicated.replace(conn.clone()) {
            if !Rc::ptr_eq(&old, &conn) {
                old.close();
            }
        }
    }

    /// Close the dedicated connection (session end, RESET).
    pub(crate) fn drop_dedicated(&mut self) {
        if let Some(d) = self.dedicated.take() {
            d.close();
        }
    }

    /// Count the call, and time one request in `SAMPLE_EVERY` (the entry it pushes).
    /// Count the command; true when it is one of the sampled ones (one in `SAMPLE_EVERY`).
    pub(crate) fn count_command(&self, command: Option<usize>, sub: u16, refused: bool) -> bool {
        let Some(command) = command else {
            self.cell.arm_command(None);
            self.cell.arm_sample(None);
            return false;
        };
        self.handle.note_command(command, sub);
        // Counted as Redis counts it: a subcommand on its own (`client|id`), never the
        // container (a container's lookup only: a GET passes `sub == 0`).
        let command = match sub {
            0 => command,
            _ => cluster::command::sub_stats::stats_slot(command, sub),
        };
        self.cell.arm_command(Some(Called {
            command: command as u16,
            refused,
        }));
        let stats = &self.worker.stats;
        if !refused {
            // As Redis: a call refused before it ran is a rejected call, not a call.
            stats.commands.call(command);
        }
        let tick = stats.sample_tick.load(std::sync::atomic::Ordering::Relaxed);
        WorkerStats::bump(&stats.sample_tick);
        let sampled = tick.is_multiple_of(u64::from(crate::context::cmdstats::SAMPLE_EVERY));
        self.cell
            .arm_sample(sampled.then(|| (command as u16, tokio::time::Instant::now())));
        sampled
    }

    /// A sampled request's first key on this worker's hot-key board, when `[hotkeys]` is on.
    pub(crate) fn note_hot_key(&self, req: &resp::Request) {
        let live = self.worker.live();
        let cfg = &live.config.hotkeys;
        if !cfg.enabled {
            return;
        }
        let Some(spec) = cluster::lookup(req.arg(0)) else {
            return;
        };
        let spec = spec.resolve(req.argc(), |i: usize| req.arg(i));
        let Some(first) = spec
            .key_positions(req.argc(), |i: usize| req.arg(i))
            .ok()
            .and_then(|keys| keys.iter().next())
        else {
            return;
        };
        let write = spec.has(cluster::flags::WRITE);
        let stats = &self.worker.stats;
        let now = stats.registry.now_ms();
        let window = cfg.window_seconds * 1000;
        let mut board = stats.hotkeys.lock().unwrap_or_else(|p| p.into_inner());
        board.offer(req.arg(first), write, now, window);
        drop(board);
        // A refcounted slice of the request, not a copy: its reply's size and time are
        // charged to it when the reply leaves (`Session::record_samples`).
        let key = req.arg_bytes(first);
        let cut = key.len().min(crate::context::hotkeys::MAX_KEY);
        self.cell.arm_key(crate::session::queue::SampleKey {
            key: key.slice(..cut),
            write,
            request_bytes: u32::try_from(req.raw().len()).unwrap_or(u32::MAX),
        });
    }

    /// Sampled requests answered (`key` set only when `[hotkeys]` noted their key): their
    /// time and bytes charged to the key, their reply offered to the big keys.
    pub(crate) fn note_answered(&self, finished: &[crate::session::queue::Finished]) {
        use crate::context::hotkeys::Answered;
        if finished.iter().all(|f| f.key.is_none()) {
            return;
        }
        let live = self.worker.live();
        let cfg = &live.config.hotkeys;
        if !cfg.enabled {
            return;
        }
        let stats = &self.worker.stats;
        let now = stats.registry.now_ms();
        let window = cfg.window_seconds * 1000;
        let done = tokio::time::Instant::now();
        let mut board = stats.hotkeys.lock().unwrap_or_else(|p| p.into_inner());
        for f in finished {
            let Some(key) = &f.key else {
                continue;
            };
            let answered = Answered {
                key: &key.key,
                write: key.write,
                command: f.command,
                request_bytes: u64::from(key.request_bytes),
                reply_bytes: f.reply_bytes as u64,
                time_ns: done.duration_since(f.started).as_nanos() as u64,
            };
            board.answered(answered, now, window);
        }
    }
}
