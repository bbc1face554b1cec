//! CLIENT TRACKING through the proxy, for RESP3 clients: BCAST mode, and the default mode
//! with OPTIN/OPTOUT (`tracking/keys.rs`).
//!
//! The worker's tracking hub (`tracking/hub.rs`) keeps one connection per master tracking
//! every key (BCAST, no prefix), shared by all of the worker's tracking clients; each
//! session keeps what its client asked for and passes on only the invalidations it is owed:
//!
//! ```text
//!   CLIENT TRACKING ON BCAST [PREFIX p…] ─▶ prefixes checked as Redis checks them
//!        (no overlap); the session joins the hub ─▶ the client's +OK once every master's
//!        hub connection answered (nothing later is read before it)
//!   >2 invalidate [keys] from any master ─▶ the keys under the client's prefixes
//!   a connection breaks ─▶ >2 invalidate (null): flush everything; a new master's
//!        connection, once it answers +OK ─▶ another flush (what changed in the gap)
//! ```
//!
//! The default mode tracks the keys the client read. Its reads run on shared connections,
//! which the nodes cannot tell apart, so the session keeps the client's keys itself,
//! passing on only their invalidations, queued behind the replies owed
//! (`tracking/keys.rs`). REDIRECT hands them to another client, on any worker
//! (`tracking/redirect.rs`): that is how a RESP2 client tracks. A user confined to some
//! keys hears of those only. NOLOOP is accepted; the client's own writes still invalidate
//! its keys (one invalidation too many is safe, one too few is not).

use bytes::Bytes;
use resp::Request;

use crate::context::registry::Recipient;
use crate::reply::error;
use crate::session::client::Client;
use crate::session::held::Intake;
use crate::session::queue::Entry;
use crate::session::tracking::hub::{TrackingHub, HUB_FLUSH};
use crate::session::tracking::keys::{KeyTable, Mode};
use crate::session::tracking::redirect::NO_SUCH_CLIENT;

mod hub;
mod keys;
pub(crate) mod redirect;

/// A session's part in tracking.
pub(crate) struct Tracking {
    /// The worker's tracking connections, which this session listens to.
    hub: std::rc::Rc<TrackingHub>,
    /// BCAST's prefixes, sorted (`prefix_of`): they add up, as in Redis; `""` (BCAST
    /// without PREFIX) stands for every key.
    prefixes: Vec<Bytes>,
    /// The client's CLIENT TRACKING reply, owed once every master answered.
    reply_seq: Option<u64>,
    /// The keys the client read, in the default mode (None: BCAST).
    keys: Option<KeyTable>,
    /// REDIRECT's target: the client that gets the invalidations (`tracking/redirect.rs`).
    redirect: Option<Recipient>,
}

/// What a `CLIENT TRACKING …` asks for.
enum Ask {
    Off,
    /// On: BCAST's prefixes (`""` when none was given), the key table's mode (None: BCAST),
    /// and the REDIRECT target's id.
    On(Vec<Bytes>, Option<Mode>, Option<u64>),
    Refuse(Bytes),
}

/// The options of `CLIENT TRACKING ON|OFF …`.
#[derive(Default)]
struct Options<'a> {
    bcast: bool,
    optin: bool,
    optout: bool,
    redirect: Option<u64>,
    prefixes: Vec<&'a [u8]>,
}

fn options(req: &Request) -> Result<Options<'_>, Bytes> {
    let mut o = Options::default();
    let mut i = 3;
    while i < req.argc() {
        let opt = req.arg(i).to_ascii_lowercase();
        match opt.as_slice() {
            b"bcast" => o.bcast = true,
            b"optin" => o.optin = true,
            b"optout" => o.optout = true,
            b"noloop" => {}
            b"prefix" if i + 1 < req.argc() => {
                o.prefixes.push(req.arg(i + 1));
                i += 1;
            }
            b"redirect" if i + 1 < req.argc() => {
                if o.redirect.is_some() {
                    return Err(error("A client can only redirect to a single other client"));
                }
                let id = std::str::from_utf8(req.arg(i + 1)).ok();
                let Some(id) = id.and_then(|id| id.parse::<u64>().ok()) else {
                    return Err(error("value is not an integer or out of range"));
                };
                (o.redirect, i) = (Some(id), i + 1);
            }
            _ => return Err(error("syntax error")),
        }
        i += 1;
    }
    Ok(o)
}

