//! CLIENT TRACKING through the proxy, for RESP3 clients: BCAST mode, and the default mode
//! with OPTIN/OPTOUT (`tracking/keys.rs`).
//!
//! The worker's tracking hub (`tracking/hub.rs`) keeps one connection per master tracking
//! every key (BCAST, no prefix), shared by all of the worker's BCAST clients; each session
//! keeps what its client asked for and passes on only the invalidations it is owed:
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
//! The default mode tracks the keys the client read. Its requests go to the worker's
//! connections that the nodes track (`READS`, `tracking/own.rs`), shared by its
//! default-mode clients, so a node tells of a key some client read there (a script's reads
//! included); the session keeps the keys its client read and passes on only theirs
//! (`tracking/keys.rs`). Each invalidation goes before or after the replies owed as Redis
//! would put it (`tracking/owed.rs`). REDIRECT hands them to another client, on any worker
//! (`tracking/redirect.rs`): that is how a RESP2 client tracks. A user confined to some
//! keys hears of those only. NOLOOP gives the client connections of its own, which the
//! nodes track for it, so they leave out its own writes (`tracking/own.rs`).

use std::rc::Rc;

use bytes::Bytes;
use resp::Request;

use crate::backend::Wire;
use crate::context::registry::Recipient;
use crate::context::tracking_prefixes::PrefixClaim;
use crate::reply::error;
use crate::session::client::Client;
use crate::session::held::Intake;
use crate::session::queue::Entry;
use crate::session::tracking::hub::{TrackingHub, HUB_FLUSH};
use crate::session::tracking::keys::{KeyTable, Mode};
use crate::session::tracking::owed::OwedKeys;
use crate::session::tracking::own::OwnFeed;
use crate::session::tracking::redirect::NO_SUCH_CLIENT;
use crate::worker::READS;

mod hub;
mod keys;
mod owed;
mod own;
pub(crate) mod redirect;

pub(crate) use owed::TurnMark;

/// Where a session's invalidations come from, and the connections its requests go to.
enum Feed {
    /// BCAST: the worker's tracking connections, shared by its BCAST clients, tracking every
    /// key (`tracking/hub.rs`); requests go to the shared connections.
    Hub(Rc<TrackingHub>),
    /// The default mode: the worker's connections the nodes track (`READS`), shared by its
    /// tracking clients in that mode, which their requests go to (`tracking/own.rs`).
    Reads(Rc<OwnFeed>),
    /// NOLOOP: receivers and connections of its own (`tracking/own.rs`).
    Own(Rc<OwnFeed>),
}

impl Feed {
    /// NOLOOP (for a client whose user is not restricted, while the worker has room:
    /// `own::MAX_OWN_PER_WORKER`) on connections of its own; else the default mode on the
    /// worker's tracked connections, or BCAST on the hub.
    fn start(client: &Client, noloop: bool, bcast: bool) -> Feed {
        let restricted = client.login.acting_setup(&client.worker.live()).is_some();
        if noloop && !restricted && own::room_for_own() {
            let (worker, id) = (&client.worker, client.info.id);
            let own = OwnFeed::start(worker, id, bcast, true);
            own.subscribe(&client.cell);
            return Feed::Own(own);
        }
        if !bcast {
            let reads = OwnFeed::reads_of_this_worker(&client.worker);
            reads.subscribe(&client.cell);
            return Feed::Reads(reads);
        }
        let hub = TrackingHub::of_this_worker();
        hub.subscribe(&client.cell);
        Feed::Hub(hub)
    }

    fn is_own(&self) -> bool {
        matches!(self, Feed::Own(_))
    }

    /// The connections the client's requests go to while this feed serves it
    /// (`SessionInfo::tracker`).
    fn tracker(&self, client: &Client) -> u64 {
        match self {
            Feed::Hub(_) => 0,
            Feed::Reads(_) => READS,
            Feed::Own(_) => client.info.id,
        }
    }

    fn stop(&self, client: &mut Client) {
        match self {
            Feed::Hub(hub) => hub.unsubscribe(&client.cell),
            Feed::Reads(reads) => reads.unsubscribe(&client.cell),
            Feed::Own(own) => own.stop(&client.worker),
        }
    }

