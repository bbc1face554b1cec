//! A blocking facade for applications without an async runtime (and for the C
//! ABI): the same client, driven by a private tokio runtime with one worker
//! thread. Calls from any number of threads share the node connections; each
//! call blocks only its own thread.

use std::sync::Arc;

use bytes::Bytes;
use resp::Value;
use tokio::runtime::Runtime;

use crate::cmd::{Cmd, ToArg};
use crate::error::{Error, Result};
use crate::pipeline::Pipeline;
use crate::{Config, Stats};

/// A blocking client; `Clone + Send + Sync`, clones share everything.
///
/// Do not call it from inside an async task (blocking a runtime thread), and
/// do not drop the last clone there.
///
/// # Examples
///
/// ```no_run
/// let client = slotgate_client::blocking::Client::cluster(["127.0.0.1:7000"])?;
/// client.set("k", "v")?;
/// let mut p = slotgate_client::Pipeline::new();
/// p.cmd(["GET", "k"]);
/// let replies = client.execute(&p);
/// # Ok::<(), slotgate_client::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<Runtime>,
}

fn runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("slotgate-client")
        .enable_all()
        .build()
        .map_err(|e| Error::Io(e.to_string()))
}

impl Client {
    /// Connects to a cluster through any of `seeds`.
    pub fn cluster<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Result<Client> {
        Client::cluster_with(seeds, Config::default())
    }

    /// Connects to a cluster with explicit settings.
    pub fn cluster_with<S: Into<String>>(
        seeds: impl IntoIterator<Item = S>,
        cfg: Config,
    ) -> Result<Client> {
        let rt = runtime()?;
        let inner = rt.block_on(crate::Client::cluster_with(seeds, cfg))?;
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// Connects to one non-cluster node.
    pub fn single(addr: impl Into<String>) -> Result<Client> {
        let rt = runtime()?;
        let inner = rt.block_on(crate::Client::single(addr))?;
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// The async client underneath, sharing this client's connections. Its
    /// async methods need a tokio runtime; the blocking methods here provide one.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// Runs one command; see [`crate::Client::cmd`].
    pub fn cmd(&self, cmd: Cmd) -> Result<Value> {
        self.rt.block_on(self.inner.cmd(cmd))
    }

    /// Runs a pipeline; see [`crate::Client::execute`].
    pub fn execute(&self, pipeline: &Pipeline) -> Vec<Result<Value>> {
        self.rt.block_on(self.inner.execute(pipeline))
    }

    /// Counters; see [`crate::Client::stats`].
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// `GET key`.
    pub fn get(&self, key: impl ToArg) -> Result<Option<Bytes>> {
        self.rt.block_on(self.inner.get(key))
    }

    /// `SET key value`.
    pub fn set(&self, key: impl ToArg, value: impl ToArg) -> Result<()> {
        self.rt.block_on(self.inner.set(key, value))
    }

    /// `INCR key`.
    pub fn incr(&self, key: impl ToArg) -> Result<i64> {
        self.rt.block_on(self.inner.incr(key))
    }

    /// `EXPIRE key seconds`.
    pub fn expire(&self, key: impl ToArg, seconds: i64) -> Result<bool> {
        self.rt.block_on(self.inner.expire(key, seconds))
    }

    /// `HSET key field value`.
    pub fn hset(&self, key: impl ToArg, field: impl ToArg, value: impl ToArg) -> Result<i64> {
        self.rt.block_on(self.inner.hset(key, field, value))
    }

    /// `HGET key field`.
    pub fn hget(&self, key: impl ToArg, field: impl ToArg) -> Result<Option<Bytes>> {
        self.rt.block_on(self.inner.hget(key, field))
    }

    /// `DEL key...` across slots.
    pub fn del<K: ToArg + Sync>(&self, keys: &[K]) -> Result<i64> {
        self.rt.block_on(self.inner.del(keys))
    }

    /// `EXISTS key...` across slots.
    pub fn exists<K: ToArg + Sync>(&self, keys: &[K]) -> Result<i64> {
        self.rt.block_on(self.inner.exists(keys))
    }

    /// `MGET key...` across slots.
    pub fn mget<K: ToArg + Sync>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.rt.block_on(self.inner.mget(keys))
    }

    /// `MSET key value...` across slots.
    pub fn mset<K: ToArg + Sync, V: ToArg + Sync>(&self, pairs: &[(K, V)]) -> Result<()> {
        self.rt.block_on(self.inner.mset(pairs))
    }
}
