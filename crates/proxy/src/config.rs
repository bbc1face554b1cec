//! The proxy's configuration: one TOML file, sectioned by concern, with every default in one
//! `Default` impl so the example file, the CLI and the tests cannot disagree.
//!
//! Unknown keys are errors (`deny_unknown_fields`): a typo must not silently fall back to a
//! default. `validate` turns strings into addresses once, at start, so the hot path never parses.

use std::net::SocketAddr;

use serde::Deserialize;

mod admin;
mod error;
mod group;
mod hotkeys;
mod listen;
mod migration;
mod mirror;
mod near_cache;
pub mod nutcracker;
pub mod read_policy;
mod routes;
mod secret;
mod sentinel;
mod sharded;
pub mod source;
mod tls;
pub use admin::AdminConfig;
pub use error::ConfigError;
pub use group::{GroupConfig, GroupMembers};
pub use hotkeys::HotkeysConfig;
pub use listen::ListenAddrs;
use listen::{is_host_port, parse_addr};
pub use migration::MigrationConfig;
pub use mirror::MirrorConfig;
pub use near_cache::NearCacheConfig;
pub use read_policy::ReadPolicy;
pub use routes::RouteConfig;
pub use secret::Secret;
pub use sentinel::SentinelConfig;
pub use sharded::ShardedConfig;
pub use tls::{BackendTlsConfig, TlsConfig};

/// Everything `slotgate proxy` can be told. CLI flags override the file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub proxy: ProxyConfig,
    pub cluster: ClusterConfig,
    pub limits: LimitsConfig,
    pub auth: AuthConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    pub slowlog: SlowlogConfig,
    pub tls: TlsConfig,
    pub backend_tls: BackendTlsConfig,
    pub group: GroupConfig,
    /// A sharded pool of standalone servers instead of a cluster.
    pub sharded: ShardedConfig,
    /// Key-prefix routes to sharded pools of their own, `sharded` taking every other key.
    pub routes: Vec<RouteConfig>,
    /// A Sentinel-managed master instead of a cluster.
    pub sentinel: SentinelConfig,
    /// A copy of some requests to a second pool.
    pub mirror: MirrorConfig,
    /// A pool of standalone servers whose keys move into the cluster served.
    pub migration: MigrationConfig,
    /// The hot-key board.
    pub hotkeys: HotkeysConfig,
    /// Hot keys' values served by the proxy.
    pub near_cache: NearCacheConfig,
}

/// Who may use the proxy. Empty: anyone who can connect (allowed on loopback only).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Password of the `default` user (`AUTH <password>`), like Redis's `requirepass`.
    pub requirepass: String,
    /// Named users (`AUTH <user> <password>`) with ACL-style command and key rules.
    pub users: Vec<crate::auth::UserConfig>,
}

/// The client-facing side.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// Address to accept clients on. Loopback unless configured otherwise.
    pub listen: String,
    /// More addresses to accept plain clients on, as Redis's `bind` takes several (an IPv6
    /// loopback beside the IPv4 one): the same service on each. Read at start only.
    pub extra_listen: Vec<String>,
    /// Worker threads, each an event loop owning its clients and backend connections.
    /// 0 means one per available core.
    pub threads: usize,
    /// Forward administrative commands (CONFIG, DEBUG, SHUTDOWN, …) instead of refusing them.
    pub allow_admin_commands: bool,
    /// On SIGTERM: how long clients get to pause between requests (each is closed at its
    /// first such moment) before the proxy stops reading and closes them once answered.
    pub drain_timeout_ms: u64,
    /// Task polls between two looks at the sockets (tokio's `event_interval`): how long a
    /// ready socket, a bystander's PING, can wait behind the worker's busy tasks.
    pub event_interval: u32,
    /// Bytes one client or backend connection may move in one poll before it yields to the
    /// worker's other tasks, and at most what one read or write is offered: a 100 MB value
    /// passes in slices of this size.
    pub turn_quantum_bytes: usize,
}