    fn owns(&self, source: usize) -> bool {
        match self {
            Feed::Hub(hub) => hub.owns(source),
            Feed::Reads(own) | Feed::Own(own) => own.owns(source),
        }
    }

    fn ready(&self) -> Option<Result<(), Bytes>> {
        match self {
            Feed::Hub(hub) => hub.ready(),
            Feed::Reads(own) | Feed::Own(own) => own.ready(),
        }
    }

    fn follow(&self, client: &Client) {
        match self {
            Feed::Hub(hub) => hub.follow(&client.worker),
            Feed::Reads(own) | Feed::Own(own) => {
                let wire = Wire {
                    tracker: self.tracker(client),
                    ..client.wire()
                };
                own.follow(&client.worker, wire)
            }
        }
    }
}

/// A session's part in tracking.
pub(crate) struct Tracking {
    /// Where its invalidations come from.
    feed: Feed,
    /// BCAST's prefixes, sorted (`prefix_of`): they add up, as in Redis; `""` (BCAST
    /// without PREFIX) stands for every key.
    prefixes: Vec<Bytes>,
    /// The same, counted in the proxy's table (INFO's `tracking_total_prefixes`).
    claim: PrefixClaim,
    /// The client's CLIENT TRACKING reply, owed once every master answered.
    reply_seq: Option<u64>,
    /// The feed that replaces `feed` once ready (NOLOOP turned on or off): both are heard
    /// until then, so nothing is missed in between.
    next: Option<Feed>,
    /// The keys the client read, in the default mode (None: BCAST).
    keys: Option<KeyTable>,
    /// REDIRECT's target: the client that gets the invalidations (`tracking/redirect.rs`).
    redirect: Option<Recipient>,
    /// The target was gone when an invalidation was due (TRACKINGINFO's `broken_redirect`).
    broken: bool,
    /// NOLOOP was asked for (the shared feed serves a restricted user's all the same).
    noloop: bool,
    /// The keys of the requests owed a reply: their invalidations wait behind those replies,
    /// others go ahead (`tracking/owed.rs`).
    owed: OwedKeys,
}

impl Tracking {
    /// An invalidation the client is owed: to the client REDIRECT names, else to this one
    /// if it speaks RESP3, ahead of this turn's replies (`now`) or behind the replies owed.
    fn hand_on(&mut self, client: &Client, push: Bytes, mark: TurnMark, now: &mut Vec<Bytes>) {
        match &self.redirect {
            Some(to) => {
                if !redirect::deliver(to, push, client.resp3(), &client.cell) {
                    self.broken = true;
                }
            }
            None if !client.resp3() => {}
            None if self.owed.must_wait(&push, mark) => {
                client.cell.push_out_of_band(push);
            }
            None => now.push(push),
        }
    }
}

/// What a `CLIENT TRACKING …` asks for.
enum Ask {
    Off,
    /// On: BCAST's prefixes (`""` when none was given), the key table's mode (None: BCAST),
    /// the REDIRECT target's id, and NOLOOP.
    On(Vec<Bytes>, Option<Mode>, Option<u64>, bool),
    Refuse(Bytes),
}

/// The options of `CLIENT TRACKING ON|OFF …`.
#[derive(Default)]
struct Options<'a> {
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
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
            b"noloop" => o.noloop = true,
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
    let prefixes: Vec<Bytes> = o
        .prefixes
        .iter()
        .map(|p| Bytes::copy_from_slice(p))
        .collect();
    Ask::On(prefixes, (!o.bcast).then_some(mode), o.redirect, o.noloop)
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
    all.extend(new.iter().map(|p| p.as_ref()));
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

