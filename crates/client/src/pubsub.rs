//! Pub/sub on dedicated connections.
//!
//! A subscribed connection stops being request/reply: the server pushes
//! messages whenever they are published. On the shared FIFO connection
//! those pushes would be taken for other callers' replies, so every
//! [`Subscription`] owns a connection of its own, closed when it is
//! dropped. A cluster forwards PUBLISH to every node, so any node would
//! do; SUBSCRIBE goes to the owner of its first channel's slot (where
//! PUBLISH is routed), PSUBSCRIBE to any node, and SSUBSCRIBE to the owner
//! of the channels' one slot, following MOVED. Under RESP3 the same frames arrive as `>` pushes.

use std::collections::VecDeque;

use ::topology::MAX_REDIRECTS;
use bytes::Bytes;
use resp::Value;

use crate::blockcmd::{lossy, redirect_target, target_of};
use crate::cmd::{Batch, Cmd, ToArg};
use crate::dedicated::Dedicated;
use crate::error::{Error, Result};
use crate::Inner;

/// Which family of subscribe commands a subscription uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// SUBSCRIBE / UNSUBSCRIBE.
    Channel,
    /// PSUBSCRIBE / PUNSUBSCRIBE.
    Pattern,
    /// SSUBSCRIBE / SUNSUBSCRIBE (shard channels).
    Shard,
}

impl Family {
    fn commands(self) -> (&'static str, &'static str) {
        match self {
            Family::Channel => ("SUBSCRIBE", "UNSUBSCRIBE"),
            Family::Pattern => ("PSUBSCRIBE", "PUNSUBSCRIBE"),
            Family::Shard => ("SSUBSCRIBE", "SUNSUBSCRIBE"),
        }
    }
}

/// One published message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published to.
    pub channel: Bytes,
    /// The pattern that matched, for pattern subscriptions.
    pub pattern: Option<Bytes>,
    /// The published payload.
    pub payload: Bytes,
}

/// A live subscription on its own connection; dropping it closes the
/// connection.
///
/// # Examples
///
/// ```no_run
/// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
/// let mut sub = client.subscribe(&["news"]).await?;
/// while let Some(msg) = sub.next().await {
///     let msg = msg?;
///     println!("{:?}: {:?}", msg.channel, msg.payload);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Subscription {
    conn: Dedicated,
    family: Family,
    /// Messages read while waiting for subscribe confirmations.
    queued: VecDeque<Message>,
    ended: bool,
}

/// What one frame on a subscribed connection means.
enum Event {
    Message(Message),
    /// A (p|s)subscribe confirmation.
    Subscribed,
    /// An unsubscribe confirmation with the subscriptions left.
    Unsubscribed(i64),
    Failed(Bytes),
    Other,
}

/// Opens a subscription of `family` to `channels` and waits until the
/// server confirmed every one, so messages published afterwards arrive.
pub(crate) async fn open<T: ToArg>(
    inner: &Inner,
    family: Family,
    channels: &[T],
) -> Result<Subscription> {
    if channels.is_empty() {
        return Err(Error::Invalid("no channel to subscribe to".into()));
    }
    let mut addr = target_of(inner, home_slot(family, channels)?)?;
    let mut cmd = Cmd::new(family.commands().0);
    for c in channels {
        cmd.push_arg(c);
    }
    let (segments, _) = encode(cmd);
    for _ in 0..=MAX_REDIRECTS {
        let mut sub = Subscription {
            conn: Dedicated::open(&addr, inner.connect_timeout, inner.resp3).await?,
            family,
            queued: VecDeque::new(),
            ended: false,
        };
        sub.conn.send(&segments).await?;
        match sub.confirm(channels.len()).await? {
            None => return Ok(sub),
            Some(text) => match redirect_target(inner, &addr, &text) {
                // ASK cannot apply: a subscription is not a key access.
                Some((to, _)) => addr = to,
                None => return Err(Error::Server(lossy(&text))),
            },
        }
    }
    Err(Error::RedirectLimit("subscribe".into()))
}

/// The slot whose owner serves the subscription: for SSUBSCRIBE the one
/// slot all channels hash to; for SUBSCRIBE the first channel's, where
/// `Client::cmd` sends its PUBLISH (delivered there without a bus hop);
/// none (any node) for patterns.
fn home_slot<T: ToArg>(family: Family, channels: &[T]) -> Result<Option<u16>> {
    match family {
        Family::Pattern => return Ok(None),
        Family::Channel => {
            return Ok(channels.first().map(|c| cluster::key_slot(&c.to_arg())));
        }
        Family::Shard => {}
    }
    let mut slots = channels.iter().map(|c| cluster::key_slot(&c.to_arg()));
    let first = slots.next();
    if slots.any(|s| Some(s) != first) {
        return Err(Error::Invalid(
            "CROSSSLOT shard channels don't hash to the same slot".into(),
        ));
    }
    Ok(first)
}

fn encode(cmd: Cmd) -> (Vec<Bytes>, usize) {
    let mut batch = Batch::default();
    batch.push(&cmd.freeze(), false);
    batch.finish()
}

