//! A nutcracker (twemproxy) YAML file read as it is: one proxy configuration per pool.
//!
//! Replacing nutcracker must be a one-line change in a service file, so every pool of the
//! file is served on its own `listen:` address with its servers, hash, distribution and
//! hash tag (`[sharded]`), and every directive nutcracker knows is either applied or
//! named in a warning saying what slotgate does instead; an unknown one is refused, as
//! nutcracker refuses it.
//!
//! | nutcracker | slotgate |
//! |---|---|
//! | `listen` | `proxy.listen` (unix sockets refused) |
//! | `servers`, `hash`, `hash_tag`, `distribution` | `[sharded]`, placing keys identically |
//! | `timeout` | `cluster.request_timeout_ms` |
//! | `redis_auth` | the clients' `auth.requirepass` and the servers' `backend_password` |
//! | `client_connections` | `limits.maxclients` (0: slotgate's default) |
//! | `redis: false` (memcached) | refused: slotgate speaks RESP only |
//! | `redis_db` other than 0 | refused, not served yet |
//! | `auto_eject_hosts`, `server_retry_timeout`, `server_failure_limit` | warned: a failed server's keys get errors until it is back, never moved |
//! | `preconnect`, `server_connections`, `backlog`, `tcpkeepalive`, `reuseport` | warned: pipelined shared connections, keepalive and `SO_REUSEPORT` always |

use serde_yaml_ng::Value;

use super::{Config, ConfigError};

/// One pool of the file: its name and the configuration that serves it, plus the
/// directives accepted but not applied, for the caller to warn about.
#[derive(Debug, Clone)]
pub struct NutcrackerPool {
    pub name: String,
    pub config: Config,
    pub ignored: Vec<String>,
}

/// Directives slotgate accepts without applying them, and why.
const IGNORED: &[(&str, &str)] = &[
    (
        "auto_eject_hosts",
        "keys stay on their server; a failed server's keys get errors until it is back",
    ),
    (
        "server_retry_timeout",
        "a failed server is dialled again on the next request",
    ),
    (
        "server_failure_limit",
        "keys are never moved off a failed server",
    ),
    ("preconnect", "connections open at the first request"),
    (
        "server_connections",
        "requests are pipelined on shared connections",
    ),
    ("backlog", "the system's listen backlog is used"),
    ("tcpkeepalive", "keepalive is always on towards the servers"),
    ("reuseport", "SO_REUSEPORT is always used"),
];

/// Every pool of `text`, in file order.
pub fn read(text: &str) -> Result<Vec<NutcrackerPool>, ConfigError> {
    let bad = |why: String| ConfigError::Nutcracker(why);
    let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| {
        // The position only: the text may hold `redis_auth`.
        let at = e.location().map_or(String::new(), |l| {
            format!(" at line {}, column {}", l.line(), l.column())
        });
        bad(format!("not a YAML mapping of pools{at}"))
    })?;
    let Value::Mapping(pools) = doc else {
        return Err(bad("not a YAML mapping of pools".into()));
    };
    if pools.is_empty() {
        return Err(bad("no pool".into()));
    }
    pools
        .iter()
        .map(|(name, body)| {
            let name = scalar(name).ok_or_else(|| bad("a pool name is not a string".into()))?;
            pool(&name, body).map_err(|why| bad(format!("pool {name}: {why}")))
        })
        .collect()
}

