//! The hostile cases: what one client (or a handful of its connections) does to the proxy for
//! a bounded time, at a size the fuzzer chooses and the shrinker halves. Each case only
//! attacks; judging is the oracles' job, so a case returns a note of what happened to it
//! (sent, reopened, closed by the proxy), never a verdict.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::payloads::{self, Glob, GlobUse, Wide};
use super::table_gen;
use super::wire::{Pushed, Wire};
use crate::keys::Rng;

/// How long a connection may refuse our bytes before the case turns to another one.
const STALL: Duration = Duration::from_millis(50);

/// What a case runs with.
pub struct Ctx {
    pub addr: SocketAddr,
    pub deadline: Instant,
    pub rng: Rng,
    /// The case's scale: a count or a length, halved by the shrinker.
    pub size: u64,
}

/// One case of the catalogue.
pub struct Case {
    pub name: &'static str,
    /// One line for `--list` and the docs.
    pub what: &'static str,
    /// Its default size.
    pub size: u64,
    /// The shrinker stops above this.
    pub min_size: u64,
    /// Why the nodes' growth is not judged for this case, when it is not: the cost is the
    /// cluster's own, the same when the attack is sent straight to the nodes.
    pub nodes_unjudged: Option<&'static str>,
    run: fn(&mut Ctx) -> Result<String>,
}

impl Case {
    /// Attacks until the context's deadline; a note of what happened.
    pub fn run(&self, ctx: &mut Ctx) -> Result<String> {
        (self.run)(ctx)
    }
}

const MIB: u64 = 1 << 20;

/// In Redis Cluster 7.0 a PUBLISH goes to every node over the cluster bus: a flood of 10 MiB
/// messages grows every master's link buffers and allocator, whoever sends it. Sent straight
/// to a 3-master cluster (redis-py, one publisher, 8 s), the masters grew by 141–209 MiB;
/// through the proxy 250–700 MiB. What the proxy can bound is its own memory and its
/// bystander, which stay judged. SPUBLISH stays on its shard.
/// The table's commands store data: SETRANGE at a huge offset or APPEND of megabytes grows
/// the dataset by what the client asked to store, as on one Redis (one CI run saw +260 MiB).
/// The nodes' oracle is about replies piling up, which the other cases provoke.
const TABLE_DATA: &str = "the table's commands store data the client chose";

const HUGE_PUBLISH: &str = "PUBLISH is broadcast to every node over the cluster bus";

