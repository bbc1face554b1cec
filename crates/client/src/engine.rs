//! Runs a list of commands (one command or a whole pipeline) against the
//! cluster and returns one result per command, in the caller's order.
//!
//! Each round groups the unfinished commands by target node, queues one batch
//! per node (all nodes at once), then judges every reply: MOVED patches the
//! slot, asks for a refresh and resends to the new owner; ASK resends to the
//! target behind `ASKING` in the same write; TRYAGAIN, CLUSTERDOWN,
//! MASTERDOWN, READONLY and LOADING back off with jitter (the shared
//! `topology` budget, as in the proxy); a lost connection resends only what is
//! safe to resend. The reply order is by index, so redirects never reorder a
//! pipeline's results.

use ::topology::{not_executed, Backoff, Topology, MAX_REDIRECTS};
use arc_swap::Guard;
use cluster::slot_map::{host_of, join_host_port, SlotMap};
use cluster::{error_kind, parse_redirect, ErrorKind, Host, Redirect};
use rand::Rng;
use resp::Value;

use crate::cmd::{Batch, Frozen};
use crate::conn::Ticket;
use crate::error::{Error, Result};
use crate::stats::bump;
use crate::Inner;

/// TRYAGAIN/CLUSTERDOWN/connection retries per command.
const MAX_RETRIES: u32 = 8;

/// Per-command progress.
#[derive(Debug, Clone, Default)]
struct State {
    /// Set by a redirect: (address, send ASKING first).
    target: Option<(String, bool)>,
    /// Map version the command was last routed with.
    version: u64,
    hops: u32,
    retries: u32,
}

/// What to do with a command after its reply.
enum Next {
    Done(Result<Value>),
    Retry { backoff: bool },
}

/// Executes `cmds`; the result at index i is command i's.
pub(crate) async fn execute(inner: &Inner, cmds: &[Frozen]) -> Vec<Result<Value>> {
    let mut results: Vec<Option<Result<Value>>> = vec![None; cmds.len()];
    let mut states = vec![State::default(); cmds.len()];
    let mut todo: Vec<usize> = (0..cmds.len()).collect();
    while !todo.is_empty() {
        let (next, backoff) = round(inner, cmds, &mut states, &mut results, &todo).await;
        if backoff > 0 {
            tokio::time::sleep(Backoff::DEFAULT.delay(backoff)).await;
        }
        todo = next;
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Protocol("command not run".into()))))
        .collect()
}

/// Sends the `todo` commands (one batch per node, all queued before any is
/// awaited) and judges their replies. Returns the commands to run again and
/// the backoff attempt to wait for first (0: none).
async fn round(
    inner: &Inner,
    cmds: &[Frozen],
    states: &mut [State],
    results: &mut [Option<Result<Value>>],
    todo: &[usize],
) -> (Vec<usize>, u32) {
    let groups = group(inner, cmds, states, results, todo);
    let tickets: Vec<Ticket> = groups
        .iter()
        .map(|(addr, members)| submit(inner, addr, cmds, members))
        .collect();
    let (mut again, mut backoff) = (Vec::new(), 0);
    for ((addr, members), ticket) in groups.iter().zip(tickets) {
        let mut replies = ticket.wait().await.into_iter();
        for &(i, asking) in members {
            if asking {
                // ASKING's own +OK; a failure shows in the command's reply.
                replies.next();
            }
            let reply = replies
                .next()
                .unwrap_or_else(|| Err(Error::Protocol("missing reply".into())));
            match judge(inner, addr, &cmds[i], &mut states[i], reply) {
                Next::Done(r) => results[i] = Some(r),
                Next::Retry { backoff: wait } => {
                    backoff = backoff.max(if wait { states[i].retries } else { 0 });
                    again.push(i);
                }
            }
        }
    }
    (again, backoff)
}

/// Commands bound for one node: its address, then (index, send ASKING first).
type Groups = Vec<(String, Vec<(usize, bool)>)>;

