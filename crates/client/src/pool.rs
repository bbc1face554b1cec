//! The node connections of one client: at most one live connection actor per
//! address, opened on first use and replaced on the next use after it was
//! poisoned. Shared by requests and by the topology refresher, so a refresh
//! travels over a connection that is already open (no TCP handshake per
//! refresh).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::conn::ConnHandle;
use crate::stats::{bump, Counters};

#[derive(Debug)]
pub(crate) struct Pool {
    conns: Mutex<HashMap<String, ConnHandle>>,
    connect_timeout: Duration,
    resp3: bool,
    stats: Arc<Counters>,
}

impl Pool {
    pub fn new(connect_timeout: Duration, resp3: bool, stats: Arc<Counters>) -> Pool {
        Pool {
            conns: Mutex::new(HashMap::new()),
            connect_timeout,
            resp3,
            stats,
        }
    }

    /// The live connection to `addr`, opening one if there is none. Must run
    /// inside the client's runtime (the actor is a task).
    pub fn get(&self, addr: &str) -> ConnHandle {
        // The lock only guards a map lookup; it is never held across an await.
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = conns.get(addr) {
            if !c.is_closed() {
                return c.clone();
            }
            bump(&self.stats.reconnects);
        }
        let c = ConnHandle::spawn(addr.to_string(), self.connect_timeout, self.resp3);
        conns.insert(addr.to_string(), c.clone());
        c
    }
}