/// How the proxy finds and follows the Redis Cluster.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Nodes to ask for the first topology, `host:port`; any one reachable node suffices.
    pub seeds: Vec<String>,
    /// Minimum time between two topology refreshes, whatever asks for them.
    pub min_refresh_interval_ms: u64,
    /// Periodic topology check, so a dead master is noticed even without a MOVED.
    pub periodic_refresh_ms: u64,
    /// Connect timeout towards a Redis node.
    pub connect_timeout_ms: u64,
    /// A node that owes replies and sends none for this long is treated as failed: its
    /// connection is closed and the requests on it fail (0 disables every deadline below).
    pub request_timeout_ms: u64,
    /// The same while a slow command (KEYS, FLUSHALL, EVAL, SCRIPT, FUNCTION, DEBUG, SAVE,
    /// MIGRATE, SORT…) is owed on the connection: the node is busy, not dead, and the other
    /// clients' requests queued behind it must not fail for it. Below `request_timeout_ms`
    /// it counts as equal. Blocking commands get their own timeout plus `request_timeout_ms`.
    pub slow_command_timeout_ms: u64,
    /// MOVED/ASK hops followed for one request before the client gets the redirect error.
    pub max_redirects: u8,
    /// A request that never reached its node (down, or it cannot be dialled) is held this
    /// long for the slot's next master (a failover), then answered with the error. A little
    /// above Redis's own failover time with its default `cluster-node-timeout` (15 s). 0
    /// fails such requests at once.
    pub failover_hold_ms: u64,
    /// How the topology is read: `auto` (the default: CLUSTER SHARDS, CLUSTER SLOTS from a
    /// node that refuses it), `slots` or `shards` (`topology::TopologyCommand`).
    pub topology_command: String,
    /// Credentials the proxy uses towards the nodes (Redis `AUTH [user] password`); separate
    /// from client credentials, and never shown to clients or in logs.
    pub backend_user: String,
    pub backend_password: String,
    /// Where read-only commands go: `master`, `prefer-replica`, `replica` or `nearest`
    /// (`docs/replicas.md`). A client's READONLY asks for at least `prefer-replica`.
    pub read_policy: ReadPolicy,
    /// A replica whose replication offset is more than this many bytes behind its master's
    /// (INFO replication, sampled about once a second) serves no reads.
    pub max_replica_lag: u64,
    /// The proxy's own availability zone: `nearest` prefers the nodes whose
    /// `availability-zone` (Valkey 8.1+) is this one. Empty: round trips alone decide.
    pub availability_zone: String,
    /// Inside MULTI, hold the transaction on its node from its first keyed command: MULTI
    /// and each command go to the slot's master as they come (on a connection of the
    /// client's own), so the node answers `+QUEUED` or refuses at queue time on its own state
    /// (out of memory, a failed save, too few replicas, a busy script) and checks EXEC at
    /// EXEC time, as one Redis does. Off: commands are kept by the proxy and sent with EXEC,
    /// and such refusals come only at EXEC (EXECABORT, nothing runs).
    pub live_multi: bool,
}

/// Per-client bounds (Redis's own defaults where Redis has one).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest bulk argument accepted from a client (Redis: proto-max-bulk-len, 512 MB).
    pub max_bulk_bytes: usize,
    /// Unparsed bytes buffered per client before it is disconnected (Redis: 1 GB).
    pub max_query_buffer_bytes: usize,
    /// Requests of one client in flight (sent or queued, reply not yet written back); past
    /// it the proxy stops reading that client until replies drain (TCP backpressure).
    pub max_pending_per_client: usize,
    /// Reply bytes queued for one client before the proxy stops reading its requests.
    pub output_soft_limit_bytes: usize,
    /// Clients connected at once; one more gets `-ERR max number of clients reached`. Higher
    /// than Redis's 10,000: one proxy fronts a whole cluster's clients. The proxy raises its
    /// file-descriptor limit to match at start, as far as the hard limit allows.
    pub maxclients: usize,
    /// Close a client idle this long (nothing sent, nothing in flight, not subscribed);
    /// 0 = never, as Redis's `timeout 0`.
    pub idle_timeout_ms: u64,
    /// A request whose first bytes arrived must be complete within this time, or the client
    /// is closed (slowloris protection; Redis has none). 0 = no deadline.
    pub request_deadline_ms: u64,
    /// Reply bytes queued for one client (written or still arriving from the nodes) past
    /// which it is disconnected, as Redis's `client-output-buffer-limit normal` hard limit.
    /// 0 = no limit.
    pub output_hard_limit_bytes: usize,
    /// Bytes of undelivered pub/sub messages after which a subscriber is disconnected
    /// (Redis: client-output-buffer-limit pubsub 32mb).
    pub pubsub_output_limit_bytes: usize,
    /// Reply bytes queued for all clients together, plus an estimate for the requests not
    /// yet answered, split evenly over the workers. From half of it, a client whose socket
    /// is full is no longer read; from three quarters (or 16,384 requests unanswered per
    /// worker), clients with work pending are read one request at a time; past it, the
    /// client holding the most is disconnected (Redis 7's `maxmemory-clients`). 0 = off.
    pub memory_budget_bytes: usize,
    /// Kernel send and receive buffer of each client socket (SO_SNDBUF, SO_RCVBUF); 0 = the
    /// kernel's autotuning. Clients that never read fill these buffers too, outside the
    /// budget: a thousand of them can take all of the kernel's TCP memory (`tcp_mem`), and
    /// then every connection of the host stalls, backends included.
    pub client_socket_buffer_bytes: usize,
}

