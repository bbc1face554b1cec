//! redis-rs against slotgate, as applications use it: the sync `Connection`, the async
//! `MultiplexedConnection` (tokio) and the sync `ClusterConnection`, each in RESP2 and RESP3.
//! Run by compat/run.py (COMPAT_PROXY=host:port); prints one
//! `PASS|FAIL|SKIP redis-rs/<mode>/<resp>/<case>` line per case (see compat/run.py).

mod cases_data;
mod cases_service;

use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, FromRedisValue, Pipeline, RedisResult};

use cases_data::*;
use cases_service::*;

const TIMEOUT: Duration = Duration::from_secs(10);

type Check = Result<(), String>;

/// One mode's connection; cases send commands through it whatever the mode.
enum Conn {
    Sync(redis::Connection),
    Async(
        redis::aio::MultiplexedConnection,
        Arc<tokio::runtime::Runtime>,
    ),
    Cluster(redis::cluster::ClusterConnection),
}

impl Conn {
    fn q<T: FromRedisValue>(&mut self, c: &Cmd) -> RedisResult<T> {
        match self {
            Conn::Sync(con) => c.query(con),
            Conn::Cluster(con) => c.query(con),
            Conn::Async(con, rt) => rt.block_on(c.query_async(con)),
        }
    }

    fn p<T: FromRedisValue>(&mut self, p: &Pipeline) -> RedisResult<T> {
        match self {
            Conn::Sync(con) => p.query(con),
            Conn::Cluster(con) => p.query(con),
            Conn::Async(con, rt) => rt.block_on(p.query_async(con)),
        }
    }
}

struct Mode {
    name: &'static str,
    proto: u8,
    url: String,
    prefix: String,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Mode {
    fn key(&self, n: &str) -> String {
        format!("{}:{}:{}", self.prefix, self.name, n)
    }

    fn addr(&self) -> (String, u16) {
        let hp = self
            .url
            .trim_start_matches("redis://")
            .split('/')
            .next()
            .unwrap_or_default();
        let (h, p) = hp.rsplit_once(':').unwrap_or((hp, "6379"));
        (h.to_string(), p.parse().unwrap_or(6379))
    }

    fn cluster(&self) -> bool {
        self.name == "cluster"
    }

    fn connect(&self, replicas: bool) -> RedisResult<Conn> {
        match self.name {
            "sync" => {
                let con = redis::Client::open(self.url.as_str())?.get_connection()?;
                con.set_read_timeout(Some(TIMEOUT + TIMEOUT))?;
                Ok(Conn::Sync(con))
            }
            "async" => {
                let client = redis::Client::open(self.url.as_str())?;
                let cfg = redis::AsyncConnectionConfig::new()
                    .set_response_timeout(Some(TIMEOUT + TIMEOUT));
                let con = self
                    .rt
                    .block_on(client.get_multiplexed_async_connection_with_config(&cfg))?;
                Ok(Conn::Async(con, self.rt.clone()))
            }
            _ => {
                let proto = if self.proto == 3 {
                    redis::ProtocolVersion::RESP3
                } else {
                    redis::ProtocolVersion::RESP2
                };
                let mut b = redis::cluster::ClusterClient::builder(vec![self.url.clone()])
                    .use_protocol(proto)
                    .response_timeout(TIMEOUT + TIMEOUT);
                if replicas {
                    #[allow(deprecated)]
                    // its replacement names a strategy type; this reads as users write it
                    {
                        b = b.read_from_replicas();
                    }
                }
                Ok(Conn::Cluster(b.build()?.get_connection()?))
            }
        }
    }
}

fn eq<T: PartialEq + std::fmt::Debug>(label: &str, got: T, want: T) -> Check {
    if got == want {
        return Ok(());
    }
    let g = format!("{got:?}");
    Err(format!(
        "{label}: got {}, want {want:?}",
        &g[..g.len().min(200)]
    ))
}

fn e<T>(label: &str, r: RedisResult<T>) -> Result<T, String> {
    r.map_err(|err| format!("{label}: {err}"))
}

type CaseFn = fn(&mut Conn, &Mode) -> Check;

const CASES: &[(&str, CaseFn)] = &[
    ("handshake", handshake),
    ("types", types),
    ("crossslot-multikey", crossslot),
    ("pipeline-160", pipeline),
    ("multi-exec-watch", multi_watch),
    ("script", script),
    ("pubsub", pubsub),
    ("blocking-pop", blocking),
    ("scan", scan),
    ("concurrent-20", concurrent),
    ("big-value-2mb", big_value),
    ("health", health),
    ("replica-read", replica_read),
    ("info-role-master", info_role),
    ("wait-replica", wait_replica),
];

fn main() {
    let addr = std::env::var("COMPAT_PROXY").unwrap_or_else(|_| "127.0.0.1:7000".into());
    let prefix = std::env::var("COMPAT_PREFIX").unwrap_or_else(|_| "crust".into());
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime"),
    );
    for name in ["sync", "async", "cluster"] {
        for proto in [2u8, 3] {
            let q = if proto == 3 { "?protocol=resp3" } else { "" };
            let m = Mode {
                name,
                proto,
                url: format!("redis://{addr}/{q}"),
                prefix: format!("{prefix}:r{proto}"),
                rt: rt.clone(),
            };
            let label = format!("redis-rs/{name}/resp{proto}");
            let mut c = match m.connect(false) {
                Ok(c) => c,
                Err(err) => {
                    println!("FAIL {label}/connect: {err}");
                    continue;
                }
            };
            for (case, f) in CASES {
                match f(&mut c, &m) {
                    Ok(()) => println!("PASS {label}/{case}"),
                    Err(s) if s.starts_with("SKIP: ") => {
                        println!("SKIP {label}/{case}: {}", &s[6..])
                    }
                    Err(s) => println!("FAIL {label}/{case}: {}", s.replace('\n', " ")),
                }
            }
        }
    }
}
