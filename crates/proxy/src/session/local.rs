//! Commands the proxy answers itself: connection state (PING, ECHO, QUIT, SELECT, HELLO,
//! CLIENT, AUTH, RESET) and questions whose answer is the proxy's, not a node's.
//!
//! Each reply copies Redis 7.0's wording, so clients that match on error text keep working.

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::context::Shared;
use crate::identity::ServerIdentity;
use crate::reply::error;
use crate::route::Local;

/// The protocol a client speaks, as HELLO sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    /// HELLO's `proto` field and CLIENT LIST's `resp=`.
    pub(crate) fn number(self) -> u8 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// What the proxy knows about one client connection.
#[derive(Debug)]
pub(crate) struct SessionInfo {
    pub id: u64,
    pub name: Option<Bytes>,
    /// As set by HELLO.
    pub protocol: Protocol,
    /// Set by QUIT: write the pending replies, then close.
    pub quit: bool,
    /// READONLY: reads may go to replicas (`config/read_policy.rs`); READWRITE clears it.
    pub readonly: bool,
    /// The database SELECT chose (always 0 unless the nodes have `cluster-databases`).
    pub db: u16,
    /// CLIENT NO-TOUCH ON: its requests go to connections in that mode (`Wire`).
    pub no_touch: bool,
    /// CLIENT IMPORT-SOURCE ON, once every master accepted it (`import_source.rs`): its
    /// requests go to connections in that mode (`Wire`).
    pub import_source: bool,
    /// CLIENT CAPA REDIRECT was sent (CLIENT LIST's `capa=r`).
    pub capa_redirect: bool,
    /// The connections CLIENT TRACKING moved its requests to, once ready (`Wire::tracker`,
    /// `tracking/own.rs`): its own (NOLOOP: its id), the worker's that the nodes track in
    /// the default mode (`READS`), or the shared ones (0).
    pub tracker: u64,
}

impl SessionInfo {
    pub(crate) fn new(id: u64) -> SessionInfo {
        SessionInfo {
            id,
            name: None,
            protocol: Protocol::Resp2,
            quit: false,
            readonly: false,
            db: 0,
            no_touch: false,
            import_source: false,
            capa_redirect: false,
            tracker: 0,
        }
    }
}

/// Answer a local command; `shared` holds what the whole proxy knows (counters, topology).
pub(crate) fn run(cmd: Local, req: &Request, session: &mut SessionInfo, shared: &Shared) -> Bytes {
    let mut out = BytesMut::new();
    match cmd {
        Local::Ping => ping(req, &mut out),
        Local::Echo => resp::write_bulk(&mut out, req.arg(1)),
        Local::Quit => {
            session.quit = true;
            resp::write_simple(&mut out, b"OK");
        }
        Local::Select => return select(req, session, &shared.identity.current()),
        // Both may change the connection's user, which is the session's (`session/auth.rs`);
        // only a caller that cannot do that gets here.
        Local::Hello | Local::Auth | Local::Acl | Local::AclUsers | Local::Monitor => {
            return error("slotgate: AUTH, HELLO and ACL cannot be used here")
        }
        Local::Client => return client(req, session),
        Local::Reset => {
            *session = SessionInfo::new(session.id);
            resp::write_simple(&mut out, b"RESET");
        }
        Local::Slowlog => return crate::admin::slowlog::command(req, shared),
        Local::Hotkeys => {
            let resp3 = session.protocol == Protocol::Resp3;
            return crate::admin::hotkeys::command(req, shared, resp3);
        }
        Local::ClusterFlag => resp::write_simple(&mut out, b"OK"),
        Local::ReadOnly(on) => {
            session.readonly = on;
            resp::write_simple(&mut out, b"OK");
        }
        // WAIT is held and answered by `session/wait.rs`; only a caller that cannot wait gets here.
        Local::Wait => return crate::reply::error("slotgate: WAIT cannot be used here"),
        Local::Info => {
            resp::write_bulk(&mut out, crate::admin::info::render(shared, req).as_bytes())
        }
        Local::ClusterKeyslot => {
            resp::write_int(&mut out, i64::from(cluster::key_slot(req.arg(2))))
        }
        Local::ClusterSlots => return shared.group.view().slots(),
        Local::ClusterShards => {
            return shared
                .group
                .view()
                .shards(session.protocol == Protocol::Resp3)
        }
        Local::ClusterNodes => return shared.group.view().nodes(),
        Local::ClusterMyid => return shared.group.view().myid(),
        Local::ClusterMyShardId => return shared.group.view().myshardid(),
        Local::ClusterInfo => {
            let map = shared.topology.current();
            return shared.group.view().info(&map, &shared.placement);
        }
    }
    out.freeze()
}

