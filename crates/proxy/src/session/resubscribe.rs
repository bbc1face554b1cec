//! Shard channels that survive a failover or a slot migration.
//!
//! When a node loses a slot (its master was failed over, or the slot migrated), Redis drops
//! the shard-channel subscriptions of that slot and tells each subscriber with a
//! `sunsubscribe` it never asked for. A client of a single Redis server never sees that
//! happen, so the proxy hides it:
//!
//! ```text
//!   unsolicited sunsubscribe C ─▶ hidden; C is "silent" ─▶ SSUBSCRIBE C to the slot's owner
//!      ├─ -MOVED slot addr (the map was stale) ─▶ hidden; patch the map; SSUBSCRIBE C at addr
//!      └─ ssubscribe C n ─▶ hidden; C is live again
//! ```
//!
//! A `-MOVED` answering the client's own SSUBSCRIBE (sent on a stale map) is followed the
//! same way: the command goes to the slot's owner, within `max_redirects` hops.
//!
//! The client may unsubscribe meanwhile, and its SUNSUBSCRIBE may go to another node than
//! the resubscription (the map changed between them). The client gets exactly the
//! confirmations Redis would send, one per channel it named (or had, without names), each
//! `owed` until one arrives; the nodes' others are hidden:
//!
//! ```text
//!   SUNSUBSCRIBE C ─▶ C owed ─▶ first `sunsubscribe C` from any node: to the client
//!                               later ones (the node's unsolicited drop, our own): hidden
//!                    sync markers all back, C still owed ─▶ the proxy confirms C itself
//!   silent C confirmed, C no longer wanted ─▶ hidden SUNSUBSCRIBE C on that connection
//! ```
//!
//! Until such a resubscription is dropped again the session reads no further command
//! (`ClientPubSub::syncing`): whether the client left subscribed mode depends on it.
//!
//! Messages published between the drop and the resubscription are lost, as they would be
//! for any Redis client that resubscribes; messages after it are delivered.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use cluster::redirect::{parse_redirect, Host, Redirect};
use resp::Request;

use crate::route::PubSubTarget;
use crate::session::client::Client;
use crate::session::pubsub::{ClientPubSub, PubSub};
use crate::session::pubsub_frame::Confirmation;

// === impl Session (shard resubscription) ===

impl ClientPubSub {
    /// Track which shard channels the client wants, from its SSUBSCRIBE/SUNSUBSCRIBE.
    pub(crate) fn note_shard_command(&mut self, req: &Request) {
        let name = req.arg(0).to_ascii_lowercase();
        let p = self.subs.get_or_insert_with(PubSub::default);
        let channels = (1..req.argc()).map(|i| req.arg_bytes(i));
        match name.as_slice() {
            b"ssubscribe" => p.wanted.extend(channels),
            b"sunsubscribe" if req.argc() == 1 => {
                p.wanted.clear();
                p.unsub_all = Some(false);
                let had = p.shard_confirmed.iter().enumerate();
                p.owed = had.map(|(i, c)| (c.clone(), (1, i))).collect();
            }
            b"sunsubscribe" => {
                p.owed.clear();
                for (i, c) in channels.enumerate() {
                    p.wanted.remove(&c);
                    p.owed.entry(c).or_insert((0, i)).0 += 1;
                }
            }
            _ => {}
        }
    }

