//! Which server the proxy stands for: the nodes' name and version, as INFO and HELLO report
//! them, learned from the masters (issue 24, item 2).
//!
//! Why: client libraries gate features on the version HELLO and INFO report (`server
//! valkey`, `version 8.1.8`; `redis_version`, `valkey_version`). A proxy that always says
//! Redis 7.0.15 makes them behave as against a server the user does not run. During a
//! rolling upgrade the masters differ: the proxy reports the lowest, which every node can
//! live up to.
//!
//! ```text
//!   topology thread, every few seconds: each master: INFO server ─▶ parse ─▶ lowest
//!        ─▶ Identity (ArcSwap), read by INFO server and HELLO
//! ```
//!
//! Until a master answered, the proxy reports Redis 7.0.15, the version its built-in
//! command table comes from.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use arc_swap::ArcSwap;

/// What one node (or the lowest of them) says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    /// `server_name` (Valkey), else `redis`.
    pub name: String,
    /// `redis_version`: what Valkey reports for compatibility (7.2.4), or Redis's own.
    pub redis_version: String,
    /// `valkey_version`, on Valkey.
    pub valkey_version: Option<String>,
    /// `cluster-databases` (Valkey 9): how many databases SELECT may choose; 1 elsewhere.
    pub databases: u32,
    /// `availability_zone` (Valkey 8.1+): HELLO names it when it is not empty.
    pub availability_zone: String,
    /// Valkey's `extended-redis-compatibility` (8.x and 9.x): HELLO says `redis` and Redis's
    /// version, INFO prints `redis_mode` where it prints `server_mode` otherwise.
    pub redis_compat: bool,
}

impl Default for ServerIdentity {
    fn default() -> Self {
        ServerIdentity {
            name: "redis".into(),
            redis_version: "7.0.15".into(),
            valkey_version: None,
            databases: 1,
            availability_zone: String::new(),
            redis_compat: false,
        }
    }
}

impl ServerIdentity {
    /// From an `INFO server` reply; None if it names no version.
    pub fn parse(text: &str) -> Option<ServerIdentity> {
        let mut id = ServerIdentity::default();
        let mut seen = false;
        let mut redis_mode = false;
        for line in text.lines() {
            let Some((field, value)) = line.trim_end().split_once(':') else {
                continue;
            };
            match field {
                "redis_version" => (id.redis_version, seen) = (value.to_string(), true),
                "valkey_version" => id.valkey_version = Some(value.to_string()),
                "server_name" => id.name = value.to_string(),
                "availability_zone" => id.availability_zone = value.to_string(),
                "redis_mode" => redis_mode = true,
                _ => {}
            }
        }
        // Valkey prints `server_mode`, or `redis_mode` while its compatibility is on.
        id.redis_compat = redis_mode && id.valkey_version.is_some();
        seen.then_some(id)
    }

    /// What HELLO says as `version`: the server's own (Valkey's, on Valkey).
    pub fn version(&self) -> &str {
        self.valkey_version
            .as_deref()
            .unwrap_or(&self.redis_version)
    }

    /// What HELLO says as `server` and `version`: Valkey's Redis compatibility says
    /// `redis` and the Redis version it stands for.
    pub fn hello_name_version(&self) -> (&str, &str) {
        match self.redis_compat {
            true => ("redis", &self.redis_version),
            false => (&self.name, self.version()),
        }
    }

