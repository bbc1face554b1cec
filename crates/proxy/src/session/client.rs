//! CLIENT LIST, INFO, KILL, NO-EVICT and SETINFO, over the per-worker registries
//! (`registry.rs`); ID, GETNAME and SETNAME stay in `local.rs`.
//!
//! A session registers at connect and publishes its per-request state (buffer sizes, flags,
//! last command) into relaxed atomics once per wake-up, so serving requests costs no lock.
//! CLIENT LIST from any worker reads every worker's registry; CLIENT KILL marks the victim
//! and wakes its task, which closes on its own thread as if the client had left (its
//! in-flight requests are dropped with its reply queue, as on any disconnect).
//!
//! Permissions follow the command table's ACL categories like every local command: LIST,
//! KILL and NO-EVICT are `@admin @dangerous`, so a user without them gets `-NOPERM`.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::admin::client_list::{self, Filter, Kind};
use crate::context::registry::{flag, ClientHandle, ClientView, Meta};
use crate::reply::error;
use crate::route::Local;
use crate::session::exclusive::Intake;
use crate::session::local;
use crate::session::Session;
use crate::tls::Stream;
use crate::worker::Worker;

const SYNTAX: &str = "syntax error";

/// Add a new client to its worker's registry: O(1), no allocation once the slab has grown.
pub(crate) async fn register(
    worker: &Worker,
    id: u64,
    addr: SocketAddr,
    stream: &Stream,
) -> ClientHandle {
    let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
    let registry = &worker.stats.registry;
    let fixed = match stream.is_tls() {
        // `proxy.listen` names the plain listener; a TLS client reached the other one.
        true => None,
        false => registry.listen_addr(&worker.shared.config.proxy.listen),
    };
    let laddr = match fixed {
        Some(fixed) => Some(fixed),
        // Bound to a wildcard: only the socket knows which address the client reached.
        None => stream.tcp().local_addr().ok(),
    };
    registry.insert(Meta {
        id,
        addr,
        laddr,
        fd: stream.tcp().as_raw_fd(),
        created_ms: 0,
        name: None,
        lib_name: None,
        lib_ver: None,
        waker,
    })
}

// === impl Session (CLIENT) ===

impl Session {
    /// CLIENT <subcommand>: the registry-backed ones here, the rest in `local.rs`.
    pub(crate) fn client_command(&mut self, req: &Request) -> Bytes {
        let sub = req.arg(1).to_ascii_lowercase();
        match sub.as_slice() {
            b"list" => self.client_list(req),
            b"info" => self.client_info(),
            b"kill" => self.client_kill(req),
            b"no-evict" => self.client_no_evict(req),
            b"setinfo" => self.client_setinfo(req),
            _ => {
                let shared = self.worker.shared.clone();
                let reply = local::run(Local::Client, req, &mut self.info, &shared);
                self.sync_name();
                reply
            }
        }
    }

    /// Copy the session's name into its registry entry (after SETNAME, HELLO, RESET).
    pub(crate) fn sync_name(&self) {
        let name = self.info.name.clone();
        self.client.update(|meta| meta.name = name);
    }

    /// RESET: the name is gone and NO-EVICT is off again, as in Redis.
    pub(crate) fn registry_reset(&self) {
        self.sync_name();
        self.client.live.no_evict.store(false, Relaxed);
        self.cell.no_evict.set(false);
    }

    /// Publish what CLIENT LIST shows: a few relaxed stores, once per wake-up.
    pub(crate) fn publish_state(&self) {
        let live = &self.client.live;
        live.qbuf.store(self.read_buf.len() as u64, Relaxed);
        live.rbs.store(self.read_buf.capacity() as u64, Relaxed);
        let omem = self.out_bytes + self.cell.queued_bytes();
        live.omem.store(omem as u64, Relaxed);
        live.oll.store(self.out.len() as u64, Relaxed);
        let bit = |on: bool, f: u32| if on { f } else { 0 };
        let flags = bit(self.pubsub.is_some(), flag::PUBSUB)
            | bit(self.tx.is_some(), flag::MULTI)
            | bit(matches!(self.intake, Intake::Blocked), flag::BLOCKED)
            | bit(!self.out.is_empty(), flag::WRITABLE);
        live.flags.store(flags, Relaxed);
        let (sub, ssub) = self.pubsub.as_ref().map_or((0, 0), |p| p.counts());
        live.sub.store(sub, Relaxed);
        live.ssub.store(ssub, Relaxed);
        let multi = self.tx.as_ref().map_or(0, |tx| tx.len() as u32 + 1);
        live.multi.store(multi, Relaxed);
        live.user
            .store(self.login.user().map_or(0, |u| u as u32 + 1), Relaxed);
        live.resp.store(u32::from(self.info.protocol), Relaxed);
        live.db.store(u32::from(self.info.db), Relaxed);
    }

    /// `CLIENT LIST [TYPE type] [ID id …]`.
    fn client_list(&mut self, req: &Request) -> Bytes {
        let filter = match client_list::parse_list(req) {
            Ok(filter) => filter,
            Err(reply) => return reply,
        };
        let views = self.all_clients();
        let shown: Vec<&ClientView> = match &filter.ids {
            // By hash: a client may name many ids, and there may be many clients (S10).
            Some(ids) => {
                let by_id: std::collections::HashMap<u64, &ClientView> =
                    views.iter().map(|v| (v.meta.id, v)).collect();
                ids.iter().filter_map(|id| by_id.get(id).copied()).collect()
            }
            None => views.iter().filter(|v| filter.matches(v, self)).collect(),
        };
        self.verbatim(&shown)
    }

