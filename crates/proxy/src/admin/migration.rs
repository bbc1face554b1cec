//! `[migration]` seen and steered from the admin side: INFO `# Migration`, its metrics, and
//! `POST /migration/<pause|resume|cutover>` (docs/migration.md).

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::admin::exposition::{sample, Described, Metric};
use crate::context::Shared;
use crate::migration::{Migration, Phase};

/// This file's metrics, listed with the others' (`metrics::METRICS`).
pub const METRICS: &[Metric] = &[
    (
        "slotgate_migration_keys_total",
        "counter",
        "Keys the migration's movers handled ([migration]), by outcome.",
    ),
    (
        "slotgate_migration_gated_total",
        "counter",
        "Requests held until their keys left the migration's source.",
    ),
    (
        "slotgate_migration_scanned_total",
        "counter",
        "Keys the migration's copier met on the source.",
    ),
    (
        "slotgate_migration_bytes_total",
        "counter",
        "Bytes the migration moved: DUMP payloads, and elements of keys copied by slices.",
    ),
    (
        "slotgate_migration_sliced_total",
        "counter",
        "Keys too big to DUMP at once (dump_max_bytes) the migration restored by slices.",
    ),
    (
        "slotgate_migration_verify_total",
        "counter",
        "Keys the migration's verifier sampled, by outcome (conflict: live on both sides).",
    ),
    (
        "slotgate_migration_phase",
        "gauge",
        "The migration's phase: 1 for the current one.",
    ),
    (
        "slotgate_migration_left_keys",
        "gauge",
        "Keys the copier's last complete pass found on the source.",
    ),
];

/// INFO `# Migration`, shown only with a `[migration]` (`info.rs`).
pub(crate) fn info(shared: &Shared, out: &mut String) {
    let Some(m) = shared.migration.as_deref() else {
        return;
    };
    let s = &m.stats;
    let left = m.left().map_or("unknown".to_string(), |l| l.to_string());
    let conflict = crate::context::hotkeys::shown(&m.last_conflict());
    let lines: [(&str, String); 17] = [
        ("migration_name", m.name().into()),
        ("migration_phase", m.phase().name().into()),
        ("migration_source", m.source_servers().join(",")),
        ("migration_keys_moved", s.moved.load(Relaxed).to_string()),
        ("migration_keys_absent", s.absent.load(Relaxed).to_string()),
        ("migration_keys_kept", s.kept.load(Relaxed).to_string()),
        ("migration_lease_waits", s.busy.load(Relaxed).to_string()),
        ("migration_errors", s.errors.load(Relaxed).to_string()),
        (
            "migration_requests_gated",
            s.gated.load(Relaxed).to_string(),
        ),
        (
            "migration_keys_scanned",
            s.scanned.load(Relaxed).to_string(),
        ),
        ("migration_passes", s.passes.load(Relaxed).to_string()),
        ("migration_left_keys", left),
        ("migration_bytes", s.bytes.load(Relaxed).to_string()),
        ("migration_keys_sliced", s.sliced.load(Relaxed).to_string()),
        ("migration_verified", s.verified.load(Relaxed).to_string()),
        (
            "migration_verify_conflicts",
            s.conflicts.load(Relaxed).to_string(),
        ),
        ("migration_last_conflict", conflict),
    ];
    for (key, value) in lines {
        let _ = write!(out, "{key}:{value}\r\n");
    }
    let _ = write!(
        out,
        "migration_last_error:{}\r\n",
        m.last_error().replace(['\r', '\n'], " ")
    );
}

/// The migration's samples, when one is configured.
pub(crate) fn metrics(shared: &Shared, out: &mut String, described: &mut Described) {
    let Some(m) = shared.migration.as_deref() else {
        return;
    };
    let s = &m.stats;
    let outcomes = [
        ("moved", &s.moved),
        ("absent", &s.absent),
        ("kept", &s.kept),
        ("failed", &s.errors),
    ];
    for (outcome, n) in outcomes {
        let labels = format!("outcome=\"{outcome}\"");
        sample(
            out,
            described,
            "slotgate_migration_keys_total",
            &labels,
            n.load(Relaxed),
        );
    }
    sample(
        out,
        described,
        "slotgate_migration_gated_total",
        "",
        s.gated.load(Relaxed),
    );
    sample(
        out,
        described,
        "slotgate_migration_scanned_total",
        "",
        s.scanned.load(Relaxed),
    );
    sample(
        out,
        described,
        "slotgate_migration_bytes_total",
        "",
        s.bytes.load(Relaxed),
    );
    sample(
        out,
        described,
        "slotgate_migration_sliced_total",
        "",
        s.sliced.load(Relaxed),
    );
    let conflicts = s.conflicts.load(Relaxed);
    let ok = s.verified.load(Relaxed).saturating_sub(conflicts);
    for (outcome, n) in [("ok", ok), ("conflict", conflicts)] {
        let labels = format!("outcome=\"{outcome}\"");
        sample(
            out,
            described,
            "slotgate_migration_verify_total",
            &labels,
            n,
        );
    }
    for phase in [Phase::Copying, Phase::Paused, Phase::Done] {
        let labels = format!("phase=\"{}\"", phase.name());
        let on = u64::from(m.phase() == phase);
        sample(out, described, "slotgate_migration_phase", &labels, on);
    }
    if let Some(left) = m.left() {
        sample(out, described, "slotgate_migration_left_keys", "", left);
    }
}

/// `POST /migration/<action>`: Ok, the phase now; Err, why not (a conflict the operator
/// can act on) or that there is no migration.
pub(crate) async fn act(shared: &Shared, action: &str) -> Result<String, (bool, String)> {
    let Some(m): Option<&Migration> = shared.migration.as_deref() else {
        return Err((false, "no [migration] is configured\n".into()));
    };
    match m.act(&shared.topology, action).await {
        Ok(phase) => Ok(format!("migration {}: {}\n", m.name(), phase.name())),
        Err(why) => Err((true, format!("{why}\n"))),
    }
}