/// What `req` asks for, given the mode tracking is in now (`current`: None when off,
/// Some(None) in BCAST mode), with Redis's errors in Redis's order.
fn parse(req: &Request, current: Option<Option<Mode>>) -> Ask {
    let switch = if req.argc() > 2 { req.arg(2) } else { b"" };
    let on = switch.eq_ignore_ascii_case(b"on");
    if !on && !switch.eq_ignore_ascii_case(b"off") {
        return Ask::Refuse(error("syntax error"));
    }
    let o = match options(req) {
        Ok(o) => o,
        Err(e) => return Ask::Refuse(e),
    };
    if !on {
        return Ask::Off;
    }
    let mode = match (o.optin, o.optout) {
        (true, _) => Mode::OptIn,
        (_, true) => Mode::OptOut,
        _ => Mode::All,
    };
    let refusal = if !o.bcast && !o.prefixes.is_empty() {
        "PREFIX option requires BCAST mode to be enabled"
    } else if current.is_some_and(|c| c.is_none() != o.bcast) {
        "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    } else if o.bcast && (o.optin || o.optout) {
        "OPTIN and OPTOUT are not compatible with BCAST"
    } else if o.optin && o.optout {
        "You can't specify both OPTIN mode and OPTOUT mode"
    } else if current
        .flatten()
        .is_some_and(|c| c != Mode::All && mode != Mode::All && c != mode)
    {
        "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    } else {
        ""
    };
    if !refusal.is_empty() {
        return Ask::Refuse(error(refusal));
    }
    let mut prefixes: Vec<Bytes> = o
        .prefixes
        .iter()
        .map(|p| Bytes::copy_from_slice(p))
        .collect();
    if o.bcast && prefixes.is_empty() {
        prefixes.push(Bytes::new());
    }
    Ask::On(prefixes, (!o.bcast).then_some(mode), o.redirect)
}

/// Redis's `checkPrefixCollisionsOrReply`: two prefixes overlap when one starts the other
/// (so both would invalidate the same key). Redis 7.0 answers an overlap inside the new
/// list past its first prefix with the error and then +OK; the proxy answers the error.
///
/// A client chooses how many prefixes it sends, and Redis compares every pair. Here the
/// usual case, no overlap, is found in O(n log n): sorted, an overlapping pair always has
/// one adjacent. Only a request that is refused searches for the pair Redis names, in
/// Redis's order and within a bounded number of comparisons; past it the reply names an
/// adjacent pair instead.
fn check_prefixes(existing: &[Bytes], new: &[Bytes]) -> Result<(), Bytes> {
    let mut all: Vec<&[u8]> = existing.iter().map(|p| p.as_ref()).collect();
    all.extend(new.iter().filter(|p| !p.is_empty()).map(|p| p.as_ref()));
    all.sort_unstable();
    let Some(adjacent) = all.windows(2).find(|w| overlap(w[0], w[1])) else {
        return Ok(());
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let refuse = |p: &[u8], other: &[u8], kind: &str| {
        Err(error(&format!(
            "Prefix '{}' overlaps with {kind} '{}'. Prefixes for a single client must not overlap.",
            text(p),
            text(other)
        )))
    };
    let mut budget: usize = 1 << 20;
    for (i, p) in new.iter().enumerate() {
        if p.is_empty() {
            // BCAST without PREFIX: Redis does not check it.
            continue;
        }
        for (list, kind) in [
            (existing, "an existing prefix"),
            (&new[i + 1..], "another provided prefix"),
        ] {
            for other in list {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    return refuse(adjacent[1], adjacent[0], "another provided prefix");
                }
                if overlap(p, other) {
                    return refuse(p, other, kind);
                }
            }
        }
    }
    // The overlap was between prefixes given before (an empty one and others): allowed, as
    // Redis checks only what a call adds.
    Ok(())
}

fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Which of `prefixes` (sorted, without overlap) `key` is under, if any: only the
/// greatest prefix not above the key can start it.
fn prefix_of(prefixes: &[Bytes], key: &[u8]) -> Option<usize> {
    let i = prefixes.partition_point(|p| p.as_ref() <= key);
    (i > 0 && key.starts_with(&prefixes[i - 1])).then(|| i - 1)
}

// === impl Session (client tracking) ===

/// The client's tracking: off (None) until CLIENT TRACKING ON.
#[derive(Default)]
pub(crate) struct ClientTracking(Option<Box<Tracking>>);