    /// True if the confirmation is about a silent resubscription and must be hidden.
    pub(crate) fn resubscribe_on_confirmation(
        &mut self,
        client: &Client,
        c: &Confirmation,
    ) -> bool {
        let Some(p) = self.subs.as_mut() else {
            return false;
        };
        match c.kind.as_ref() {
            b"sunsubscribe" if p.wanted.contains(&c.channel) => {
                client.worker.topology().request_refresh_now();
                let slot = client.worker.shared.placement.slot(&c.channel);
                if let Some(conn) = self.shard_connection(client, slot) {
                    conn.send(Self::shard_frame(client, b"SSUBSCRIBE", &[&c.channel]));
                    self.note_silent(&c.channel, &conn.addr);
                }
                true
            }
            b"ssubscribe" if p.silent.contains_key(&c.channel) => {
                let to = p.silent.remove(&c.channel);
                if !p.wanted.contains(&c.channel) {
                    // The client unsubscribed meanwhile, on another node: drop it here too.
                    let conn = p.shards.iter().find(|s| Some(&s.addr) == to.as_ref());
                    if let Some(conn) = conn.cloned() {
                        p.syncs += 1;
                        conn.send(Self::shard_frame(client, b"SUNSUBSCRIBE", &[&c.channel]));
                        conn.send(crate::backend::Outgoing::stream(
                            Bytes::from_static(crate::session::pubsub_frame::SYNC_PING),
                            client.cell.clone(),
                        ));
                    }
                }
                true
            }
            b"sunsubscribe" if !c.channel.is_empty() => match p.owed.get_mut(&c.channel) {
                Some((n, _)) => {
                    *n -= 1;
                    if *n == 0 {
                        p.owed.remove(&c.channel);
                    }
                    if let Some(answered) = p.unsub_all.as_mut() {
                        *answered = true;
                    }
                    false
                }
                // Not asked for and not wanted: the node dropped a channel the client had
                // already let go of (its slot moved), or the answer to our own drop above.
                None => true,
            },
            // "Nothing to unsubscribe" while the client is owed the channels it had (a node
            // dropped them when their slot moved): they are confirmed instead, by a node or
            // by the proxy once every sync marker is back.
            b"sunsubscribe" if !p.owed.is_empty() => true,
            // "Nothing to unsubscribe" from a connection whose last channel the node dropped
            // (slot moved) while the client's SUNSUBSCRIBE was on its way: the channel's own
            // confirmation already answered it, and Redis sends one or the other, never both.
            b"sunsubscribe" if p.unsub_all == Some(true) => true,
            b"sunsubscribe" => {
                if let Some(answered) = p.unsub_all.as_mut() {
                    *answered = true;
                }
                false
            }
            _ => false,
        }
    }

    /// Remember that `channel` is being resubscribed at `addr` (once per channel).
    fn note_silent(&mut self, channel: &Bytes, addr: &Rc<str>) {
        let p = self.subs.get_or_insert_with(PubSub::default);
        p.silent.insert(channel.clone(), addr.clone());
    }

    /// True if `frame`, from subscription connection `source`, is a MOVED answering a
    /// silent resubscription: followed and hidden. Only the channels of that slot whose
    /// SSUBSCRIBE went to that connection's node are sent again, in one SSUBSCRIBE: each of
    /// their MOVED replies would otherwise resend them all, and the node would confirm each
    /// channel once per resend (extra confirmations the client never asked for).
    pub(crate) fn resubscribe_on_moved(
        &mut self,
        client: &Client,
        source: usize,
        frame: &Bytes,
    ) -> bool {
        let Some(p) = self.subs.as_ref() else {
            return false;
        };
        if p.silent.is_empty() || !frame.starts_with(b"-MOVED ") {
            return false;
        }
        let from = p.shards.iter().find(|c| Rc::as_ptr(c) as usize == source);
        let from = from.map(|c| c.addr.clone());
        let Some((slot, addr)) = Self::moved_target(client, frame, from.as_deref()) else {
            return false;
        };
        // Channels the client let go of meanwhile are sent too: the other MOVED replies on
        // their way are recognised by the resubscriptions still pending, and the new
        // owner's confirmation drops them again (`resubscribe_on_confirmation`).
        let again: Vec<Bytes> = p
            .silent
            .iter()
            .filter(|(ch, to)| {
                client.worker.shared.placement.slot(ch) == slot && Some(*to) == from.as_ref()
            })
            .map(|(ch, _)| ch.clone())
            .collect();
        let version = client.worker.map().version();
        client.worker.topology().learn_moved(slot, &addr, version);
        if again.is_empty() {
            return true; // already sent where this MOVED points
        }
        let Some(conn) = self.shard_connection(client, slot) else {
            return true;
        };
        let channels: Vec<&[u8]> = again.iter().map(|c| &c[..]).collect();
        conn.send(Self::shard_frame(client, b"SSUBSCRIBE", &channels));
        again.iter().for_each(|ch| self.note_silent(ch, &conn.addr));
        true
    }