/// Logging; `RUST_LOG` overrides `level`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub level: String,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: "127.0.0.1:7777".into(),
            extra_listen: Vec::new(),
            threads: 0,
            allow_admin_commands: false,
            drain_timeout_ms: 10_000,
            // tokio's default is 61: a bystander then waits up to 61 busy polls.
            event_interval: 16,
            turn_quantum_bytes: 256 * 1024,
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seeds: Vec::new(),
            min_refresh_interval_ms: 1000,
            periodic_refresh_ms: 10_000,
            connect_timeout_ms: 1000,
            request_timeout_ms: 5000,
            slow_command_timeout_ms: 60_000,
            max_redirects: ::topology::MAX_REDIRECTS,
            failover_hold_ms: 20_000,
            topology_command: "auto".into(),
            backend_user: String::new(),
            backend_password: String::new(),
            read_policy: ReadPolicy::Master,
            max_replica_lag: 1024 * 1024,
            availability_zone: String::new(),
            live_multi: true,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_bulk_bytes: 512 * 1024 * 1024,
            max_query_buffer_bytes: 1024 * 1024 * 1024,
            max_pending_per_client: 16 * 1024,
            output_soft_limit_bytes: 64 * 1024 * 1024,
            maxclients: 50_000,
            idle_timeout_ms: 0,
            request_deadline_ms: 30_000,
            output_hard_limit_bytes: 1024 * 1024 * 1024,
            pubsub_output_limit_bytes: 32 * 1024 * 1024,
            // 2 GiB: a twelfth of a 24 GiB machine, leaving room for the base, the kernel's
            // socket buffers and whatever shares the host.
            memory_budget_bytes: 2 * 1024 * 1024 * 1024,
            client_socket_buffer_bytes: 0,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
        }
    }
}

impl Config {
    /// How keys map to slots: a sharded pool's servers, several pools' by key prefix, a
    /// Sentinel master's slot 0, or Redis Cluster's own slots.
    pub fn placement(&self) -> Result<cluster::Placement, ConfigError> {
        if self.sentinel.is_set() {
            return Ok(cluster::Placement::One);
        }
        if !self.routes.is_empty() {
            let table = routes::table(&self.sharded, &self.routes)?;
            return Ok(cluster::Placement::Routes(std::sync::Arc::new(table)));
        }
        Ok(match self.sharded.is_set() {
            true => cluster::Placement::Servers(std::sync::Arc::new(self.sharded.sharding()?)),
            false => cluster::Placement::Slots,
        })
    }

