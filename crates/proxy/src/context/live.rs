//! The part of the configuration a reload may change, swapped whole (`ArcSwap`): a request
//! reads the version in force when it arrives, and never a mix of two.
//!
//! Users keep their index across reloads (sessions and the client registry hold it): a
//! user still configured keeps its place with its new password and rules, a new one is
//! appended, a removed one leaves a tombstone that matches no password and may run
//! nothing (its sessions are closed by the reload, as Redis's ACL DELUSER does).

use crate::auth::User;
use crate::config::Config;

/// What requests read of the configuration.
pub struct Live {
    pub config: Config,
    /// Users clients may AUTH as, the `requirepass` default user first when set.
    pub(crate) users: Vec<User>,
}

impl Live {
    /// The first version, at start: `config` was validated.
    pub(crate) fn new(config: Config) -> Live {
        let users = configured_users(&config);
        Live { config, users }
    }

    /// The next version: `config`'s users placed where `self` had them.
    pub(crate) fn next(&self, config: Config) -> Live {
        let mut fresh: Vec<Option<User>> =
            configured_users(&config).into_iter().map(Some).collect();
        let mut users: Vec<User> = self
            .users
            .iter()
            .map(|old| {
                let same = fresh
                    .iter_mut()
                    .find(|u| u.as_ref().is_some_and(|u| u.name == old.name));
                same.and_then(Option::take)
                    .unwrap_or_else(|| User::removed(&old.name))
            })
            .collect();
        users.extend(fresh.into_iter().flatten());
        Live { config, users }
    }

    /// Indexes of users `self` has and `next` removed.
    pub(crate) fn removed_in(&self, next: &Live) -> Vec<usize> {
        (0..self.users.len())
            .filter(|&i| {
                !self.users[i].is_removed() && next.users.get(i).is_some_and(User::is_removed)
            })
            .collect()
    }
}

/// `requirepass`'s default user, then the configured ones (checked by `Config::validate`).
fn configured_users(config: &Config) -> Vec<User> {
    let auth = &config.auth;
    let default =
        (!auth.requirepass.is_empty()).then(|| User::default_with_password(&auth.requirepass));
    default
        .into_iter()
        .chain(auth.users.iter().filter_map(|u| User::from_config(u).ok()))
        .collect()
}