/// BCAST without PREFIX tracks every key: the empty prefix, added after the check, as Redis
/// adds it (a PREFIX "" the client gives is checked like any other).
fn every_key_if_none(mut prefixes: Vec<Bytes>, bcast: bool) -> Vec<Bytes> {
    if bcast && prefixes.is_empty() {
        prefixes.push(Bytes::new());
    }
    prefixes
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
    /// It runs once every earlier request is answered (`Session::hold_mode_change`): NOLOOP
    /// moves the client's requests to connections of its own and back.
    pub(crate) fn command(&mut self, client: &mut Client, intake: &mut Intake, req: &Request) {
        let current = self.0.as_ref().map(|t| t.keys.as_ref().map(KeyTable::mode));
        match parse(req, current) {
            Ask::Refuse(err) => client.reply_now(err),
            Ask::Off => {
                self.off(client);
                client.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Ask::On(prefixes, mode, redirect, noloop) => {
                let redirect =
                    match redirect.map(|id| redirect::recipient(&client.worker.shared, id)) {
                        Some(None) => return client.reply_now(error(NO_SUCH_CLIENT)),
                        found => found.flatten(),
                    };
                match self.0.is_some() {
                    true => self.again(client, intake, prefixes, mode, redirect, noloop),
                    false => self.on(client, intake, prefixes, mode, redirect, noloop),
                }
            }
        }
    }

    fn on(
        &mut self,
        client: &mut Client,
        intake: &mut Intake,
        prefixes: Vec<Bytes>,
        mode: Option<Mode>,
        redirect: Option<Recipient>,
        noloop: bool,
    ) {
        if let Err(e) = check_prefixes(&[], &prefixes) {
            return client.reply_now(e);
        }
        let mut prefixes = every_key_if_none(prefixes, mode.is_none());
        prefixes.sort_unstable();
        prefixes.dedup();
        let mut claim = PrefixClaim::new(std::sync::Arc::clone(
            &client.worker.shared.tracking_prefixes,
        ));
        claim.hold(&prefixes);
        let seq = client.cell.push(Entry::pending_local());
        self.0 = Some(Box::new(Tracking {
            feed: Feed::start(client, noloop, mode.is_none()),
            prefixes,
            claim,
            reply_seq: Some(seq),
            next: None,
            keys: mode.map(KeyTable::new),
            redirect,
            broken: false,
            noloop,
            owed: OwedKeys::default(),
        }));
        *intake = Intake::Serial;
        self.follow(client);
    }

    /// CLIENT TRACKING ON while on: as in Redis, the tracked keys stay, the options are the
    /// new ones, and in BCAST mode the new prefixes add to the old.
    fn again(
        &mut self,
        client: &mut Client,
        intake: &mut Intake,
        prefixes: Vec<Bytes>,
        mode: Option<Mode>,
        redirect: Option<Recipient>,
        noloop: bool,
    ) {
        let Some(t) = self.0.as_mut() else {
            return;
        };
        if t.keys.is_none() {
            if let Err(e) = check_prefixes(&t.prefixes, &prefixes) {
                return client.reply_now(e);
            }
            t.prefixes.extend(every_key_if_none(prefixes, true));
            t.prefixes.sort_unstable();
            t.prefixes.dedup();
            t.claim.hold(&t.prefixes);
        }
        (t.redirect, t.broken, t.noloop) = (redirect, false, noloop);
        if let (Some(keys), Some(mode)) = (t.keys.as_mut(), mode) {
            if t.feed.is_own() && keys.mode() == Mode::All && mode != Mode::All {
                // The keys read so far were the node's to track, not the table's.
                client
                    .cell
                    .push_frame(HUB_FLUSH, Bytes::from_static(hub::FLUSH_ALL));
            }
            keys.set_mode(mode);
        }
        let restricted = client.login.acting_setup(&client.worker.live()).is_some();
        let own = noloop && !restricted && (t.feed.is_own() || own::room_for_own());
        if t.feed.is_own() == own {
            return client.reply_now(Bytes::from_static(b"+OK\r\n"));
        }
        // NOLOOP on or off: another feed, answered once it is ready (`answer`).
        t.next = Some(Feed::start(client, noloop, t.keys.is_none()));
        t.reply_seq = Some(client.cell.push(Entry::pending_local()));
        *intake = Intake::Serial;
        self.follow(client);
    }

    /// Stop tracking (CLIENT TRACKING OFF, RESET, the session's end): leave the hub (the
    /// last session to leave closes its connections), or close the client's own.
    pub(crate) fn off(&mut self, client: &mut Client) {
        if let Some(t) = self.0.take() {
            t.feed.stop(client);
            client.info.tracker = 0;
            if let Some(next) = t.next {
                next.stop(client);
            }
        }
    }

    /// A login as another user: a restricted one keeps the shared feed (`tracking/own.rs`).
    pub(crate) fn user_changed(&mut self, client: &mut Client) {
        let restricted = client.login.acting_setup(&client.worker.live()).is_some();
        let Some(t) = self.0.as_mut().filter(|_| restricted) else {
            return;
        };
        if !t.feed.is_own() {
            return;
        }
        // Its requests leave its own connections now (they have no mirror user); the
        // receivers are heard until the shared feed is ready, and its cache is flushed then.
        client.info.tracker = 0;
        t.next = Some(Feed::start(client, false, t.keys.is_none()));
        self.follow(client);
    }

    /// Keep the feed's connections matched to the masters, and answer CLIENT TRACKING once
    /// they are all set up.
    pub(crate) fn follow(&mut self, client: &mut Client) {
        let Some(t) = self.0.as_ref() else {
            return;
        };
        t.feed.follow(client);
        if let Some(next) = &t.next {
            next.follow(client);
        }
        self.answer(client);
    }

    /// A frame from `source`: None if that is not one of the feed's, else Some(false) (it was
    /// taken). The invalidations the client is owed go to `now` when they go ahead of the
    /// replies that came in this turn (`mark`), else behind the replies owed (`tracking/owed.rs`).
    pub(crate) fn frame(
        &mut self,
        client: &Client,
        source: usize,
        frame: &Bytes,
        mark: TurnMark,
        now: &mut Vec<Bytes>,
    ) -> Option<bool> {
        let live = std::sync::Arc::clone(&client.worker.live());
        // A user confined to some keys hears of those only: BCAST would name every key.
        let confined = client
            .login
            .user()
            .and_then(|i| live.users.get(i))
            .filter(|u| !u.all_keys());
        let t = self.0.as_mut()?;
        let next_owns = t.next.as_ref().is_some_and(|n| n.owns(source));
        if source != HUB_FLUSH && !t.feed.owns(source) && !next_owns {
            return None;
        }
        if frame.first() != Some(&b'>') {
            return Some(false);
        }
        let push = match t.keys.as_mut() {
            // The node tracks the keys the client read on its own connections.
            Some(keys) if t.feed.is_own() && keys.mode() == Mode::All => Some(frame.clone()),
            // Or the keys the worker's tracking clients read: those this one read.
            Some(keys) => keys.filter(frame),
            None => {
                // Sorted: BCAST without PREFIX (the empty prefix) comes first.
                let every = t.prefixes.first().is_some_and(|p| p.is_empty());
                if every && confined.is_none() {
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
                    if let Some(t) = self.0.as_mut() {
                        for push in per_prefix {
                            t.hand_on(client, push, mark, now);
                        }
                    }
                    None
                }
            }
        };
        if let (Some(push), Some(t)) = (push, self.0.as_mut()) {
            t.hand_on(client, push, mark, now);
        }
        Some(false)
    }

    /// The client's CLIENT TRACKING reply, once every master's connection answered; a
    /// refusal turns tracking off again (or, for a change of feed, leaves it as it was).
    /// NOLOOP's connections are the client's from then.
    fn answer(&mut self, client: &mut Client) {
        let Some(t) = self.0.as_mut() else {
            return;
        };
        if let Some(next) = &t.next {
            let Some(ready) = next.ready() else {
                return;
            };
            let next = t.next.take().expect("checked");
            let reply = match ready {
                Ok(()) => {
                    let old = std::mem::replace(&mut t.feed, next);
                    // Keys read in the default mode were tracked by the table, or by the
                    // node on the client's own connections: the new feed has none of them.
                    let flush = t
                        .keys
                        .as_ref()
                        .is_some_and(|k| old.is_own() || !k.is_empty());
                    old.stop(client);
                    if flush {
                        let flush = Bytes::from_static(hub::FLUSH_ALL);
                        client.cell.push_frame(HUB_FLUSH, flush);
                    }
                    Bytes::from_static(b"+OK\r\n")
                }
                Err(refused) => {
                    next.stop(client);
                    refused
                }
            };
            client.info.tracker = t.feed.tracker(client);
            if let Some(seq) = t.reply_seq.take() {
                client.cell.deliver_local(seq, reply);
            }
            return;
        }
        let Some(seq) = t.reply_seq else {
            return;
        };
        let Some(ready) = t.feed.ready() else {
            return;
        };
        t.reply_seq = None;
        client.info.tracker = match ready.is_ok() {
            true => t.feed.tracker(client),
            false => 0,
        };
        let reply = match ready {
            Ok(()) => Bytes::from_static(b"+OK\r\n"),
            Err(refused) => {
                self.off(client);
                refused
            }
        };
        client.cell.deliver_local(seq, reply);
    }

    /// CLIENT TRACKINGINFO and CLIENT GETREDIR, as Redis answers them.
    pub(crate) fn info(&self, client: &Client, req: &Request) {
        let t = self.0.as_deref();
        let redirect = match t {
            None => -1,
            Some(t) => t.redirect.as_ref().map_or(0, |r| r.id as i64),
        };
        let mut out = bytes::BytesMut::new();
        if req.arg(1).eq_ignore_ascii_case(b"getredir") {
            resp::write_int(&mut out, redirect);
            return client.reply_now(out.freeze());
        }
        let mut flags: Vec<&[u8]> = vec![if t.is_some() { b"on" } else { b"off" }];
        if let Some(t) = t {
            match t.keys.as_ref().map(|k| (k.mode(), k.caching_asked())) {
                None => flags.push(b"bcast"),
                Some((Mode::OptIn, asked)) => {
                    flags.push(b"optin");
                    flags.extend(asked.then_some(&b"caching-yes"[..]));
                }
                Some((Mode::OptOut, asked)) => {
                    flags.push(b"optout");
                    flags.extend(asked.then_some(&b"caching-no"[..]));
                }
                Some((Mode::All, _)) => {}
            }
            flags.extend(t.noloop.then_some(&b"noloop"[..]));
            flags.extend(t.broken.then_some(&b"broken_redirect"[..]));
        }
        let prefixes = t.map_or(&[][..], |t| {
            if t.keys.is_none() {
                &t.prefixes[..]
            } else {
                &[]
            }
        });
        let resp3 = client.resp3();
        match resp3 {
            true => resp::write_map_header(&mut out, 3),
            false => resp::write_array_header(&mut out, 6),
        }
        resp::write_bulk(&mut out, b"flags");
        out.extend_from_slice(
            format!("{}{}\r\n", if resp3 { '~' } else { '*' }, flags.len()).as_bytes(),
        );
        flags.iter().for_each(|f| resp::write_bulk(&mut out, f));
        resp::write_bulk(&mut out, b"redirect");
        resp::write_int(&mut out, redirect);
        resp::write_bulk(&mut out, b"prefixes");
        resp::write_array_header(&mut out, prefixes.len());
        prefixes.iter().for_each(|p| resp::write_bulk(&mut out, p));
        client.reply_now(out.freeze());
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
        let Some(t) = self.0.as_mut() else {
            return;
        };
        let (seq, head) = (client.cell.next_seq(), client.cell.head_seq());
        t.owed.note(req, seq, in_tx, head);
        let own = t.feed.is_own();
        let Some(keys) = t.keys.as_mut().filter(|k| !(own && k.mode() == Mode::All)) else {
            return;
        };
        let gone = keys.note_request(req, in_tx);
        if !gone.is_empty() {
            client.cell.push_out_of_band(keys::invalidation(&gone));
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
        assert!(check_prefixes(&b(&["b"]), &b(&["a", "c"])).is_ok());
        assert!(check_prefixes(&b(&["b"]), &b(&[""])).is_err());
        assert_eq!(
            refusal(&[], &["", "foo"]),
            "-ERR Prefix '' overlaps with another provided prefix 'foo'. Prefixes for a single client must not overlap.\r\n"
        );
        assert!(refusal(&[], &["ab", "x", "a"])
            .starts_with("-ERR Prefix 'ab' overlaps with another provided prefix 'a'."));
        assert!(refusal(&["ab"], &["x", "abc"])
            .starts_with("-ERR Prefix 'abc' overlaps with an existing prefix 'ab'."));
        assert!(refusal(&["ab", ""], &["c"])
            .starts_with("-ERR Prefix 'c' overlaps with an existing prefix ''."));
        // BCAST again without PREFIX adds the empty prefix unchecked.
        assert!(check_prefixes(&b(&["ab", ""]), &[]).is_ok());
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
