//! Blocking commands (BLPOP, BLMOVE, BZPOPMIN, XREAD ... BLOCK, WAIT ...)
//! on dedicated connections.
//!
//! On the shared connection a `BLPOP k 30` would hold the FIFO for 30 s and
//! stall every caller of that node, so each blocking command takes an idle
//! dedicated connection to its slot owner (or opens one), runs alone on it,
//! and gives it back after a complete reply. MOVED and ASK are followed; a
//! call that fails or times out drops its connection, which closes it.
//!
//! The deadline is the command's own timeout argument plus
//! [`crate::Config::timeout`] as a margin (a timeout of 0 blocks without a
//! client deadline); when no timeout argument is found, `Config::timeout`.

use ::topology::MAX_REDIRECTS;
use cluster::slot_map::{host_of, join_host_port};
use cluster::{parse_redirect, CommandSpec, Host, Redirect};
use resp::Value;
use std::time::Duration;

use crate::cmd::{Batch, Frozen, Kind, Wait};
use crate::dedicated::Dedicated;
use crate::error::{Error, Result};
use crate::stats::bump;
use crate::Inner;

/// Classifies a command for the connection it needs.
pub(crate) fn kind_of<'a>(
    spec: &CommandSpec,
    argc: usize,
    arg: impl Fn(usize) -> &'a [u8],
) -> Kind {
    match spec.name {
        "subscribe" | "psubscribe" | "ssubscribe" | "monitor" => return Kind::Stream,
        "xread" | "xreadgroup" => {
            let block = (1..argc).find(|&i| arg(i).eq_ignore_ascii_case(b"block"));
            return match block {
                Some(i) if i + 1 < argc => Kind::Blocking(wait_of(arg(i + 1), 0.001)),
                Some(_) => Kind::Blocking(Wait::Unknown),
                None => Kind::Plain,
            };
        }
        "wait" | "waitaof" => return Kind::Blocking(wait_of(arg(argc - 1), 0.001)),
        _ => {}
    }
    if !spec.has(cluster::flags::BLOCKING) {
        return Kind::Plain;
    }
    // BLMPOP and BZMPOP take the timeout first; the others last.
    let at = match spec.name {
        "blmpop" | "bzmpop" => 1,
        _ => argc - 1,
    };
    Kind::Blocking(if at < argc && argc > 1 {
        wait_of(arg(at), 1.0)
    } else {
        Wait::Unknown
    })
}

/// A timeout argument in `unit` seconds; 0 blocks forever.
fn wait_of(raw: &[u8], unit: f64) -> Wait {
    let parsed = std::str::from_utf8(raw)
        .ok()
        .and_then(|s| s.parse::<f64>().ok());
    match parsed {
        Some(0.0) => Wait::Forever,
        Some(t) if t > 0.0 && t.is_finite() => Wait::For(Duration::from_secs_f64(t * unit)),
        _ => Wait::Unknown,
    }
}

/// The client deadline for a command that may block for `wait`.
fn deadline(inner: &Inner, wait: Wait) -> Option<Duration> {
    match wait {
        Wait::Forever => None,
        Wait::For(d) => Some(d + inner.timeout),
        Wait::Unknown => Some(inner.timeout),
    }
}

/// Runs one blocking command on a dedicated connection.
pub(crate) async fn run(inner: &Inner, cmd: &Frozen, wait: Wait) -> Result<Value> {
    let work = redirected(inner, cmd);
    match deadline(inner, wait) {
        // Dropping `work` drops its connection mid-command: closed, not reused.
        Some(d) => tokio::time::timeout(d, work)
            .await
            .unwrap_or(Err(Error::Timeout)),
        None => work.await,
    }
}

async fn redirected(inner: &Inner, cmd: &Frozen) -> Result<Value> {
    let (mut addr, mut asking) = (target_of(inner, cmd.route.slot)?, false);
    for _ in 0..=MAX_REDIRECTS {
        let reply = once(inner, &addr, cmd, asking).await?;
        let Value::Error(text) = &reply else {
            return Ok(reply);
        };
        match redirect_target(inner, &addr, text) {
            Some((to, ask)) => (addr, asking) = (to, ask),
            None => return Err(Error::Server(lossy(text))),
        }
    }
    Err(Error::RedirectLimit("blocking command".into()))
}

/// Sends `cmd` (behind ASKING when `asking`) alone on a dedicated
/// connection and reads its reply; the connection goes back to the idle
/// pool only once that reply was read whole.
async fn once(inner: &Inner, addr: &str, cmd: &Frozen, asking: bool) -> Result<Value> {
    let mut conn = match inner.idle.take(addr) {
        Some(c) => c,
        None => Dedicated::open(addr, inner.connect_timeout, inner.resp3).await?,
    };
    let mut batch = Batch::default();
    batch.push(cmd, asking);
    let (segments, _) = batch.finish();
    conn.send(&segments).await?;
    if asking {
        // ASKING's own +OK; a failure shows in the command's reply.
        conn.read().await?;
    }
    let reply = conn.read().await?;
    inner.idle.put(conn);
    Ok(reply)
}

/// The node for `slot` (any node when keyless) by the current map.
pub(crate) fn target_of(inner: &Inner, slot: Option<u16>) -> Result<String> {
    let Some(topo) = &inner.topology else {
        return Ok(inner.single_addr.clone());
    };
    let map = topo.current();
    crate::engine::node_for(topo, &map, slot).map(str::to_string)
}

/// Where a MOVED/ASK error sends the command, and whether ASKING goes
/// first; `None` for any other error. MOVED also refreshes the map.
pub(crate) fn redirect_target(inner: &Inner, from: &str, text: &[u8]) -> Option<(String, bool)> {
    let topo = inner.topology.as_ref()?;
    let (to, asking) = match parse_redirect(text)? {
        Redirect::Moved { to, .. } => (to, false),
        Redirect::Ask { to, .. } => (to, true),
    };
    let addr = match to.host {
        Host::Name(h) => join_host_port(h, to.port),
        Host::Same => join_host_port(host_of(from), to.port),
        Host::Unknown => return None,
    };
    if asking {
        bump(&inner.stats.ask);
    } else {
        bump(&inner.stats.moved);
        topo.request_refresh(topo.current().version());
    }
    Some((addr, asking))
}

pub(crate) fn lossy(text: &[u8]) -> String {
    String::from_utf8_lossy(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cmd;

    fn kind(args: &[&str]) -> Kind {
        Cmd::from_args(args.iter().copied()).freeze().route.kind
    }

    #[test]
    fn classifies_by_table_and_timeout_argument() {
        let secs = |s: f64| Kind::Blocking(Wait::For(Duration::from_secs_f64(s)));
        assert_eq!(kind(&["GET", "k"]), Kind::Plain);
        assert_eq!(kind(&["blpop", "a", "b", "1.5"]), secs(1.5));
        assert_eq!(kind(&["BLPOP", "a", "0"]), Kind::Blocking(Wait::Forever));
        assert_eq!(kind(&["BLMPOP", "2", "1", "a", "LEFT"]), secs(2.0));
        assert_eq!(kind(&["XREAD", "STREAMS", "s", "0"]), Kind::Plain);
        assert_eq!(
            kind(&["XREAD", "BLOCK", "250", "STREAMS", "s", "$"]),
            secs(0.25)
        );
        assert_eq!(kind(&["WAIT", "1", "100"]), secs(0.1));
        assert_eq!(kind(&["SUBSCRIBE", "c"]), Kind::Stream);
        assert_eq!(kind(&["BLPOP", "a", "x"]), Kind::Blocking(Wait::Unknown));
    }
}