fn ping(req: &Request, out: &mut BytesMut) {
    match req.argc() {
        1 => resp::write_simple(out, b"PONG"),
        2 => resp::write_bulk(out, req.arg(1)),
        _ => resp::write_error(out, b"ERR wrong number of arguments for 'ping' command"),
    }
}

/// Redis Cluster serves database 0 only; Valkey 9 serves `cluster-databases` of them
/// (`databases`, the fewest any master has), and each says so in its own words. The
/// database then applies to every connection the client's requests go to
/// (`backend::Wire`).
fn select(req: &Request, session: &mut SessionInfo, nodes: &ServerIdentity) -> Bytes {
    let Some(db) = resp::string2ll(req.arg(1)).filter(|n| i32::try_from(*n).is_ok()) else {
        return error("value is not an integer or out of range");
    };
    if db != 0 && !nodes.numbered_databases() {
        return error("SELECT is not allowed in cluster mode");
    }
    match u16::try_from(db) {
        Ok(db) if u32::from(db) < nodes.databases.max(1) => {
            session.db = db;
            Bytes::from_static(b"+OK\r\n")
        }
        _ => error("DB index is out of range"),
    }
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`, checked in Redis's order: the
/// protocol version, then each option's syntax and the name; the credentials are checked
/// after that by the caller, and only then is anything applied (`Hello::apply`).
pub(crate) struct Hello {
    protocol: Option<Protocol>,
    pub(crate) auth: Option<(Bytes, Bytes)>,
    name: Option<Bytes>,
}

impl Hello {
    pub(crate) fn parse(req: &Request) -> Result<Hello, Bytes> {
        let mut protocol = None;
        if req.argc() >= 2 {
            match resp::string2ll(req.arg(1)) {
                Some(2) => protocol = Some(Protocol::Resp2),
                Some(3) => protocol = Some(Protocol::Resp3),
                Some(_) => {
                    return Err(Bytes::from_static(
                        b"-NOPROTO unsupported protocol version\r\n",
                    ))
                }
                None => return Err(error("Protocol version is not an integer or out of range")),
            }
        }
        let (mut i, mut name, mut auth) = (2, None, None);
        while i < req.argc() {
            let opt = req.arg(i);
            if opt.eq_ignore_ascii_case(b"auth") && i + 2 < req.argc() {
                auth = Some((req.arg_bytes(i + 1), req.arg_bytes(i + 2)));
                i += 3;
            } else if opt.eq_ignore_ascii_case(b"setname") && i + 1 < req.argc() {
                // A copy: a slice would keep the whole read buffer it came in alive.
                let given = Bytes::copy_from_slice(req.arg(i + 1));
                if !valid_client_name(&given) {
                    return Err(error(
                        "Client names cannot contain spaces, newlines or special characters.",
                    ));
                }
                name = Some(given);
                i += 2;
            } else {
                return Err(error(&format!(
                    "Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(opt)
                )));
            }
        }
        Ok(Hello {
            protocol,
            auth,
            name,
        })
    }

    /// Switch protocol and name; the reply in the new protocol, naming the nodes' server
    /// and version (`identity.rs`).
    pub(crate) fn apply(self, session: &mut SessionInfo, id: &ServerIdentity) -> Bytes {
        if let Some(name) = self.name {
            session.name = Some(name);
        }
        if let Some(protocol) = self.protocol {
            session.protocol = protocol;
        }
        hello_reply(session, id)
    }
}

fn hello_reply(session: &SessionInfo, id: &ServerIdentity) -> Bytes {
    let mut out = BytesMut::new();
    let zone = id.availability_zone.as_bytes();
    let fields: [(&[u8], Field); 8] = [
        (b"server", Field::Text(id.hello_name_version().0.as_bytes())),
        (
            b"version",
            Field::Text(id.hello_name_version().1.as_bytes()),
        ),
        (b"proto", Field::Int(i64::from(session.protocol.number()))),
        (b"id", Field::Int(session.id as i64)),
        (b"mode", Field::Text(b"standalone")),
        (b"role", Field::Text(b"master")),
        (b"modules", Field::Empty),
        // Valkey 8.1's, only when set.
        (b"availability_zone", Field::Text(zone)),
    ];
    let count = fields.len() - usize::from(zone.is_empty());
    if session.protocol == Protocol::Resp3 {
        out.extend_from_slice(format!("%{count}\r\n").as_bytes());
    } else {
        resp::write_array_header(&mut out, count * 2);
    }
    for (key, value) in fields.into_iter().take(count) {
        resp::write_bulk(&mut out, key);
        match value {
            Field::Text(t) => resp::write_bulk(&mut out, t),
            Field::Int(n) => resp::write_int(&mut out, n),
            Field::Empty => resp::write_array_header(&mut out, 0),
        }
    }
    out.freeze()
}

enum Field<'a> {
    Text(&'a [u8]),
    Int(i64),
    Empty,
}

/// The CLIENT subcommands that concern this connection only.
fn client(req: &Request, session: &mut SessionInfo) -> Bytes {
    let sub = req.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"id" => Bytes::from(format!(":{}\r\n", session.id)),
        b"getname" => match &session.name {
            Some(name) => {
                let mut out = BytesMut::new();
                resp::write_bulk(&mut out, name);
                out.freeze()
            }
            None if session.protocol == Protocol::Resp3 => Bytes::from_static(b"_\r\n"),
            None => Bytes::from_static(b"$-1\r\n"),
        },
        b"setname" => {
            // A copy: a slice would keep the whole read buffer it came in alive.
            let name = Bytes::copy_from_slice(req.arg(2));
            if !valid_client_name(&name) {
                return error(
                    "Client names cannot contain spaces, newlines or special characters.",
                );
            }
            session.name = (!name.is_empty()).then_some(name);
            Bytes::from_static(b"+OK\r\n")
        }
        // Valkey 8's CLIENT CAPA (`redirect`): a replica's -REDIRECT, which the proxy,
        // answering as a primary, never sends; remembered for CLIENT LIST (`capa=r`).
        // Valkey ignores capabilities it does not know.
        b"capa" => {
            let redirect = (2..req.argc()).any(|i| req.arg(i).eq_ignore_ascii_case(b"redirect"));
            session.capa_redirect |= redirect;
            Bytes::from_static(b"+OK\r\n")
        }
        _ => error(&format!(
            "slotgate: CLIENT {} is not supported by the proxy",
            String::from_utf8_lossy(req.arg(1)).to_uppercase()
        )),
    }
}

/// Redis allows printable ASCII without spaces in client names.
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proxy's shared state over a fake one-master map (no I/O).
    fn shared() -> Shared {
        use cluster::slot_map::{NodeEntry, SlotMap, SlotRange};
        let master = NodeEntry {
            addr: "127.0.0.1:1".into(),
            id: None,
            replicas: vec![],
        };
        let map = SlotMap::from_ranges(
            1,
            &[SlotRange {
                start: 0,
                end: 16383,
                master,
            }],
        )
        .unwrap();
        let config = crate::Config::default();
        let topology = crate::topology::with_map(&config.cluster, map);
        let addr = "127.0.0.1:7777".parse().unwrap();
        Shared {
            config,
            topology,
            placement: cluster::Placement::Slots,
            traffic_mirror: None,
            migration: None,
            write_epochs: None,
            workers: vec![],
            started: tokio::time::Instant::now(),
            next_client_id: std::sync::atomic::AtomicU64::new(1),
            group: crate::context::group::GroupState::new(addr),
            clients: Default::default(),
            live: arc_swap::ArcSwap::from_pointee(crate::context::live::Live::new(
                crate::Config::default(),
            )),
            live_gen: Default::default(),
            reloads: Default::default(),
            reload_failures: Default::default(),
            config_source: Default::default(),
            drain: Default::default(),
            ask_slots: Default::default(),
            backend_auth: None,
            replicas: Default::default(),
            identity: Default::default(),
            slowlog: Default::default(),
            pause: Default::default(),
            monitors: Default::default(),
            history: Default::default(),
            hotkeys_run: Default::default(),
            code_flags: Default::default(),
            tracking_prefixes: Default::default(),
            side_calls: Default::default(),
            tls_acceptor: None,
            backend_tls: None,
        }
    }

    fn run_args(args: &[&str], s: &mut SessionInfo) -> String {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        let req = Request::from_args(&a);
        let cmd = match crate::route::route(&req, false) {
            crate::route::Route::Local(l) => l,
            other => panic!("{args:?} is not local: {other:?}"),
        };
        let reply = match cmd {
            Local::Hello => {
                Hello::parse(&req).map_or_else(|e| e, |h| h.apply(s, &Default::default()))
            }
            cmd => run(cmd, &req, s, &shared()),
        };
        String::from_utf8(reply.to_vec()).unwrap()
    }

    #[test]
    fn hello_names_the_zone_only_when_there_is_one() {
        let mut id = ServerIdentity::default();
        let s = &mut SessionInfo::new(7);
        let reply = |id: &ServerIdentity, s: &SessionInfo| {
            String::from_utf8(hello_reply(s, id).to_vec()).unwrap()
        };
        assert!(reply(&id, s).starts_with("*14\r\n"));
        assert!(!reply(&id, s).contains("availability_zone"));
        id.availability_zone = "eu-1a".into();
        let two = reply(&id, s);
        assert!(two.starts_with("*16\r\n"), "{two}");
        assert!(two.ends_with("$17\r\navailability_zone\r\n$5\r\neu-1a\r\n"));
        s.protocol = Protocol::Resp3;
        assert!(reply(&id, s).starts_with("%8\r\n"));
    }

    #[test]
    fn select_follows_the_nodes_databases() {
        // As valkey-server 9.1.2 answers with `cluster-databases 16`, and with its default 1.
        let valkey = |databases| ServerIdentity {
            name: "valkey".into(),
            redis_version: "7.2.4".into(),
            valkey_version: Some("9.1.2".into()),
            databases,
            availability_zone: String::new(),
            redis_compat: false,
        };
        let select = |db: &str, nodes: &ServerIdentity, s: &mut SessionInfo| {
            let req = Request::from_args(&[b"SELECT", db.as_bytes()]);
            String::from_utf8(select(&req, s, nodes).to_vec()).unwrap()
        };
        let s = &mut SessionInfo::new(1);
        let out_of_range = "-ERR DB index is out of range\r\n";
        assert_eq!(select("15", &valkey(16), s), "+OK\r\n");
        assert_eq!(s.db, 15);
        assert_eq!(select("16", &valkey(16), s), out_of_range);
        assert_eq!(select("-1", &valkey(16), s), out_of_range);
        assert_eq!(s.db, 15, "a refused SELECT keeps the database");
        assert_eq!(select("1", &valkey(1), s), out_of_range);
        assert_eq!(
            select("4294967296", &valkey(16), s),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(select("0", &valkey(1), s), "+OK\r\n");
        assert_eq!(s.db, 0);
        let redis = ServerIdentity::default();
        assert_eq!(
            select("1", &redis, s),
            "-ERR SELECT is not allowed in cluster mode\r\n"
        );
    }

    #[test]
    fn local_replies_match_redis() {
        let s = &mut SessionInfo::new(7);
        let cases: &[(&[&str], &str)] = &[
            (&["PING"], "+PONG\r\n"),
            (&["PING", "hi"], "$2\r\nhi\r\n"),
            (
                &["PING", "a", "b"],
                "-ERR wrong number of arguments for 'ping' command\r\n",
            ),
            (&["ECHO", "x"], "$1\r\nx\r\n"),
            (&["SELECT", "0"], "+OK\r\n"),
            (
                &["SELECT", "1"],
                "-ERR SELECT is not allowed in cluster mode\r\n",
            ),
            (
                &["SELECT", "x"],
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["CLIENT", "ID"], ":7\r\n"),
            (&["CLIENT", "GETNAME"], "$-1\r\n"),
            (
                &["CLIENT", "SETNAME", "a b"],
                "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
            ),
            (&["CLIENT", "SETNAME", "app"], "+OK\r\n"),
            (&["CLIENT", "GETNAME"], "$3\r\napp\r\n"),
            (&["HELLO", "4"], "-NOPROTO unsupported protocol version\r\n"),
            (
                &["HELLO", "x"],
                "-ERR Protocol version is not an integer or out of range\r\n",
            ),
            (&["CLUSTER", "KEYSLOT", "foo"], ":12182\r\n"),
            (&["CLUSTER", "MYID"], "$40\r\n"),
            (&["ASKING"], "+OK\r\n"),
            (&["READONLY"], "+OK\r\n"),
            (&["READWRITE"], "+OK\r\n"),
        ];
        for (args, expected) in cases {
            let got = run_args(args, s);
            assert!(got.starts_with(expected), "{args:?}: {got:?}");
        }
        let info = run_args(&["CLUSTER", "INFO"], s);
        assert!(info.contains("cluster_state:ok\r\n"), "{info}");
    }

    #[test]
    fn hello_switches_protocol_and_quit_marks_the_session() {
        let s = &mut SessionInfo::new(1);
        assert!(run_args(&["HELLO", "3"], s).starts_with("%7\r\n"));
        assert_eq!(s.protocol, Protocol::Resp3);
        assert!(run_args(&["HELLO", "2"], s).starts_with("*14\r\n"));
        assert_eq!(run_args(&["QUIT"], s), "+OK\r\n");
        assert!(s.quit);
    }
}