/// Every case, in the order a pass runs them.
pub static CASES: &[Case] = &[
    Case {
        name: "table",
        what: "commands from the command table with extreme arguments (size: largest argument, bytes)",
        size: 64 * 1024,
        min_size: 64,
        nodes_unjudged: Some(TABLE_DATA),
        run: table,
    },
    Case {
        name: "huge-counts",
        what: "LRANGE 0 1e18, SCAN COUNT i64::MAX, numkeys 2^31 … (size: requests per write)",
        size: 1000,
        min_size: 1,
        nodes_unjudged: None,
        run: huge_counts,
    },
    Case {
        name: "glob-psubscribe",
        what: "PSUBSCRIBE/PUNSUBSCRIBE of a glob of *, [, *a*a…, \\ (size: pattern bytes)",
        size: MIB,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| glob(c, GlobUse::Psubscribe),
    },
    Case {
        name: "glob-keys",
        what: "KEYS with a megabyte glob (size: pattern bytes)",
        size: MIB,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| glob(c, GlobUse::Keys),
    },
    Case {
        name: "glob-scan",
        what: "SCAN 0 MATCH with a megabyte glob (size: pattern bytes)",
        size: MIB,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| glob(c, GlobUse::ScanMatch),
    },
    Case {
        name: "glob-pubsub-channels",
        what: "PUBSUB CHANNELS with a megabyte glob (size: pattern bytes)",
        size: MIB,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| glob(c, GlobUse::PubsubChannels),
    },
    Case {
        name: "wide-subscribe",
        what: "SUBSCRIBE of 200k channels in one command, again and again (size: channels)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Subscribe),
    },
    Case {
        name: "wide-ssubscribe",
        what: "SSUBSCRIBE of 200k channels of one slot (size: channels)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Ssubscribe),
    },
    Case {
        name: "wide-psubscribe",
        what: "PSUBSCRIBE of 20k patterns (size: patterns; Redis 7.0's own cost is quadratic)",
        size: 20_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Psubscribe),
    },
    Case {
        name: "wide-mget",
        what: "MGET of 200k keys over every slot (size: keys)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Mget),
    },
    Case {
        name: "wide-del",
        what: "DEL of 200k keys over every slot (size: keys)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Del),
    },
    Case {
        name: "wide-numsub",
        what: "PUBSUB NUMSUB of 200k channels (size: channels)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Numsub),
    },
    Case {
        name: "wide-client-list-id",
        what: "CLIENT LIST ID with 200k ids (size: ids)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::ClientListId),
    },
    Case {
        name: "wide-xack",
        what: "XACK of 200k ids (size: ids)",
        size: 200_000,
        min_size: 16,
        nodes_unjudged: None,
        run: |c| wide(c, Wide::Xack),
    },
    Case {
        name: "huge-key",
        what: "SET, GET, EXISTS, DEL of a 10 MiB key (size: key bytes)",
        size: 10 * MIB,
        min_size: 1024,
        nodes_unjudged: None,
        run: huge_key,
    },
    Case {
        name: "huge-client-name",
        what: "CLIENT SETNAME of 10 MiB, then GETNAME, LIST, INFO (size: name bytes)",
        size: 10 * MIB,
        min_size: 1024,
        nodes_unjudged: None,
        run: huge_client_name,
    },
    Case {
        name: "huge-channel",
        what: "SUBSCRIBE to a 10 MiB channel, PUBLISH to it from another connection (size: name bytes)",
        size: 10 * MIB,
        min_size: 1024,
        nodes_unjudged: Some(HUGE_PUBLISH),
        run: huge_channel,
    },
    Case {
        name: "unfinished-multibulk",
        what: "8 connections send *1000000\\r\\n and nothing more (size: the announced count)",
        size: 1_000_000,
        min_size: 2,
        nodes_unjudged: None,
        run: unfinished_multibulk,
    },
    Case {
        name: "unfinished-bulk",
        what: "4 connections announce a 512 MiB bulk (the default max_bulk_bytes), then trickle 1 KiB per 20 ms (size: announced bytes)",
        size: 512 * MIB,
        min_size: 1024,
        nodes_unjudged: None,
        run: unfinished_bulk,
    },
    Case {
        name: "deep-pipeline",
        what: "10k MGETs of 16 keys over the slots per write, replies never read (size: MGETs per write)",
        size: 10_000,
        min_size: 1,
        nodes_unjudged: None,
        run: deep_pipeline,
    },
    Case {
        name: "garbage",
        what: "random bytes made of RESP tokens, reconnecting whenever closed (size: bytes per write)",
        size: 64 * 1024,
        min_size: 16,
        nodes_unjudged: None,
        run: garbage,
    },
    Case {
        name: "resp3-frames",
        what: "HELLO 3, then RESP3 aggregate frames nested 100k deep as requests (size: depth)",
        size: 100_000,
        min_size: 1,
        nodes_unjudged: None,
        run: resp3_frames,
    },
    Case {
        name: "never-reads",
        what: "16 connections pipeline GETs of a 1 MiB value and never read (size: value bytes)",
        size: MIB,
        min_size: 1024,
        nodes_unjudged: None,
        run: never_reads,
    },
];

/// The case called `name`.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// How a flood uses its connections.
struct Flood {
    conns: usize,
    /// A thread reads and discards the replies; otherwise they are never read.
    reading: bool,
    /// Close a connection and open a fresh one after this many writes (0: never), so a
    /// command that blocks the connection does not end the case's variety.
    recycle: u64,
    /// Wait for the replies to stop coming before the next write (closed loop). For requests
    /// whose cost on the node grows with their size squared (Redis 7.0 keeps a client's
    /// patterns in a list), so one case does not leave a node busy for minutes after it.
    settle: bool,
}

impl Flood {
    /// One connection whose replies are read, open loop: what most cases need.
    const ONE_READER: Flood = Flood {
        conns: 1,
        reading: true,
        recycle: 0,
        settle: false,
    };
}

