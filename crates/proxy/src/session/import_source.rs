//! `CLIENT IMPORT-SOURCE ON|OFF` (Valkey 8.1+): a sync tool's connection that, while the
//! server's `import-mode` is on, sees expired keys as if they were not (GET, TTL 0, SCAN,
//! KEYS) and never expires one itself. A per-client mode, like CLIENT NO-TOUCH: once on,
//! the client's requests go to connections that sent `CLIENT IMPORT-SOURCE ON` at set-up
//! (`Wire::import_source`), and CLIENT LIST shows flag `I`.
//!
//! Whether ON is allowed is each server's to say (its `import-mode` config), so the proxy
//! asks: ON (or any other argument than OFF) goes to every master on a connection of its
//! own, and the mode is set only when all of them answered `+OK`; otherwise the first
//! refusal is the answer, verbatim (`-ERR Server is not in import mode`, Valkey's syntax
//! error). Nothing after the request is read until the answer is in (`Intake::Serial`),
//! so the client's next request goes in the mode it left. OFF is answered here: Valkey
//! accepts it in every mode. Servers without the subcommand (Redis) never get here: the
//! command table is learned from the masters (`cluster::command::learn`), so the proxy
//! answers `unknown subcommand` as they do.
//!
//! ```text
//!   CLIENT IMPORT-SOURCE ON ─▶ entry pushed (order kept), Serial
//!       ─▶ task: NodeConn per master ─▶ all +OK: ClientCell::import_source = Some(true)
//!       ─▶ reply delivered ─▶ session takes the mode before reading on (`take`)
//! ```

use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use resp::{Request, Value};

use crate::context::Shared;
use crate::node_query::NodeConn;
use crate::session::local::SessionInfo;
use crate::session::queue::ClientCell;
use crate::session::side_call::{self, Dial};

/// Answer CLIENT IMPORT-SOURCE (module doc); true when the masters are being asked, and
/// the session must read nothing more until they answered.
pub(crate) fn command(
    req: &Request,
    shared: &Arc<Shared>,
    cell: &Rc<ClientCell>,
    info: &mut SessionInfo,
) -> bool {
    if req.arg(2).eq_ignore_ascii_case(b"off") {
        info.import_source = false;
        cell.push_ready(Bytes::from_static(b"+OK\r\n"));
        return false;
    }
    if !side_call::room(shared) {
        cell.push_ready(Bytes::from_static(side_call::TRY_AGAIN));
        return false;
    }
    let masters: Vec<String> = (shared.topology.current().nodes().iter())
        .map(|n| n.addr.to_string())
        .collect();
    let on = req.arg(2).eq_ignore_ascii_case(b"on");
    let arg = Bytes::copy_from_slice(req.arg(2));
    let mode = cell.clone();
    side_call::spawn(shared, cell, |Dial { auth, tls }| async move {
        let argv: [&[u8]; 3] = [b"CLIENT", b"IMPORT-SOURCE", &arg];
        let mut refusal = None;
        for addr in &masters {
            let answer = match NodeConn::connect(addr, auth.as_ref(), tls.as_deref()).await {
                Ok(mut conn) => conn.call(&argv).await,
                Err(e) => Err(e),
            };
            match answer {
                Ok(Value::SimpleString(s)) if s.as_ref() == b"OK" => {}
                Ok(value) => {
                    // The node's own answer, as one Valkey gives it.
                    let mut out = BytesMut::new();
                    value.encode_resp2(&mut out);
                    refusal = Some(out.freeze());
                    break;
                }
                Err(e) => {
                    refusal = Some(crate::reply::error(&format!("slotgate: node {addr}: {e}")));
                    break;
                }
            }
        }
        match (refusal, masters.is_empty()) {
            (Some(refusal), _) => refusal,
            (None, true) => crate::reply::error("slotgate: no master to ask"),
            (None, false) => {
                // Before the reply: the session takes the mode when the reply wakes it.
                mode.import_source.set(Some(on));
                Bytes::from_static(b"+OK\r\n")
            }
        }
    });
    true
}

/// The mode the masters accepted since the session last looked, into its info: called
/// before the session reads on after the request (`Session::release_held`).
pub(crate) fn take(cell: &ClientCell, info: &mut SessionInfo) {
    if let Some(on) = cell.import_source.take() {
        info.import_source = on;
    }
}