    /// `CLIENT INFO`: this client's line.
    fn client_info(&mut self) -> Bytes {
        self.publish_state();
        let id = self.info.id;
        let views = self.all_clients();
        let me: Vec<&ClientView> = views.iter().filter(|v| v.meta.id == id).collect();
        self.verbatim(&me)
    }

    /// `CLIENT KILL addr` (old form: `+OK` or an error) or `CLIENT KILL <filter> <value> …`
    /// (new form: the number killed). Redis's option parsing, errors and SKIPME default.
    fn client_kill(&mut self, req: &Request) -> Bytes {
        let old_form = req.argc() == 3;
        let filter = match client_list::parse_kill(req, &self.worker.live().users) {
            Ok(filter) => filter,
            Err(reply) => return reply,
        };
        let mut killed = 0;
        for view in self.all_clients() {
            if !filter.matches(&view, self) {
                continue;
            }
            if view.meta.id == self.info.id {
                if filter.skip_me {
                    continue;
                }
                // Killing yourself: this reply is written, then the connection closes.
                self.info.quit = true;
                killed += 1;
            } else if self.kill_elsewhere(view.meta.id) {
                killed += 1;
            }
        }
        match (old_form, killed) {
            (true, 0) => error("No such client"),
            (true, _) => Bytes::from_static(b"+OK\r\n"),
            (false, n) => Bytes::from(format!(":{n}\r\n")),
        }
    }

    fn kill_elsewhere(&self, id: u64) -> bool {
        let workers = &self.worker.shared.workers;
        workers.iter().any(|w| w.registry.kill(id))
    }

    /// `CLIENT NO-EVICT on|off`: shown as flag `e`; the memory budget never evicts the client.
    fn client_no_evict(&mut self, req: &Request) -> Bytes {
        let on = match req.arg(2).to_ascii_lowercase().as_slice() {
            b"on" => true,
            b"off" => false,
            _ => return error(SYNTAX),
        };
        self.client.live.no_evict.store(on, Relaxed);
        self.cell.no_evict.set(on);
        Bytes::from_static(b"+OK\r\n")
    }

    /// `CLIENT SETINFO LIB-NAME|LIB-VER value` (Redis 7.2; redis-py 5 sends it on connect).
    fn client_setinfo(&mut self, req: &Request) -> Bytes {
        if req.argc() != 4 {
            return error("wrong number of arguments for 'client|setinfo' command");
        }
        let attr = req.arg(2).to_ascii_lowercase();
        let value = req.arg_bytes(3);
        let lib_name = match attr.as_slice() {
            b"lib-name" => true,
            b"lib-ver" => false,
            _ => {
                let attr = String::from_utf8_lossy(req.arg(2));
                return error(&format!("Unrecognized option '{attr}'"));
            }
        };
        if !value.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
            let attr = String::from_utf8_lossy(&attr);
            return error(&format!(
                "{attr} cannot contain spaces, newlines or special characters."
            ));
        }
        let value = (!value.is_empty()).then_some(value);
        self.client.update(|meta| match lib_name {
            true => meta.lib_name = value,
            false => meta.lib_ver = value,
        });
        Bytes::from_static(b"+OK\r\n")
    }

    /// Every worker's clients, this one's state published first.
    fn all_clients(&self) -> Vec<ClientView> {
        self.publish_state();
        let mut views = Vec::new();
        for w in &self.worker.shared.workers {
            w.registry.snapshot(&mut views);
        }
        views
    }

    /// CLIENT LIST and INFO reply with a verbatim string under RESP3, as Redis does.
    ///
    /// Written straight into the reply's one buffer, sized beforehand: names may be
    /// megabytes each (Redis does not bound them), and a text then copied into a frame
    /// would hold each listing three times over while it is built.
    fn verbatim(&self, views: &[&ClientView]) -> Bytes {
        const HEAD: usize = 32;
        let room: usize = views.iter().map(|v| client_list::line_room(v)).sum();
        let mut out = BytesMut::with_capacity(HEAD + room + 2);
        out.resize(HEAD, 0);
        let users = &self.worker.live().users;
        for view in views {
            client_list::write_line(view, users, &mut out);
        }
        let len = out.len() - HEAD;
        let head = match self.resp3() {
            true => format!("={}\r\ntxt:", len + 4),
            false => format!("${len}\r\n"),
        };
        let start = HEAD - head.len();
        out[start..HEAD].copy_from_slice(head.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.split_off(start).freeze()
    }
}

// === impl Filter ===

impl Filter {
    /// Does `view` pass every filter given (ID, ADDR, LADDR, USER, TYPE)?
    fn matches(&self, view: &ClientView, me: &Session) -> bool {
        let live = &view.live;
        let user = live.user.load(Relaxed) as usize;
        let pubsub = live.flags.load(Relaxed) & flag::PUBSUB != 0;
        let kind_ok = match self.kind {
            None => true,
            Some(Kind::Normal) => !pubsub,
            Some(Kind::PubSub) => pubsub,
            Some(Kind::Replication) => false,
        };
        let user_ok = self.user.as_ref().is_none_or(|want| {
            client_list::user_name(&me.worker.live().users, user) == want.as_str()
        });
        kind_ok
            && user_ok
            && self.id.is_none_or(|id| id == view.meta.id)
            && self
                .addr
                .as_ref()
                .is_none_or(|a| *a == view.meta.addr.to_string())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| view.meta.laddr.is_some_and(|l| *a == l.to_string()))
    }
}