    /// Parse TOML text; every key optional, unknown keys refused.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::parse(text, &e))
    }

    /// Check the whole configuration once, at start. Returns the addresses to listen on.
    pub fn validate(&self) -> Result<ListenAddrs, ConfigError> {
        let plain = match self.proxy.listen.as_str() {
            "" => None,
            text => Some(parse_addr(text)?),
        };
        let tls = tls::check(&self.tls, &self.backend_tls)?;
        let extra = self
            .proxy
            .extra_listen
            .iter()
            .map(|text| parse_addr(text))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(addr) = extra
            .iter()
            .find(|a| !a.ip().is_loopback() && !self.auth_required())
        {
            return Err(ConfigError::Unprotected(*addr));
        }
        if plain.is_none() && tls.is_none() {
            return Err(ConfigError::NoListener);
        }
        let pools = [
            !self.cluster.seeds.is_empty(),
            self.sharded.is_set(),
            self.sentinel.is_set(),
        ];
        match pools {
            _ if pools.iter().filter(|p| **p).count() > 1 => return Err(ConfigError::TwoPools),
            _ if !self.routes.is_empty() => drop(routes::table(&self.sharded, &self.routes)?),
            [_, true, _] => drop(self.sharded.sharding()?),
            [_, _, true] => self.sentinel.check()?,
            _ => self.check_seeds()?,
        }
        if self.mirror.is_set() {
            self.mirror.check()?;
        }
        if self.migration.is_set() {
            let random = |pool: &ShardedConfig| pool.distribution == "random";
            let random_target = (self.sharded.is_set() && random(&self.sharded))
                || self.routes.iter().any(|r| random(&r.pool));
            self.migration.check(random_target)?;
        }
        self.hotkeys.check()?;
        self.near_cache.check()?;
        self.check_nonzero()?;
        self.admin_addr()?;
        self.group.members(&self.proxy.listen)?;
        if ::topology::TopologyCommand::from_name(&self.cluster.topology_command).is_none() {
            return Err(ConfigError::TopologyCommand(
                self.cluster.topology_command.clone(),
            ));
        }
        for user in &self.auth.users {
            crate::auth::User::from_config(user)?;
        }
        // Client certificates authenticate the TLS listener's clients; the plain one has
        // only AUTH.
        let mtls = !self.tls.client_ca_file.is_empty();
        let open = [
            (plain, self.auth_required()),
            (tls, self.auth_required() || mtls),
        ];
        if let Some((Some(addr), _)) = open
            .iter()
            .find(|(addr, guarded)| addr.is_some_and(|a| !a.ip().is_loopback()) && !guarded)
        {
            return Err(ConfigError::Unprotected(*addr));
        }
        Ok(ListenAddrs { plain, tls, extra })
    }

    /// At least one seed, each `host:port`, so bootstrap has somewhere to start.
    fn check_seeds(&self) -> Result<(), ConfigError> {
        if self.cluster.seeds.is_empty() {
            return Err(ConfigError::NoSeeds);
        }
        match self.cluster.seeds.iter().find(|s| !is_host_port(s)) {
            Some(seed) => Err(ConfigError::Seed(seed.clone())),
            None => Ok(()),
        }
    }

    /// Limits where zero would refuse every request or never connect.
    fn check_nonzero(&self) -> Result<(), ConfigError> {
        let nonzero = [
            (self.limits.max_bulk_bytes, "limits.max_bulk_bytes"),
            (
                self.limits.max_query_buffer_bytes,
                "limits.max_query_buffer_bytes",
            ),
            (
                self.limits.max_pending_per_client,
                "limits.max_pending_per_client",
            ),
            (
                self.limits.output_soft_limit_bytes,
                "limits.output_soft_limit_bytes",
            ),
            (
                self.cluster.connect_timeout_ms as usize,
                "cluster.connect_timeout_ms",
            ),
            (self.proxy.event_interval as usize, "proxy.event_interval"),
            (self.proxy.turn_quantum_bytes, "proxy.turn_quantum_bytes"),
        ];
        if let Some((_, name)) = nonzero.iter().find(|(v, _)| *v == 0) {
            return Err(ConfigError::Zero(name));
        }
        Ok(())
    }

    /// The admin endpoint's address, if enabled (`AdminConfig::addr`).
    pub fn admin_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        self.admin.addr()
    }

    /// Whether clients must AUTH before anything else.
    pub fn auth_required(&self) -> bool {
        !self.auth.requirepass.is_empty() || !self.auth.users.is_empty()
    }

    /// Worker count with 0 resolved to the number of cores.
    pub fn worker_threads(&self) -> usize {
        match self.proxy.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// `[slowlog]`: Redis's `slowlog-log-slower-than` and `slowlog-max-len`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SlowlogConfig {
    /// Log requests that take at least this many microseconds in the proxy; 0 logs every
    /// request, a negative value turns the log off.
    pub log_slower_than_us: i64,
    /// Entries kept (the newest).
    pub max_len: usize,
}

impl Default for SlowlogConfig {
    fn default() -> Self {
        SlowlogConfig {
            log_slower_than_us: 10_000,
            max_len: 128,
        }
    }
}

#[cfg(test)]
mod tests;