    /// A `-MOVED` answering the client's last pub/sub command (SSUBSCRIBE on a stale map):
    /// learn the slot's owner and send the command there, hidden from the client, which
    /// gets the new owner's confirmations instead.
    pub(crate) fn resend_on_moved(
        &mut self,
        client: &Client,
        source: usize,
        frame: &Bytes,
    ) -> bool {
        let Some((sent, PubSubTarget::Shard(Some(_)))) =
            self.subs.as_ref().and_then(|p| p.last_sent.clone())
        else {
            return false;
        };
        let max = client.worker.live().config.cluster.max_redirects;
        let Some(p) = self.subs.as_mut().filter(|p| p.moved_resends < max) else {
            // The hop budget is spent: the client gets the node's MOVED, never a hot loop.
            return false;
        };
        p.moved_resends += 1;
        let from = p.shards.iter().find(|c| Rc::as_ptr(c) as usize == source);
        let from = from.map(|c| c.addr.clone());
        let Some((slot, addr)) = Self::moved_target(client, frame, from.as_deref()) else {
            return false;
        };
        let version = client.worker.map().version();
        client.worker.topology().learn_moved(slot, &addr, version);
        self.send(client, sent, PubSubTarget::Shard(Some(slot)));
        true
    }

    /// The slot and new owner named by a `-MOVED` frame from the subscription connection
    /// to `from` (`SlotMap::redirect_addr`). None for another frame, or a `?` the map
    /// cannot resolve (a refresh is asked for; the client gets the MOVED).
    fn moved_target(client: &Client, frame: &Bytes, from: Option<&str>) -> Option<(u16, String)> {
        if !frame.starts_with(b"-MOVED ") {
            return None;
        }
        let line = frame.get(1..frame.len().saturating_sub(2))?;
        let Some(Redirect::Moved { slot, to }) = parse_redirect(line) else {
            return None;
        };
        let map = client.worker.map();
        let addr = match (to.host, from) {
            (Host::Same, None) => None,
            (_, from) => map.redirect_addr(to, from.unwrap_or_default()),
        };
        if addr.is_none() {
            client.worker.topology().request_refresh_now();
        }
        Some((slot, addr?))
    }

    /// `SSUBSCRIBE` or `SUNSUBSCRIBE` of `channels`, for a subscription connection.
    fn shard_frame(client: &Client, name: &[u8], channels: &[&[u8]]) -> crate::backend::Outgoing {
        let mut frame = BytesMut::new();
        let mut args: Vec<&[u8]> = vec![name];
        args.extend_from_slice(channels);
        resp::encode_command(&mut frame, &args);
        crate::backend::Outgoing::stream(frame.freeze(), client.cell.clone())
    }
}

impl PubSub {
    /// The `sunsubscribe` confirmations still owed once every sync marker is back: no node
    /// sent them (each had dropped the channel when its slot moved), so the proxy does, as
    /// Redis would have, each with the count left.
    pub(crate) fn confirm_owed(&mut self, resp3: bool) -> Bytes {
        let mut out = BytesMut::new();
        let mut owed: Vec<(Bytes, (u32, usize))> = self.owed.drain().collect();
        owed.sort_by_key(|(_, (_, at))| *at);
        for (channel, (times, _)) in owed {
            self.shard_confirmed.remove(&channel);
            for _ in 0..times {
                out.extend_from_slice(if resp3 { b">3\r\n" } else { b"*3\r\n" });
                resp::write_bulk(&mut out, b"sunsubscribe");
                resp::write_bulk(&mut out, &channel);
                resp::write_int(&mut out, self.shard_confirmed.len() as i64);
            }
        }
        out.freeze()
    }
}
