//! Typed helpers for common commands, on top of `Client::cmd`/`execute`.
//!
//! Multi-key helpers (MGET, MSET, DEL, EXISTS) split their keys by slot and
//! run one command per slot in a single pipeline, so they work across a
//! cluster; the answer is reassembled in the caller's key order. Such a split
//! call is not atomic across slots (nor could it be in Redis Cluster).

use bytes::Bytes;
use resp::Value;

use crate::client::Client;
use crate::cmd::{Cmd, ToArg};
use crate::error::{Error, Result};
use crate::pipeline::Pipeline;

/// A bulk or simple string as bytes; `None` for a null.
pub(crate) fn opt_bytes(v: Value) -> Result<Option<Bytes>> {
    match v {
        Value::BulkString(b) | Value::SimpleString(b) => Ok(Some(b)),
        Value::Null | Value::NullArray => Ok(None),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

pub(crate) fn int(v: Value) -> Result<i64> {
    v.as_int()
        .ok_or_else(|| Error::UnexpectedReply(format!("{v:?}")))
}

pub(crate) fn unit(v: Value) -> Result<()> {
    match v {
        Value::SimpleString(_) => Ok(()),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

/// Key indices grouped by slot, groups in order of first appearance.
fn by_slot<K: ToArg>(keys: &[K]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let slot = cluster::key_slot(&k.to_arg());
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, g)) => g.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

impl Client {
    /// `GET key`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(c: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let v: Option<bytes::Bytes> = c.get("k").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, key: impl ToArg) -> Result<Option<Bytes>> {
        opt_bytes(self.cmd(Cmd::new("GET").arg(key)).await?)
    }

    /// `SET key value`.
    pub async fn set(&self, key: impl ToArg, value: impl ToArg) -> Result<()> {
        unit(self.cmd(Cmd::new("SET").arg(key).arg(value)).await?)
    }

    /// `INCR key`: the new value.
    pub async fn incr(&self, key: impl ToArg) -> Result<i64> {
        int(self.cmd(Cmd::new("INCR").arg(key)).await?)
    }

    /// `EXPIRE key seconds`: whether a timeout was set.
    pub async fn expire(&self, key: impl ToArg, seconds: i64) -> Result<bool> {
        Ok(int(self.cmd(Cmd::new("EXPIRE").arg(key).arg(seconds)).await?)? == 1)
    }

    /// `HSET key field value`: fields added.
    pub async fn hset(&self, key: impl ToArg, field: impl ToArg, value: impl ToArg) -> Result<i64> {
        int(self
            .cmd(Cmd::new("HSET").arg(key).arg(field).arg(value))
            .await?)
    }

    /// `HGET key field`.
    pub async fn hget(&self, key: impl ToArg, field: impl ToArg) -> Result<Option<Bytes>> {
        opt_bytes(self.cmd(Cmd::new("HGET").arg(key).arg(field)).await?)
    }

    /// `DEL key...` across slots: keys removed.
    pub async fn del<K: ToArg>(&self, keys: &[K]) -> Result<i64> {
        self.sum_by_slot("DEL", keys).await
    }

    /// `EXISTS key...` across slots: how many exist.
    pub async fn exists<K: ToArg>(&self, keys: &[K]) -> Result<i64> {
        self.sum_by_slot("EXISTS", keys).await
    }

    /// `MGET key...` across slots, values in key order.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(c: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let vals = c.mget(&["a", "b", "c"]).await?;
    /// assert_eq!(vals.len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn mget<K: ToArg>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let groups = by_slot(keys);
        let mut p = Pipeline::with_capacity(groups.len());
        for g in &groups {
            p.add(g.iter().fold(Cmd::new("MGET"), |c, &i| c.arg(&keys[i])));
        }
        let mut out = vec![None; keys.len()];
        for (g, reply) in groups.iter().zip(self.execute(&p).await) {
            let reply = reply?;
            let values = reply
                .as_array()
                .filter(|a| a.len() == g.len())
                .ok_or_else(|| Error::UnexpectedReply(format!("{reply:?}")))?;
            for (&i, v) in g.iter().zip(values) {
                out[i] = opt_bytes(v.clone())?;
            }
        }
        Ok(out)
    }

    /// `MSET key value...` across slots (atomic per slot only).
    pub async fn mset<K: ToArg, V: ToArg>(&self, pairs: &[(K, V)]) -> Result<()> {
        let keys: Vec<&K> = pairs.iter().map(|(k, _)| k).collect();
        let mut p = Pipeline::new();
        for g in by_slot(&keys) {
            p.add(g.iter().fold(Cmd::new("MSET"), |c, &i| {
                c.arg(&pairs[i].0).arg(&pairs[i].1)
            }));
        }
        for reply in self.execute(&p).await {
            unit(reply?)?;
        }
        Ok(())
    }

    async fn sum_by_slot<K: ToArg>(&self, name: &str, keys: &[K]) -> Result<i64> {
        let mut p = Pipeline::new();
        for g in by_slot(keys) {
            p.add(g.iter().fold(Cmd::new(name), |c, &i| c.arg(&keys[i])));
        }
        let mut total = 0;
        for reply in self.execute(&p).await {
            total += int(reply?)?;
        }
        Ok(total)
    }
}