fn pool(name: &str, body: &Value) -> Result<NutcrackerPool, String> {
    let Value::Mapping(fields) = body else {
        return Err("not a mapping of directives".into());
    };
    let mut config = Config::default();
    // nutcracker's defaults where they differ from slotgate's: no failover to wait for.
    config.cluster.failover_hold_ms = 0;
    let mut ignored = Vec::new();
    let mut redis = false;
    for (key, value) in fields {
        let key = scalar(key).ok_or("a directive name is not a string")?;
        let text = || scalar(value).ok_or(format!("{key}: expected a single value"));
        match key.as_str() {
            "listen" => {
                let listen = text()?;
                if listen.starts_with('/') {
                    return Err("listen: unix sockets are not supported".into());
                }
                config.proxy.listen = listen;
            }
            "servers" => {
                let Value::Sequence(lines) = value else {
                    return Err("servers: expected a list".into());
                };
                config.sharded.servers = lines
                    .iter()
                    .map(|l| scalar(l).ok_or("servers: expected host:port:weight [name] lines"))
                    .collect::<Result<_, _>>()?;
            }
            "hash" => config.sharded.hash = text()?,
            "hash_tag" => config.sharded.hash_tag = text()?,
            "distribution" => config.sharded.distribution = text()?,
            "timeout" => config.cluster.request_timeout_ms = number(&key, value)?,
            "redis_auth" => {
                let password = text()?;
                config.auth.requirepass = password.clone();
                config.cluster.backend_password = password;
            }
            "client_connections" => match number(&key, value)? {
                0 => {}
                n => config.limits.maxclients = n as usize,
            },
            "redis" => redis = flag(&key, value)?,
            "redis_db" => {
                if number(&key, value)? != 0 {
                    return Err("redis_db: only database 0 is served yet".into());
                }
            }
            other => match IGNORED.iter().find(|(k, _)| *k == other) {
                Some((k, why)) => ignored.push(format!("{k}: {why}")),
                None => return Err(format!("unknown directive '{other}'")),
            },
        }
    }
    if !redis {
        return Err("redis: true is required (memcached pools are not served)".into());
    }
    if config.sharded.servers.is_empty() {
        return Err("servers: at least one server is required".into());
    }
    if config.proxy.listen.is_empty() {
        return Err("listen: required".into());
    }
    Ok(NutcrackerPool {
        name: name.to_string(),
        config,
        ignored,
    })
}

/// A string, number or boolean as its text (YAML reads `6379` or `true` as such).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn number(key: &str, v: &Value) -> Result<u64, String> {
    scalar(v)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(format!("{key}: expected a non-negative number"))
}

/// nutcracker's booleans are the words `true` and `false`.
fn flag(key: &str, v: &Value) -> Result<bool, String> {
    match scalar(v).as_deref() {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(format!("{key}: expected true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "
alpha:
  listen: 127.0.0.1:22121
  hash: fnv1a_64
  hash_tag: \"{}\"
  distribution: ketama
  auto_eject_hosts: false
  redis: true
  timeout: 400
  servers:
   - 127.0.0.1:6379:1
   - 127.0.0.1:6380:1 second
beta:
  listen: 127.0.0.1:22122
  redis: true
  redis_auth: hunter2
  distribution: modula
  hash: murmur
  servers:
   - 127.0.0.1:6381:2
";

    #[test]
    fn every_pool_in_file_order() {
        let pools = read(FILE).unwrap();
        let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        let a = &pools[0].config;
        assert_eq!(a.proxy.listen, "127.0.0.1:22121");
        assert_eq!(a.sharded.servers.len(), 2);
        assert_eq!(a.sharded.hash_tag, "{}");
        assert_eq!(a.cluster.request_timeout_ms, 400);
        assert_eq!(pools[0].ignored.len(), 1);
        let b = &pools[1].config;
        assert_eq!(b.auth.requirepass, "hunter2");
        assert_eq!(b.cluster.backend_password, "hunter2");
        for p in &pools {
            p.config.validate().unwrap();
        }
    }

    #[test]
    fn what_nutcracker_refuses_or_slotgate_cannot_serve() {
        let cases = [
            ("a:\n  listen: 127.0.0.1:1\n  redis: true\n  servers: [127.0.0.1:2:1]\n  bogus: 1\n", "unknown directive"),
            ("a:\n  listen: 127.0.0.1:1\n  servers: [127.0.0.1:2:1]\n", "redis: true"),
            ("a:\n  listen: /tmp/x.sock 0666\n  redis: true\n  servers: [127.0.0.1:2:1]\n", "unix"),
            ("a:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_db: 3\n  servers: [127.0.0.1:2:1]\n", "redis_db"),
            ("a:\n  listen: 127.0.0.1:1\n  redis: true\n", "servers"),
            ("- just a list\n", "mapping"),
        ];
        for (text, want) in cases {
            let err = read(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_parse_error_never_quotes_the_file() {
        let err = read("a:\n  redis_auth: \"s3cret\n")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
