//! `[sharded]`: a pool of standalone servers in front of which the proxy places keys as
//! twemproxy does (`cluster::sharding`), instead of following a Redis Cluster.
//!
//! The server lines are nutcracker's own, `host:port:weight [name]`, so a pool moves from a
//! nutcracker YAML file unchanged (`nutcracker.rs` reads one whole).

use serde::Deserialize;

use cluster::sharding::{Distribution, HashFn, ShardServer, Sharding};

use super::ConfigError;

/// The pool, when configured (`servers` not empty); then `cluster.seeds` must be empty.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ShardedConfig {
    /// nutcracker's `servers:` lines: `host:port:weight [name]`, in order (the order is
    /// part of the placement).
    pub servers: Vec<String>,
    /// nutcracker's `hash:` (default `fnv1a_64`).
    pub hash: String,
    /// nutcracker's `distribution:` (default `ketama`).
    pub distribution: String,
    /// nutcracker's `hash_tag:`, two characters such as `{}`, or empty for the whole key.
    pub hash_tag: String,
}

impl ShardedConfig {
    pub fn is_set(&self) -> bool {
        !self.servers.is_empty()
    }

    /// The placement these settings describe, every line checked.
    pub fn sharding(&self) -> Result<Sharding, ConfigError> {
        let bad = |reason: String| ConfigError::Sharded(reason);
        let servers = self
            .servers
            .iter()
            .map(|line| server(line).map_err(|why| bad(format!("server {line:?}: {why}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let hash = match self.hash.as_str() {
            "" => HashFn::default(),
            name => name
                .parse()
                .map_err(|e: cluster::sharding::UnknownHash| bad(e.to_string()))?,
        };
        let distribution = match self.distribution.as_str() {
            "" => Distribution::default(),
            name => name.parse().map_err(bad)?,
        };
        Sharding::new(servers, hash, distribution, self.hash_tag.as_bytes())
            .map_err(|e| bad(e.to_string()))
    }
}

/// nutcracker's port whose servers ketama names without it (libmemcached's habit).
const MEMCACHED_PORT: &str = "11211";

/// One `host:port:weight [name]` line, read from its end as nutcracker reads it.
fn server(line: &str) -> Result<ShardServer, &'static str> {
    if line.starts_with('/') {
        return Err("unix sockets are not supported; give host:port:weight");
    }
    let (spec, name) = match line.rsplit_once(' ') {
        Some((spec, name)) if !name.is_empty() => (spec, Some(name)),
        _ => (line, None),
    };
    let (addr, weight) = spec
        .rsplit_once(':')
        .ok_or("expected host:port:weight [name]")?;
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or("expected host:port:weight [name]")?;
    let port_number: u16 = port.parse().map_err(|_| "invalid port")?;
    if port_number == 0 || host.is_empty() {
        return Err("invalid host or port");
    }
    let weight: u32 = weight.parse().map_err(|_| "invalid weight")?;
    if weight == 0 {
        return Err("zero weight");
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let dial = cluster::slot_map::join_host_port(host, port_number);
    let name = match name {
        Some(name) => name.to_string(),
        None if port == MEMCACHED_PORT => addr[..addr.len() - port.len() - 1].to_string(),
        None => addr.to_string(),
    };
    Ok(ShardServer {
        addr: dial,
        weight,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_nutcracker_reads_them() {
        let s = server("127.0.0.1:6379:1").unwrap();
        assert_eq!(
            (s.addr.as_str(), s.weight, s.name.as_str()),
            ("127.0.0.1:6379", 1, "127.0.0.1:6379")
        );
        let s = server("10.0.0.1:6380:5 redis-a").unwrap();
        assert_eq!(
            (s.addr.as_str(), s.weight, s.name.as_str()),
            ("10.0.0.1:6380", 5, "redis-a")
        );
        let s = server("cache1:11211:1").unwrap();
        assert_eq!(s.name, "cache1");
        for bad in [
            "127.0.0.1:6379",
            "127.0.0.1:x:1",
            "127.0.0.1:6379:0",
            "/tmp/r.sock:1",
            ":6379:1",
        ] {
            assert!(server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_nutcrackers() {
        let c = ShardedConfig {
            servers: vec!["127.0.0.1:7000:1".into(), "127.0.0.1:7001:1".into()],
            ..ShardedConfig::default()
        };
        let s = c.sharding().unwrap();
        assert_eq!(
            (s.hash(), s.distribution()),
            (HashFn::Fnv1a_64, Distribution::Ketama)
        );
        let bad = ShardedConfig {
            hash: "sha1".into(),
            ..c
        };
        assert!(matches!(bad.sharding(), Err(ConfigError::Sharded(_))));
    }
}