    /// INFO's `<x>_mode` field: Valkey's `server_mode`, unless its Redis compatibility is
    /// on; Redis's `redis_mode`.
    pub fn mode_field(&self) -> &'static str {
        match self.valkey_version.is_some() && !self.redis_compat {
            true => "server_mode",
            false => "redis_mode",
        }
    }

    /// Whether ACL LIST and GETUSER show `sanitize-payload`/`skip-sanitize-payload`: Redis
    /// and Valkey before 9.1 do; Valkey 9.1 accepts them as no-ops and shows neither.
    pub fn shows_payload_flags(&self) -> bool {
        self.valkey_version
            .as_deref()
            .is_none_or(|v| numbers(v).as_slice() < [9, 1].as_slice())
    }

    /// Whether an unknown command without arguments is answered without the ", with args
    /// beginning with: " tail, as Redis 8 does (Redis 7 and Valkey always add it).
    pub fn bare_unknown_command(&self) -> bool {
        self.valkey_version.is_none() && numbers(&self.redis_version).first() >= Some(&8)
    }

    /// Whether MULTI or WATCH inside MULTI also aborts the transaction (EXEC then answers
    /// EXECABORT): Valkey refuses them as no-multi commands, which flags the transaction;
    /// Redis answers them from the commands themselves, which does not.
    pub fn inside_multi_aborts(&self) -> bool {
        self.valkey_version.is_some()
    }

    /// The error for MULTI or WATCH inside MULTI (the only commands flagged `no-multi` that
    /// the proxy answers itself), worded as the servers word it: Redis names the case,
    /// Valkey 8 answers the generic no-multi error, Valkey 9 adds the command's name.
    pub fn inside_multi_error(&self, command: &str) -> String {
        match self.valkey_version.as_deref().map(numbers) {
            None if command == "multi" => "-ERR MULTI calls can not be nested\r\n".into(),
            None => "-ERR WATCH inside MULTI is not allowed\r\n".into(),
            Some(v) if v.first().is_some_and(|&major| major >= 9) => {
                format!("-ERR Command '{command}' not allowed inside a transaction\r\n")
            }
            Some(_) => "-ERR Command not allowed inside a transaction\r\n".into(),
        }
    }

    /// The error for another command flagged `no-multi` (SAVE, SHUTDOWN, Valkey's CLIENT
    /// REPLY…) inside MULTI: Valkey 9 names it (`container|sub` for a subcommand).
    pub fn no_multi_error(&self, command: &str) -> String {
        match self.valkey_version.as_deref().map(numbers) {
            Some(v) if v.first().is_some_and(|&major| major >= 9) => {
                format!("-ERR Command '{command}' not allowed inside a transaction\r\n")
            }
            _ => "-ERR Command not allowed inside a transaction\r\n".into(),
        }
    }

    /// `redis_version`'s major number (Valkey reports 7).
    pub fn redis_major(&self) -> u64 {
        numbers(&self.redis_version).first().copied().unwrap_or(0)
    }

    /// Inline requests join quoted and unquoted parts of an argument (Valkey 9's
    /// `sdsparsearg`), where Redis refuses a closing quote not followed by a space.
    pub fn mixed_inline_quotes(&self) -> bool {
        self.valkey_version
            .as_deref()
            .is_some_and(|v| numbers(v).first() >= Some(&9))
    }

    /// Whether the nodes have numbered databases in cluster mode (Valkey 9's
    /// `cluster-databases`, 1 by default): SELECT is then checked against their count
    /// ("DB index is out of range") instead of refused outright.
    pub fn numbered_databases(&self) -> bool {
        self.valkey_version
            .as_deref()
            .is_some_and(|v| numbers(v).first().is_some_and(|&major| major >= 9))
    }

    /// The lower of two, by server then version: a Redis node during a move to Valkey keeps
    /// the proxy a Redis (the older promise), and the older version wins within a server.
    pub fn lowest(self, other: ServerIdentity) -> ServerIdentity {
        let key = |id: &ServerIdentity| (id.valkey_version.is_some(), numbers(id.version()));
        let databases = self.databases.min(other.databases);
        let lower = match key(&other) < key(&self) {
            true => other,
            false => self,
        };
        // Only the databases every master has can be selected.
        ServerIdentity { databases, ..lower }
    }
}

/// `8.1.10` as [8, 1, 10], so versions compare as numbers (a suffix is ignored).
fn numbers(version: &str) -> Vec<u64> {
    version
        .split('.')
        .map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap_or(0)
        })
        .collect()
}

/// [`ServerIdentity::bare_unknown_command`] of the identity published last, for the router,
/// which answers unknown commands without a session at hand. Process-wide like the learned
/// command table: one proxy per process fronts one kind of server.
static BARE_UNKNOWN: AtomicBool = AtomicBool::new(false);