/// Routes the `todo` commands and groups them by node, in caller order
/// within each group; a command that cannot be routed gets its error now.
fn group(
    inner: &Inner,
    cmds: &[Frozen],
    states: &mut [State],
    results: &mut [Option<Result<Value>>],
    todo: &[usize],
) -> Groups {
    // One map for the whole round: routing a command then borrows its
    // node's address instead of loading the map and cloning the address.
    let map = inner
        .topology
        .as_ref()
        .map(|t| Guard::into_inner(t.current()));
    let mut groups = Groups::new();
    for &i in todo {
        match route(inner, map.as_deref(), &cmds[i], &mut states[i]) {
            Ok((addr, asking)) => add_to_group(&mut groups, addr, i, asking),
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    groups
}

fn add_to_group(groups: &mut Groups, addr: &str, i: usize, ask: bool) {
    // Few nodes per pipeline: a linear scan beats hashing here.
    match groups.iter_mut().find(|(a, _)| a == addr) {
        Some((_, members)) => members.push((i, ask)),
        None => groups.push((addr.to_owned(), vec![(i, ask)])),
    }
}

fn submit(inner: &Inner, addr: &str, cmds: &[Frozen], members: &[(usize, bool)]) -> Ticket {
    let mut batch = Batch::default();
    for &(i, asking) in members {
        batch.push(&cmds[i], asking);
    }
    let (segments, replies) = batch.finish();
    inner.pool.get(addr).submit(segments, replies)
}

/// The node a command goes to now, and whether it needs ASKING. `map` is
/// the round's map (`None` in single-node mode).
fn route<'a>(
    inner: &'a Inner,
    map: Option<&'a SlotMap>,
    cmd: &Frozen,
    state: &'a mut State,
) -> Result<(&'a str, bool)> {
    if cmd.is_empty() {
        return Err(Error::Invalid("empty command".into()));
    }
    if let Some((addr, asking)) = &state.target {
        return Ok((addr, *asking));
    }
    let (Some(topo), Some(map)) = (&inner.topology, map) else {
        return Ok((&inner.single_addr, false));
    };
    state.version = map.version();
    Ok((node_for(topo, map, cmd.route.slot)?, false))
}

/// The address serving `slot` in `map`, or a random node's for a keyless command; a slot
/// nobody serves asks for a refresh.
pub(crate) fn node_for<'m>(
    topo: &Topology,
    map: &'m SlotMap,
    slot: Option<u16>,
) -> Result<&'m str> {
    let node = match slot {
        Some(slot) => map.node_of(slot).ok_or_else(|| {
            topo.request_refresh(map.version());
            Error::Topology(format!("no node serves slot {slot}"))
        })?,
        None => {
            let nodes = map.nodes();
            let pick = rand::thread_rng().gen_range(0..nodes.len().max(1));
            nodes
                .get(pick)
                .ok_or_else(|| Error::Topology("empty map".into()))?
        }
    };
    Ok(&node.addr)
}

/// Decides what a reply means for its command.
fn judge(inner: &Inner, from: &str, cmd: &Frozen, st: &mut State, reply: Result<Value>) -> Next {
    match reply {
        Ok(Value::Error(text)) => judge_error(inner, from, st, &text),
        Ok(v) => Next::Done(Ok(v)),
        Err(Error::NotSent(e)) => retry_after_io(inner, st, Error::NotSent(e)),
        Err(Error::OutcomeUnknown(e)) if cmd.route.idempotent => {
            retry_after_io(inner, st, Error::OutcomeUnknown(e))
        }
        Err(e) => Next::Done(Err(e)),
    }
}

/// Resending is harmless here; ask for a refresh in case the node is gone.
fn retry_after_io(inner: &Inner, st: &mut State, e: Error) -> Next {
    st.retries += 1;
    if st.retries > 3 {
        return Next::Done(Err(e));
    }
    if let Some(topo) = &inner.topology {
        topo.request_refresh(st.version);
    }
    Next::Retry { backoff: true }
}

