//! Reloading the configuration without a restart (SIGHUP, or `POST /reload` on the admin
//! port): what can change live takes effect for new requests at once; what cannot is kept
//! as it runs and reported as needing a restart; an invalid file changes nothing.
//!
//! Everything is checked (the TOML, `validate`, every TLS file) before anything is
//! installed, so a reload is all or nothing. See docs/operations.md for the list.

use std::sync::atomic::Ordering;

use crate::config::{Config, ConfigError};
use crate::context::live::Live;
use crate::context::Shared;
use crate::tls::{AcceptorBuilt, ConnectorBuilt, TlsError};

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReloadReport {
    /// Sections or keys that changed and are now in force.
    pub applied: Vec<&'static str>,
    /// Keys that changed in the file but keep their running value until a restart.
    pub needs_restart: Vec<&'static str>,
}

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("no configuration file to reload (start with --config)")]
    NoSource,
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Keys read only at start: a changed value is reported and the running one kept.
type Keep = fn(&mut Config, &Config) -> bool;
const RESTART_ONLY: &[(&str, Keep)] = &[
    ("proxy.listen", |n, o| {
        keep(&mut n.proxy.listen, &o.proxy.listen)
    }),
    ("proxy.extra_listen", |n, o| {
        keep(&mut n.proxy.extra_listen, &o.proxy.extra_listen)
    }),
    ("proxy.threads", |n, o| {
        keep(&mut n.proxy.threads, &o.proxy.threads)
    }),
    ("proxy.event_interval", |n, o| {
        keep(&mut n.proxy.event_interval, &o.proxy.event_interval)
    }),
    ("proxy.turn_quantum_bytes", |n, o| {
        keep(&mut n.proxy.turn_quantum_bytes, &o.proxy.turn_quantum_bytes)
    }),
    ("tls.listen", |n, o| keep(&mut n.tls.listen, &o.tls.listen)),
    ("admin.listen", |n, o| {
        keep(&mut n.admin.listen, &o.admin.listen)
    }),
    ("cluster.seeds", |n, o| {
        keep(&mut n.cluster.seeds, &o.cluster.seeds)
    }),
    ("sharded", |n, o| keep(&mut n.sharded, &o.sharded)),
    ("routes", |n, o| keep(&mut n.routes, &o.routes)),
    ("sentinel", |n, o| keep(&mut n.sentinel, &o.sentinel)),
    ("mirror", |n, o| keep(&mut n.mirror, &o.mirror)),
    ("migration", |n, o| keep(&mut n.migration, &o.migration)),
    ("near_cache", |n, o| keep(&mut n.near_cache, &o.near_cache)),
    ("cluster.topology_command", |n, o| {
        keep(&mut n.cluster.topology_command, &o.cluster.topology_command)
    }),
    ("cluster.backend_user", |n, o| {
        keep(&mut n.cluster.backend_user, &o.cluster.backend_user)
    }),
    ("cluster.backend_password", |n, o| {
        keep(&mut n.cluster.backend_password, &o.cluster.backend_password)
    }),
    ("backend_tls.enabled", |n, o| {
        keep(&mut n.backend_tls.enabled, &o.backend_tls.enabled)
    }),
    ("limits.memory_budget_bytes", |n, o| {
        keep(
            &mut n.limits.memory_budget_bytes,
            &o.limits.memory_budget_bytes,
        )
    }),
];

fn keep<T: PartialEq + Clone>(new: &mut T, old: &T) -> bool {
    let changed = new != old;
    *new = old.clone();
    changed
}

/// Re-read the file named by `source` and apply it.
pub(crate) fn from_source(shared: &Shared) -> Result<ReloadReport, ReloadError> {
    let guard = shared
        .config_source
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let Some(source) = guard.as_ref() else {
        return counted(shared, Err(ReloadError::NoSource));
    };
    let parsed = std::fs::read_to_string(&source.path)
        .map_err(|e| ReloadError::Read {
            path: source.path.display().to_string(),
            reason: e.to_string(),
        })
        .and_then(|text| Ok(Config::from_toml(&text)?));
    let result = parsed.and_then(|mut config| {
        (source.overrides)(&mut config);
        let report = install(shared, config)?;
        (source.on_applied)(&shared.live.load().config);
        Ok(report)
    });
    counted(shared, result)
}

/// Apply `config` as a reload would (for embedders and tests). It takes the lock a reload
/// from the file holds, so the two never interleave: each checks against the configuration
/// the other installed, never against one it is about to replace.
pub(crate) fn apply(shared: &Shared, config: Config) -> Result<ReloadReport, ReloadError> {
    let _one_at_a_time = shared
        .config_source
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    counted(shared, install(shared, config))
}

/// Count and log the outcome.
fn counted(
    shared: &Shared,
    result: Result<ReloadReport, ReloadError>,
) -> Result<ReloadReport, ReloadError> {
    match &result {
        Ok(report) => {
            shared.reloads.fetch_add(1, Ordering::Relaxed);
            tracing::info!(applied = ?report.applied, "configuration reloaded");
            if !report.needs_restart.is_empty() {
                tracing::warn!(keys = ?report.needs_restart, "changed keys take effect only after a restart");
            }
        }
        Err(e) => {
            shared.reload_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "configuration reload refused; the running configuration stays");
        }
    }
    result
}