/// Whether an unknown command without arguments gets Redis 8's shorter error.
pub fn bare_unknown_command() -> bool {
    BARE_UNKNOWN.load(Ordering::Relaxed)
}

/// The identity in force, shared by the topology thread (writer) and the workers.
#[derive(Default)]
pub struct Identity {
    current: ArcSwap<ServerIdentity>,
    /// Set once the sampler's first round is over (whether or not a master answered):
    /// the proxy serves no client before, so none sees the default identity or a command
    /// table without what the servers added (`Identity::wait_first_round`).
    first_round: (Mutex<bool>, Condvar),
    /// The command table this proxy routes by, learned from its own masters: another
    /// proxy of the process (a nutcracker pool) may be behind other versions.
    table: CommandTable,
}

/// A proxy's own choice of learned command table (`cluster::command::learn`).
pub struct CommandTable(&'static cluster::command::learn::TableChoice);

impl Default for CommandTable {
    fn default() -> Self {
        CommandTable(cluster::command::learn::TableChoice::leaked())
    }
}

impl Identity {
    /// This thread serves this proxy: it routes by the table learned from its masters.
    pub(crate) fn route_this_thread(&self) {
        cluster::command::learn::route_this_thread_by(self.table.0);
    }

    pub fn current(&self) -> Arc<ServerIdentity> {
        self.current.load_full()
    }

    /// Store `id` if it differs (a reader then sees the new one on its next load).
    pub fn publish(&self, id: ServerIdentity) {
        if *self.current.load_full() != id {
            tracing::info!(server = %id.name, version = %id.version(), "nodes' identity");
            BARE_UNKNOWN.store(id.bare_unknown_command(), Ordering::Relaxed);
            self.current.store(Arc::new(id));
        }
    }

    /// A `CONFIG SET availability-zone` that went to every master: HELLO names the zone
    /// from now on, not from the sampler's next round (which reads the same from them).
    pub(crate) fn config_set(&self, req: &resp::Request) {
        if !(req.argc() >= 4 && req.arg(1).eq_ignore_ascii_case(b"set")) {
            return;
        }
        let current = self.current();
        if current.valkey_version.is_none() {
            return;
        }
        let value_of = |name: &[u8]| {
            (2..req.argc() - 1)
                .step_by(2)
                .filter(|&i| req.arg(i).eq_ignore_ascii_case(name))
                .map(|i| String::from_utf8_lossy(req.arg(i + 1)).into_owned())
                .last()
        };
        let zone = value_of(b"availability-zone");
        let compat = value_of(b"extended-redis-compatibility").and_then(|v| {
            match v.to_ascii_lowercase().as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            }
        });
        if zone.is_none() && compat.is_none() {
            return;
        }
        let mut id = (*current).clone();
        if let Some(zone) = zone {
            id.availability_zone = zone;
        }
        if let Some(compat) = compat {
            id.redis_compat = compat;
        }
        self.publish(id);
    }

    /// The sampler's first round is over.
    pub(crate) fn first_round_done(&self) {
        let (done, wake) = &self.first_round;
        *done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
    }

    /// Wait until the first round is over, `ceiling` at most; whether it was.
    pub(crate) fn wait_first_round(&self, ceiling: std::time::Duration) -> bool {
        let (done, wake) = &self.first_round;
        let guard = done.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = wake
            .wait_timeout_while(guard, ceiling, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str, redis: &str, valkey: Option<&str>) -> ServerIdentity {
        ServerIdentity {
            name: name.into(),
            redis_version: redis.into(),
            valkey_version: valkey.map(String::from),
            databases: 1,
            availability_zone: String::new(),
            redis_compat: false,
        }
    }

    #[test]
    fn the_zone_is_read_and_follows_config_set_behind_valkey() {
        let info = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\n\
                    valkey_version:9.1.2\r\navailability_zone:eu-1a\r\n";
        let identity = Identity::default();
        identity.publish(ServerIdentity::parse(info).unwrap());
        assert_eq!(identity.current().availability_zone, "eu-1a");
        let set = |args: &[&str]| {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            resp::Request::from_args(&args)
        };
        identity.config_set(&set(&["CONFIG", "SET", "maxmemory", "0"]));
        assert_eq!(identity.current().availability_zone, "eu-1a");
        identity.config_set(&set(&["config", "set", "Availability-Zone", "z2"]));
        assert_eq!(identity.current().availability_zone, "z2");
        identity.config_set(&set(&["CONFIG", "SET", "availability-zone", ""]));
        assert_eq!(identity.current().availability_zone, "");
        // Redis has no such parameter: nothing changes.
        let redis = Identity::default();
        redis.config_set(&set(&["CONFIG", "SET", "availability-zone", "z"]));
        assert_eq!(redis.current().availability_zone, "");
    }

    #[test]
    fn multi_inside_multi_is_worded_per_server() {
        // Each text as redis-server 8.6.3, valkey-server 8.1.8 and 9.1.2 answer it.
        let redis = id("redis", "8.6.3", None);
        assert_eq!(
            redis.inside_multi_error("multi"),
            "-ERR MULTI calls can not be nested\r\n"
        );
        assert_eq!(
            redis.inside_multi_error("watch"),
            "-ERR WATCH inside MULTI is not allowed\r\n"
        );
        let valkey8 = id("valkey", "7.2.4", Some("8.1.8"));
        assert_eq!(
            valkey8.inside_multi_error("watch"),
            "-ERR Command not allowed inside a transaction\r\n"
        );
        let valkey9 = id("valkey", "7.2.4", Some("9.1.2"));
        assert_eq!(
            valkey9.inside_multi_error("multi"),
            "-ERR Command 'multi' not allowed inside a transaction\r\n"
        );
    }

    #[test]
    fn valkey_and_redis_replies_are_read() {
        let valkey = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\nredis_git_sha1:0\r\n";
        assert_eq!(
            ServerIdentity::parse(valkey),
            Some(id("valkey", "7.2.4", Some("8.1.8")))
        );
        let redis = "# Server\r\nredis_version:8.6.3\r\nredis_mode:cluster\r\n";
        assert_eq!(
            ServerIdentity::parse(redis),
            Some(id("redis", "8.6.3", None))
        );
        assert_eq!(ServerIdentity::parse("# Server\r\n"), None);
        // Valkey with `extended-redis-compatibility yes` prints `redis_mode`.
        let compat = valkey.replace("redis_git_sha1:0", "redis_mode:cluster");
        let compat = ServerIdentity::parse(&compat).unwrap();
        assert!(compat.redis_compat);
        assert_eq!(compat.hello_name_version(), ("redis", "7.2.4"));
        assert_eq!(compat.mode_field(), "redis_mode");
        let plain = id("valkey", "7.2.4", Some("8.1.8"));
        assert_eq!(plain.hello_name_version(), ("valkey", "8.1.8"));
        assert_eq!(plain.mode_field(), "server_mode");
        assert_eq!(id("redis", "8.6.3", None).mode_field(), "redis_mode");
        assert!(id("redis", "8.6.3", None).shows_payload_flags());
        assert!(id("valkey", "7.2.4", Some("8.1.8")).shows_payload_flags());
        assert!(!id("valkey", "7.2.4", Some("9.1.2")).shows_payload_flags());
        assert_eq!(id("valkey", "7.2.4", Some("9.1.2")).version(), "9.1.2");
    }

    #[test]
    fn the_lowest_wins_numerically_and_redis_below_valkey() {
        let a = id("redis", "7.0.15", None);
        let b = id("redis", "7.0.9", None);
        assert_eq!(a.clone().lowest(b.clone()), b);
        assert_eq!(b.clone().lowest(a.clone()), b);
        let v = id("valkey", "7.2.4", Some("8.1.8"));
        assert_eq!(v.clone().lowest(a.clone()), a);
        let v9 = id("valkey", "7.2.4", Some("9.1.2"));
        assert_eq!(v9.lowest(v.clone()), v);
    }
}