fn judge_error(inner: &Inner, from: &str, st: &mut State, text: &[u8]) -> Next {
    let Some(topo) = &inner.topology else {
        return Next::Done(Err(server_error(text)));
    };
    if let Some(redirect) = parse_redirect(text) {
        return follow(inner, topo, from, st, text, redirect);
    }
    let kind = kind_of(text);
    if !not_executed(kind) {
        return Next::Done(Err(server_error(text)));
    }
    st.retries += 1;
    if st.retries > MAX_RETRIES {
        return Next::Done(Err(Error::RetriesExhausted(lossy(text))));
    }
    bump(&inner.stats.tryagain);
    if kind != ErrorKind::TryAgain {
        // The slot's owner may be changing (failover): learn the new one.
        topo.request_refresh(st.version);
    }
    // Re-route by the map: the migration may have finished meanwhile.
    st.target = None;
    Next::Retry { backoff: true }
}

/// MOVED: patch the slot, ask for a refresh, resend to the new owner.
/// ASK: resend to the target behind ASKING, map untouched (R10).
fn follow(
    inner: &Inner,
    topo: &Topology,
    from: &str,
    st: &mut State,
    text: &[u8],
    redirect: Redirect<'_>,
) -> Next {
    st.hops += 1;
    if st.hops > u32::from(MAX_REDIRECTS) {
        return Next::Done(Err(Error::RedirectLimit(lossy(text))));
    }
    let (slot, to, asking) = match redirect {
        Redirect::Moved { slot, to } => (slot, to, false),
        Redirect::Ask { slot, to } => (slot, to, true),
    };
    let addr = match to.host {
        Host::Name(h) => join_host_port(h, to.port),
        Host::Same => join_host_port(host_of(from), to.port),
        Host::Unknown => {
            // Never dial `?`: learn the owner from a refresh, then re-route.
            topo.request_refresh(st.version);
            st.target = None;
            return Next::Retry { backoff: true };
        }
    };
    if asking {
        bump(&inner.stats.ask);
    } else {
        bump(&inner.stats.moved);
        // Another request's MOVED already patched this slot: nothing new to learn.
        let known = topo.current().node_of(slot).is_some_and(|n| n.addr == addr);
        if !known {
            topo.learn_moved(slot, &addr, st.version);
        }
    }
    st.target = Some((addr, asking));
    Next::Retry { backoff: false }
}

/// `error_kind` of the error frame `-<text>`, built on the stack: the kind
/// depends on the first word, and for UNBLOCKED on the words after it, all within
/// the 95 bytes kept (a longer text matches no more, cut or not).
fn kind_of(text: &[u8]) -> ErrorKind {
    let mut frame = [0u8; 96];
    frame[0] = b'-';
    let n = text.len().min(frame.len() - 1);
    frame[1..=n].copy_from_slice(&text[..n]);
    error_kind(&frame[..=n])
}

fn lossy(text: &[u8]) -> String {
    String::from_utf8_lossy(text).into_owned()
}

fn server_error(text: &[u8]) -> Error {
    Error::Server(lossy(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_of_matches_error_kind_of_the_frame() {
        let texts: &[&[u8]] = &[
            b"TRYAGAIN Multiple keys request during rehashing of slot",
            b"CLUSTERDOWN The cluster is down",
            b"MOVED 3999 127.0.0.1:6381",
            b"LOADING",
            b"UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            b"UNBLOCKED client unblocked via CLIENT UNBLOCK",
            b"CLUSTERDOWNCLUSTERDOWN x",
            b"ERR unknown command",
            b"",
        ];
        for t in texts {
            assert_eq!(kind_of(t), error_kind(&[b"-", *t].concat()), "{t:?}");
        }
    }
}