/// Sends `next()` again and again over the connections until the deadline. A connection the
/// proxy stops reading is left as it is (its bytes pending) and the next one is used; one it
/// closes is opened again.
fn flood(ctx: &mut Ctx, how: Flood, mut next: impl FnMut(&mut Ctx) -> Vec<u8>) -> String {
    let mut wires: Vec<Option<(Wire, u64)>> = (0..how.conns).map(|_| None).collect();
    let (mut writes, mut reopened, mut stalls, mut refused) = (0u64, 0u64, 0u64, 0u64);
    let mut turn = 0usize;
    while Instant::now() < ctx.deadline {
        let slot = &mut wires[turn % how.conns];
        turn += 1;
        let spent = slot
            .as_ref()
            .is_some_and(|(w, n)| w.is_closed() || (how.recycle > 0 && *n >= how.recycle));
        if spent {
            if let Some((w, _)) = slot.take() {
                if w.is_closed() {
                    reopened += 1;
                }
                w.finish();
            }
        }
        if slot.is_none() {
            let opened = if how.reading {
                Wire::reading(ctx.addr, ctx.deadline)
            } else {
                Wire::mute(ctx.addr, ctx.deadline)
            };
            match opened {
                Ok(w) => *slot = Some((w, 0)),
                Err(_) => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let Some((w, n)) = slot.as_mut() else {
            continue;
        };
        if w.idle() {
            w.queue(&next(ctx));
            *n += 1;
            writes += 1;
        }
        match w.pump(STALL) {
            Pushed::Stalled => stalls += 1,
            Pushed::Drained if how.settle => w.settle(Duration::from_millis(200)),
            _ => {}
        }
    }
    for (w, _) in wires.into_iter().flatten() {
        w.finish();
    }
    let mut note = format!("{writes} writes, {stalls} stalls, {reopened} closed by the proxy");
    if refused > 0 {
        note += &format!(", {refused} connects refused");
    }
    note
}

/// Opens `conns` connections, sends `head` on each, then `trickle` every `period` until the
/// deadline: requests that never complete.
fn hold(ctx: &mut Ctx, conns: usize, head: &[u8], trickle: &[u8], period: Duration) -> String {
    let mut wires: Vec<Wire> = (0..conns)
        .filter_map(|_| Wire::reading(ctx.addr, ctx.deadline).ok())
        .collect();
    let opened = wires.len();
    for w in &mut wires {
        w.queue(head);
        w.pump(STALL);
    }
    let mut trickled = 0u64;
    while Instant::now() + period < ctx.deadline {
        std::thread::sleep(period);
        if trickle.is_empty() {
            continue;
        }
        for w in wires.iter_mut().filter(|w| !w.is_closed()) {
            w.queue(trickle);
            if w.pump(STALL) == Pushed::Drained {
                trickled += trickle.len() as u64;
            }
        }
    }
    let closed = wires.iter().filter(|w| w.is_closed()).count();
    for w in wires {
        w.finish();
    }
    format!("{opened} opened, {trickled} bytes trickled, {closed} closed by the proxy")
}

fn size(ctx: &Ctx) -> usize {
    usize::try_from(ctx.size).unwrap_or(usize::MAX)
}

fn table(ctx: &mut Ctx) -> Result<String> {
    let rows = table_gen::rows();
    let how = Flood {
        conns: 4,
        reading: true,
        recycle: 32,
        settle: false,
    };
    Ok(flood(ctx, how, |c| {
        let n = 1 + c.rng.below(8);
        let size = size(c);
        (0..n)
            .flat_map(|_| table_gen::request(&rows, &mut c.rng, size))
            .collect()
    }))
}

fn huge_counts(ctx: &mut Ctx) -> Result<String> {
    let all = payloads::huge_counts();
    let mut first = Some(payloads::prefill(500).concat());
    let how = Flood::ONE_READER;
    Ok(flood(ctx, how, |c| {
        // The collections go first on the same connection, so every read finds them.
        let mut out = first.take().unwrap_or_default();
        for _ in 0..c.size {
            out.extend_from_slice(&all[c.rng.below(all.len() as u64) as usize]);
        }
        out
    }))
}

fn glob(ctx: &mut Ctx, how_used: GlobUse) -> Result<String> {
    let mut shape = ctx.rng.below(Glob::ALL.len() as u64) as usize;
    let how = Flood::ONE_READER;
    Ok(flood(ctx, how, |c| {
        shape = (shape + 1) % Glob::ALL.len();
        let size = size(c);
        let pattern = Glob::ALL[shape].pattern(size, &mut c.rng);
        payloads::glob_request(how_used, &pattern)
    }))
}

fn wide(ctx: &mut Ctx, kind: Wide) -> Result<String> {
    let request = payloads::wide_request(kind, size(ctx));
    let how = Flood {
        conns: 1,
        reading: true,
        recycle: 0,
        settle: true,
    };
    Ok(flood(ctx, how, |_| request.clone()))
}

fn huge_key(ctx: &mut Ctx) -> Result<String> {
    let key = payloads::huge_name(size(ctx));
    let mut request = payloads::command(&[b"SET".as_slice(), &key, b"v"]);
    for cmd in ["GET", "EXISTS", "DEL"] {
        request.extend(payloads::command(&[cmd.as_bytes(), &key]));
    }
    let how = Flood::ONE_READER;
    Ok(flood(ctx, how, |_| request.clone()))
}

fn huge_client_name(ctx: &mut Ctx) -> Result<String> {
    let name = payloads::huge_name(size(ctx));
    let mut request = payloads::command(&[b"CLIENT".as_slice(), b"SETNAME", &name]);
    for sub in ["GETNAME", "LIST", "INFO"] {
        request.extend(payloads::command(&["CLIENT", sub]));
    }
    let how = Flood {
        conns: 2,
        reading: true,
        recycle: 0,
        settle: false,
    };
    Ok(flood(ctx, how, |_| request.clone()))
}

fn huge_channel(ctx: &mut Ctx) -> Result<String> {
    let channel = payloads::huge_name(size(ctx));
    let mut subscriber = Wire::reading(ctx.addr, ctx.deadline)?;
    subscriber.queue(&payloads::command(&[b"SUBSCRIBE".as_slice(), &channel]));
    subscriber.pump(STALL);
    let publish = payloads::command(&[b"PUBLISH".as_slice(), &channel, b"hello"]);
    let how = Flood::ONE_READER;
    let note = flood(ctx, how, |_| publish.clone());
    let closed = subscriber.is_closed();
    subscriber.finish();
    Ok(format!("{note}; subscriber closed: {closed}"))
}

fn unfinished_multibulk(ctx: &mut Ctx) -> Result<String> {
    let head = payloads::unfinished_multibulk(ctx.size);
    Ok(hold(ctx, 8, &head, b"", Duration::from_millis(50)))
}

fn unfinished_bulk(ctx: &mut Ctx) -> Result<String> {
    let head = payloads::unfinished_bulk(ctx.size);
    let trickle = vec![b'x'; 1024.min(size(ctx))];
    Ok(hold(ctx, 4, &head, &trickle, Duration::from_millis(20)))
}

fn deep_pipeline(ctx: &mut Ctx) -> Result<String> {
    let how = Flood {
        conns: 1,
        reading: false,
        recycle: 0,
        settle: false,
    };
    Ok(flood(ctx, how, |c| {
        let n = size(c);
        payloads::mget_pipeline(n, &mut c.rng)
    }))
}

fn garbage(ctx: &mut Ctx) -> Result<String> {
    let how = Flood {
        conns: 2,
        reading: true,
        recycle: 0,
        settle: false,
    };
    Ok(flood(ctx, how, |c| {
        let n = size(c);
        payloads::garbage(n, &mut c.rng)
    }))
}

fn resp3_frames(ctx: &mut Ctx) -> Result<String> {
    let request = payloads::resp3_nested(size(ctx));
    let how = Flood::ONE_READER;
    Ok(flood(ctx, how, |_| request.clone()))
}

fn never_reads(ctx: &mut Ctx) -> Result<String> {
    // Written and answered before any GET, so every GET finds the value.
    let value = vec![b'v'; size(ctx)];
    crate::admin::Admin::connect(ctx.addr)?.call(&[b"SET".as_slice(), b"nr:{v}", &value])?;
    let gets = payloads::command(&["GET", "nr:{v}"]).repeat(64);
    let how = Flood {
        conns: 16,
        reading: false,
        recycle: 0,
        settle: false,
    };
    Ok(flood(ctx, how, |_| gets.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sizes_shrinkable() {
        for (i, c) in CASES.iter().enumerate() {
            assert!(CASES[..i].iter().all(|d| d.name != c.name), "{}", c.name);
            assert!(c.size >= c.min_size && c.min_size >= 1, "{}", c.name);
            assert!(find(c.name).is_some());
        }
    }
}