impl Subscription {
    /// Reads `n` confirmations, queueing any message seen meanwhile;
    /// `Some(error text)` if the server refused.
    async fn confirm(&mut self, mut n: usize) -> Result<Option<Bytes>> {
        while n > 0 {
            match classify(self.conn.read().await?) {
                Event::Subscribed => n -= 1,
                Event::Message(m) => self.queued.push_back(m),
                Event::Failed(text) => return Ok(Some(text)),
                Event::Unsubscribed(_) | Event::Other => {}
            }
        }
        Ok(None)
    }

    /// The next message; `None` once every channel was unsubscribed (by
    /// [`Subscription::unsubscribe`] or by the server, e.g. when a shard
    /// channel's slot moved) or after a connection error was returned.
    /// Cancel-safe: dropping the future (e.g. in `select!`) loses no message.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let mut sub = client.psubscribe(&["news.*"]).await?;
    /// if let Some(Ok(msg)) = sub.next().await {
    ///     assert!(msg.pattern.is_some());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<Result<Message>> {
        if let Some(m) = self.queued.pop_front() {
            return Some(Ok(m));
        }
        while !self.ended {
            let frame = match self.conn.read().await {
                Ok(v) => v,
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            };
            match classify(frame) {
                Event::Message(m) => return Some(Ok(m)),
                Event::Unsubscribed(0) => self.ended = true,
                Event::Failed(text) => return Some(Err(Error::Server(lossy(&text)))),
                Event::Subscribed | Event::Unsubscribed(_) | Event::Other => {}
            }
        }
        None
    }

    /// Unsubscribes from `channels` (all of them when empty). Messages
    /// already on their way may still be returned by
    /// [`Subscription::next`], which ends once nothing is subscribed.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let mut sub = client.subscribe(&["a", "b"]).await?;
    /// sub.unsubscribe(&["a"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unsubscribe<T: ToArg>(&mut self, channels: &[T]) -> Result<()> {
        let mut cmd = Cmd::new(self.family.commands().1);
        for c in channels {
            cmd.push_arg(c);
        }
        let (segments, _) = encode(cmd);
        self.conn.send(&segments).await
    }
}

/// Reads a subscribed connection's frame (RESP2 array or RESP3 push).
fn classify(frame: Value) -> Event {
    let items = match frame {
        Value::Array(items) | Value::Push(items) => items,
        Value::Error(text) => return Event::Failed(text),
        _ => return Event::Other,
    };
    let text = |i: usize| match items.get(i) {
        Some(Value::BulkString(b) | Value::SimpleString(b)) => Some(b.clone()),
        _ => None,
    };
    let Some(kind) = text(0) else {
        return Event::Other;
    };
    match (kind.to_ascii_lowercase().as_slice(), items.len()) {
        (b"message" | b"smessage", 3) => message(None, text(1), text(2)),
        (b"pmessage", 4) => message(text(1), text(2), text(3)),
        (b"subscribe" | b"psubscribe" | b"ssubscribe", _) => Event::Subscribed,
        (b"unsubscribe" | b"punsubscribe" | b"sunsubscribe", 3) => match items.get(2) {
            Some(Value::Integer(left)) => Event::Unsubscribed(*left),
            _ => Event::Other,
        },
        _ => Event::Other,
    }
}

fn message(pattern: Option<Bytes>, channel: Option<Bytes>, payload: Option<Bytes>) -> Event {
    match (channel, payload) {
        (Some(channel), Some(payload)) => Event::Message(Message {
            channel,
            pattern,
            payload,
        }),
        _ => Event::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn classifies_resp2_and_resp3_frames() {
        let msg = Value::Array(vec![bulk("message"), bulk("c"), bulk("hi")]);
        assert!(matches!(classify(msg), Event::Message(m) if m.payload == "hi"));
        let pmsg = Value::Push(vec![bulk("pmessage"), bulk("c.*"), bulk("c.1"), bulk("x")]);
        assert!(matches!(classify(pmsg),
            Event::Message(m) if m.pattern.as_deref() == Some(&b"c.*"[..]) && m.channel == "c.1"));
        let unsub = Value::Push(vec![bulk("sunsubscribe"), bulk("c"), Value::Integer(0)]);
        assert!(matches!(classify(unsub), Event::Unsubscribed(0)));
        let sub = Value::Array(vec![bulk("subscribe"), bulk("c"), Value::Integer(1)]);
        assert!(matches!(classify(sub), Event::Subscribed));
        assert!(matches!(classify(Value::Integer(1)), Event::Other));
    }

    #[test]
    fn shard_channels_must_share_a_slot() {
        assert_eq!(home_slot(Family::Pattern, &["a", "b"]), Ok(None));
        let same = home_slot(Family::Shard, &["{t}a", "{t}b"]);
        assert_eq!(same, Ok(Some(cluster::key_slot(b"t"))));
        assert!(matches!(
            home_slot(Family::Shard, &["a", "b"]),
            Err(Error::Invalid(_))
        ));
    }
}
