//! CLIENT PAUSE as a session sees it: whether the pause in force (`context/pause.rs`)
//! covers a request, and when it ends on tokio's clock. The session holds a covered request
//! (`Intake::Paused`, `exclusive.rs`) and dispatches it once this says it no longer is.

use resp::Request;

use crate::context::code_flags::declares_no_writes;
use crate::context::pause::PauseKind;
use crate::session::client::Client;
use crate::session::transaction::Transactions;

/// When CLIENT PAUSE covers `req` now: the pause's end (ms on the proxy's clock). A WRITE
/// pause covers what Redis's does: commands that write or may replicate, and EXEC of a
/// transaction holding one; scripts and functions that declared `no-writes` pass (EVAL's
/// shebang read here, EVALSHA's and FCALL's as learned when loaded through the proxy,
/// `context/code_flags.rs`).
/// Inlined: every request asks, and while nothing is paused the answer is one load.
#[inline]
pub(crate) fn end(client: &Client, tx: &Transactions, req: &Request) -> Option<u64> {
    let shared = &client.worker.shared;
    if !shared.pause.is_set() {
        return None;
    }
    covering(client, tx, req)
}

/// `end` while a pause is set.
#[cold]
#[inline(never)]
fn covering(client: &Client, tx: &Transactions, req: &Request) -> Option<u64> {
    let shared = &client.worker.shared;
    let (kind, end) = shared.pause.current(|| shared.now_ms())?;
    let covered = match kind {
        PauseKind::All => true,
        PauseKind::Write if req.arg(0).eq_ignore_ascii_case(b"exec") => {
            // EXEC of a transaction holding a command the pause covers.
            tx.queued().iter().any(|queued| writes(client, queued))
        }
        PauseKind::Write => writes(client, req),
    };
    covered.then_some(end)
}

/// Whether a WRITE pause covers `req` (module doc).
fn writes(client: &Client, req: &Request) -> bool {
    let spec = cluster::lookup(req.arg(0)).map(|s| s.resolve(req.argc(), |i| req.arg(i)));
    let code = &client.worker.shared.code_flags;
    match spec {
        Some(spec) if spec.name == "eval" && declares_no_writes(req.arg(1)) => false,
        Some(spec) if spec.name == "evalsha" && code.script_reads_only(req.arg(1)) => false,
        Some(spec) if spec.name == "fcall" && code.function_reads_only(req.arg(1)) => false,
        Some(spec) => spec.replicates(),
        None => false,
    }
}

/// The instant `end_ms` (on the proxy's clock) falls at, for the session's timer.
pub(crate) fn deadline(client: &Client, end_ms: u64) -> tokio::time::Instant {
    client.worker.shared.started + std::time::Duration::from_millis(end_ms)
}