impl ClientTracking {
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// CLIENT TRACKING: answered once every master's connection answered (or at once).
    pub(crate) fn command(&mut self, client: &Client, intake: &mut Intake, req: &Request) {
        let current = self.0.as_ref().map(|t| t.keys.as_ref().map(KeyTable::mode));
        match parse(req, current) {
            Ask::Refuse(err) => client.reply_now(err),
            Ask::Off => {
                self.off(client);
                client.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Ask::On(prefixes, mode, redirect) => {
                let redirect =
                    match redirect.map(|id| redirect::recipient(&client.worker.shared, id)) {
                        Some(None) => return client.reply_now(error(NO_SUCH_CLIENT)),
                        found => found.flatten(),
                    };
                match self.0.is_some() {
                    true => self.again(client, prefixes, mode, redirect),
                    false => self.on(client, intake, prefixes, mode, redirect),
                }
            }
        }
    }

    fn on(
        &mut self,
        client: &Client,
        intake: &mut Intake,
        prefixes: Vec<Bytes>,
        mode: Option<Mode>,
        redirect: Option<Recipient>,
    ) {
        if let Err(e) = check_prefixes(&[], &prefixes) {
            return client.reply_now(e);
        }
        let mut prefixes = prefixes;
        prefixes.sort_unstable();
        let seq = client.cell.push(Entry::pending_local());
        let hub = TrackingHub::of_this_worker();
        hub.subscribe(&client.cell);
        self.0 = Some(Box::new(Tracking {
            hub,
            prefixes,
            reply_seq: Some(seq),
            keys: mode.map(KeyTable::new),
            redirect,
        }));
        *intake = Intake::Serial;
        self.follow(client);
    }

    /// CLIENT TRACKING ON while on: as in Redis, the tracked keys stay, the options are the
    /// new ones, and in BCAST mode the new prefixes add to the old.
    fn again(
        &mut self,
        client: &Client,
        prefixes: Vec<Bytes>,
        mode: Option<Mode>,
        redirect: Option<Recipient>,
    ) {
        let Some(t) = self.0.as_mut() else {
            return;
        };
        if t.keys.is_none() {
            if let Err(e) = check_prefixes(&t.prefixes, &prefixes) {
                return client.reply_now(e);
            }
            t.prefixes.extend(prefixes);
            t.prefixes.sort_unstable();
        }
        t.redirect = redirect;
        if let (Some(keys), Some(mode)) = (t.keys.as_mut(), mode) {
            keys.set_mode(mode);
        }
        client.reply_now(Bytes::from_static(b"+OK\r\n"));
    }

    /// Leave the hub (CLIENT TRACKING OFF, RESET, the session's end); the last session to
    /// leave closes its connections.
    pub(crate) fn off(&mut self, client: &Client) {
        if let Some(t) = self.0.take() {
            t.hub.unsubscribe(&client.cell);
        }
    }

    /// Keep the hub's connections matched to the masters, and answer CLIENT TRACKING once
    /// they are all set up.
    pub(crate) fn follow(&mut self, client: &Client) {
        let Some(t) = self.0.as_ref() else {
            return;
        };
        t.hub.follow(&client.worker);
        self.answer(client);
    }

    /// A frame from `source`: None if that is not the hub's, else whether the frame goes to
    /// the client as it is (an invalidation it is owed whole).
    pub(crate) fn frame(&mut self, client: &Client, source: usize, frame: &Bytes) -> Option<bool> {
        let live = std::sync::Arc::clone(&client.worker.live());
        // A user confined to some keys hears of those only: BCAST would name every key.
        let confined = client
            .login
            .user()
            .and_then(|i| live.users.get(i))
            .filter(|u| !u.all_keys());
        let t = self.0.as_mut()?;
        if source != HUB_FLUSH && !t.hub.owns(source) {
            return None;
        }
        if frame.first() != Some(&b'>') {
            return Some(false);
        }
        let push = match t.keys.as_mut() {
            Some(keys) => keys.filter(frame),
            None => {
                // Sorted: BCAST without PREFIX (the empty prefix) comes first.
                let every = t.prefixes.first().is_some_and(|p| p.is_empty());
                if every && confined.is_none() {
                    if t.redirect.is_none() && client.resp3() {
                        // BCAST of every key to the client itself: as it comes.
                        return Some(true);
                    }
                    Some(frame.clone())
                } else if every {
                    keys::keep_only(frame, |k| confined.is_none_or(|u| u.may_access(k)))
                } else {
                    // One message per prefix that has keys, in the prefixes' order, as
                    // Redis sends BCAST invalidations (clients and tests count them).
                    let prefixes = &t.prefixes;
                    let per_prefix = keys::split_by(frame, |k| {
                        prefix_of(prefixes, k).filter(|_| confined.is_none_or(|u| u.may_access(k)))
                    });
                    if let Some(t) = self.0.as_ref() {
                        for push in per_prefix {
                            redirect::deliver(
                                t.redirect.as_ref(),
                                push,
                                client.resp3(),
                                &client.cell,
                            );
                        }
                    }
                    None
                }
            }
        };
        if let (Some(push), Some(t)) = (push, self.0.as_ref()) {
            redirect::deliver(t.redirect.as_ref(), push, client.resp3(), &client.cell);
        }
        Some(false)
    }

    /// The client's CLIENT TRACKING reply, once every master's hub connection answered; a
    /// refusal turns tracking off again.
    fn answer(&mut self, client: &Client) {
        let Some(t) = self.0.as_mut() else {
            return;
        };
        let (Some(seq), Some(ready)) = (t.reply_seq, t.hub.ready()) else {
            return;
        };
        t.reply_seq = None;
        let reply = match ready {
            Ok(()) => Bytes::from_static(b"+OK\r\n"),
            Err(refused) => {
                self.off(client);
                refused
            }
        };
        client.cell.deliver_local(seq, reply);
    }

    /// CLIENT CACHING yes|no, for the next command (OPTIN/OPTOUT).
    pub(crate) fn caching(&mut self, client: &Client, req: &Request) {
        let arg = if req.argc() == 3 { req.arg(2) } else { b"" };
        let answer = match self.0.as_mut().map(|t| t.keys.as_mut()) {
            _ if req.argc() != 3 => Err(error("syntax error")),
            None => Err(keys::not_opt()),
            Some(None) => KeyTable::new(Mode::All).caching(arg),
            Some(Some(keys)) => keys.caching(arg),
        };
        client.reply_now(answer.map_or_else(|e| e, |()| Bytes::from_static(b"+OK\r\n")));
    }

    /// A request of a client tracking in the default mode: remember the keys it reads.
    /// `in_multi`: a MULTI is open.
    pub(crate) fn note_request(&mut self, client: &Client, req: &Request, in_multi: bool) {
        let in_tx = in_multi || req.arg(0).eq_ignore_ascii_case(b"multi");
        let Some(keys) = self.0.as_mut().and_then(|t| t.keys.as_mut()) else {
            return;
        };
        let gone = keys.note_request(req, in_tx);
        if !gone.is_empty() {
            client.cell.push(Entry::ready(keys::invalidation(&gone)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(list: &[&str]) -> Vec<Bytes> {
        list.iter()
            .map(|p| Bytes::copy_from_slice(p.as_bytes()))
            .collect()
    }

    fn refusal(existing: &[&str], new: &[&str]) -> String {
        let reply = check_prefixes(&b(existing), &b(new)).unwrap_err();
        String::from_utf8_lossy(&reply).into_owned()
    }

    #[test]
    fn overlaps_are_named_as_redis_names_them() {
        assert!(check_prefixes(&b(&["b"]), &b(&["a", "c", ""])).is_ok());
        assert!(refusal(&[], &["ab", "x", "a"])
            .starts_with("-ERR Prefix 'ab' overlaps with another provided prefix 'a'."));
        assert!(refusal(&["ab"], &["x", "abc"])
            .starts_with("-ERR Prefix 'abc' overlaps with an existing prefix 'ab'."));
        assert!(refusal(&["ab", ""], &["c"])
            .starts_with("-ERR Prefix 'c' overlaps with an existing prefix ''."));
        assert!(check_prefixes(&b(&["ab", ""]), &b(&[""])).is_ok());
    }

    #[test]
    fn many_prefixes_are_checked_and_matched_without_comparing_every_pair() {
        let many: Vec<Bytes> = (0..200_000)
            .map(|i| Bytes::from(format!("p{i}:")))
            .collect();
        assert!(check_prefixes(&[], &many).is_ok());
        let mut late = many.clone();
        late.push(Bytes::from_static(b"p199999:x"));
        let reply = String::from_utf8_lossy(&check_prefixes(&[], &late).unwrap_err()).into_owned();
        assert!(reply.contains("overlaps"), "{reply}");
        let mut sorted = many;
        sorted.sort_unstable();
        assert!(prefix_of(&sorted, b"p123:k").is_some() && prefix_of(&sorted, b"q1:k").is_none());
        assert!(prefix_of(&sorted, b"p12").is_none() && prefix_of(&sorted, b"p12:").is_some());
    }
}
