//! The BCAST prefixes the proxy's clients track, counted as Redis counts its prefix table
//! (INFO's `tracking_total_prefixes`: distinct prefixes, whichever worker's clients hold
//! them). Changed only by CLIENT TRACKING and a tracking client's end, never per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Every prefix held, and how many clients hold it.
#[derive(Debug, Default)]
pub(crate) struct TrackingPrefixes(Mutex<HashMap<Bytes, usize>>);

impl TrackingPrefixes {
    /// Distinct prefixes held now.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Bytes, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One client's prefixes in the table, given back when dropped (tracking off, RESET, the
/// client's end).
pub(crate) struct PrefixClaim {
    table: Arc<TrackingPrefixes>,
    held: Vec<Bytes>,
}

impl PrefixClaim {
    pub(crate) fn new(table: Arc<TrackingPrefixes>) -> PrefixClaim {
        PrefixClaim {
            table,
            held: Vec::new(),
        }
    }

    /// Hold exactly `prefixes` (the client's, without duplicates) from now on.
    pub(crate) fn hold(&mut self, prefixes: &[Bytes]) {
        let mut table = self.table.lock();
        release(&mut table, &mut self.held);
        for p in prefixes {
            *table.entry(p.clone()).or_default() += 1;
        }
        self.held.extend_from_slice(prefixes);
    }
}

fn release(table: &mut HashMap<Bytes, usize>, held: &mut Vec<Bytes>) {
    for p in held.drain(..) {
        if let Some(n) = table.get_mut(&p) {
            *n -= 1;
            if *n == 0 {
                table.remove(&p);
            }
        }
    }
}

impl Drop for PrefixClaim {
    fn drop(&mut self) {
        release(&mut self.table.lock(), &mut self.held);
    }
}