/// Check everything, then install it all. The caller holds the reload lock.
fn install(shared: &Shared, mut config: Config) -> Result<ReloadReport, ReloadError> {
    let old = shared.live.load_full();
    let mut report = ReloadReport::default();
    // The running values go back first, so validation judges the configuration that will
    // run: checked as written, a file moving `listen` to loopback while dropping
    // `requirepass` would pass, and leave the public listener open.
    for (key, keep) in RESTART_ONLY {
        if keep(&mut config, &old.config) {
            report.needs_restart.push(key);
        }
    }
    config.validate()?;
    let tls = prepare_tls(shared, &config)?;
    report.applied = changed_sections(&old.config, &config);
    install_tls(shared, tls, &mut report);
    shared.slowlog.configure(&config.slowlog);
    shared
        .topology
        .set_pacing(crate::topology::pacing(&config.cluster));
    shared.replicas.set_max_lag(config.cluster.max_replica_lag);
    shared.replicas.set_zone(&config.cluster.availability_zone);
    let next = Live::next(&old, config);
    swap(shared, &old, next);
    Ok(report)
}

/// ACL SETUSER and DELUSER through the proxy: `change` gets the users in force and gives
/// the next list (a user keeps its index; a deleted one becomes a tombstone), or the error
/// to answer. Installed as a reload installs users, under the same lock, so the two never
/// interleave. The configuration file is not written: the next reload or restart goes back
/// to its `[[users]]`, as Redis's ACL SETUSER lasts until a restart without an aclfile.
pub(crate) fn change_users<E>(
    shared: &Shared,
    change: impl FnOnce(&Live) -> Result<Vec<crate::auth::User>, E>,
) -> Result<(), E> {
    change_live(shared, |old| {
        Ok(Live {
            config: old.config.clone(),
            users: change(old)?,
        })
    })
}

/// `change_users` for a change of the client authentication's configuration too (CONFIG
/// SET requirepass, `session/acl_users.rs`): `change` returns the whole next `Live`, whose
/// users keep their indexes (sessions hold them).
pub(crate) fn change_live<E>(
    shared: &Shared,
    change: impl FnOnce(&Live) -> Result<Live, E>,
) -> Result<(), E> {
    let _one_at_a_time = shared
        .config_source
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let old = shared.live.load_full();
    let next = change(&old)?;
    swap(shared, &old, next);
    Ok(())
}

/// Put `next` in force, and close the sessions of users it removed: each session looks at
/// its own user when woken (`Session::poll`), so the decision is on the user it is now,
/// never on the one its registry slot last showed (a client that ran AUTH as another user
/// in the same batch as someone's ACL DELUSER of its former user stays).
fn swap(shared: &Shared, old: &Live, next: Live) {
    let removed = !old.removed_in(&next).is_empty();
    shared.live.store(std::sync::Arc::new(next));
    shared.live_gen.fetch_add(1, Ordering::Release);
    shared.group.wake.notify_one();
    if removed {
        for worker in &shared.workers {
            worker.registry.wake_all();
        }
    }
}

/// The sections whose values changed (and are live).
fn changed_sections(old: &Config, new: &Config) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 9] = [
        ("proxy", old.proxy != new.proxy),
        ("cluster", old.cluster != new.cluster),
        ("limits", old.limits != new.limits),
        ("auth", old.auth != new.auth),
        ("slowlog", old.slowlog != new.slowlog),
        ("log", old.log != new.log),
        ("tls", old.tls != new.tls),
        ("backend_tls", old.backend_tls != new.backend_tls),
        ("group", old.group != new.group),
    ];
    checks.iter().filter(|(_, c)| *c).map(|(n, _)| *n).collect()
}

/// Both sides' certificates, loaded again even from unchanged paths: a rotation replaces
/// the files in place.
fn prepare_tls(
    shared: &Shared,
    config: &Config,
) -> Result<(Option<AcceptorBuilt>, Option<ConnectorBuilt>), TlsError> {
    let server = match &shared.tls_acceptor {
        Some(_) => Some(crate::tls::Acceptor::prepare(&config.tls)?),
        None => None,
    };
    let client = match &shared.backend_tls {
        Some(_) => Some(crate::tls::Connector::prepare(&config.backend_tls)?),
        None => None,
    };
    Ok((server, client))
}

fn install_tls(
    shared: &Shared,
    (server, client): (Option<AcceptorBuilt>, Option<ConnectorBuilt>),
    report: &mut ReloadReport,
) {
    if let (Some(acceptor), Some(built)) = (&shared.tls_acceptor, server) {
        acceptor.install(built);
        report.applied.push("tls certificates");
    }
    if let (Some(connector), Some(built)) = (&shared.backend_tls, client) {
        connector.install(built);
        report.applied.push("backend_tls certificates");
    }
}
