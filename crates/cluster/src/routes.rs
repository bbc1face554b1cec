//! Routes by key prefix: several sharded pools behind one listener, a key going to the pool
//! whose prefix is the longest one it starts with, or to the catch-all pool.
//!
//! Fleets split by key family (sessions on one set of servers, caches on another, each
//! behind its own nutcracker) can be served by one proxy without a client knowing. Each pool
//! keeps its own hash, distribution and tag, so a key lands on the server its pool's own
//! nutcracker would pick; the pools' servers are then laid end to end in one slot space,
//! the catch-all first:
//!
//! ```text
//!   key ─longest prefix─▶ pool (catch-all if none) ─pool.server_of─▶ i ─▶ slot base + i
//!
//!   slots: [ catch-all 0..a | route 1: a..a+b | route 2: a+b..a+b+c | … ]
//! ```
//!
//! Everything downstream reads only the slot, so keys of different pools are different
//! slots: a multi-key command over pools is split as over servers, and one that must be
//! atomic is refused with CROSSSLOT, as Redis Cluster refuses keys of two slots.

use crate::sharding::Sharding;
use crate::SLOT_COUNT;

/// A route table's own mistakes, found when it is built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutesError {
    #[error("a route's prefix is empty: the catch-all pool takes every other key")]
    EmptyPrefix,
    #[error("two routes have the prefix {0:?}")]
    DuplicatePrefix(String),
    #[error("the pools have more than 16384 servers in all")]
    TooManyServers,
}

/// One prefix route: its pool and where the pool's servers start in the slot space.
#[derive(Debug, Clone)]
struct PrefixRoute {
    prefix: Box<[u8]>,
    base: u16,
    pool: Sharding,
}

/// The catch-all pool and the prefix routes, longest prefix first.
#[derive(Debug, Clone)]
pub struct Routes {
    catch_all: Sharding,
    /// Sorted by prefix length, longest first, so the first match is the longest one.
    routes: Vec<PrefixRoute>,
}

impl Routes {
    /// The catch-all pool (slots from 0) and `routes` as configured: their slots follow in
    /// the order given, whatever the prefixes' lengths.
    pub fn new(
        catch_all: Sharding,
        routes: Vec<(Vec<u8>, Sharding)>,
    ) -> Result<Routes, RoutesError> {
        let mut next = catch_all.servers().len();
        let mut built = Vec::with_capacity(routes.len());
        for (prefix, pool) in routes {
            if prefix.is_empty() {
                return Err(RoutesError::EmptyPrefix);
            }
            let base = u16::try_from(next)
                .ok()
                .filter(|_| next + pool.servers().len() <= SLOT_COUNT)
                .ok_or(RoutesError::TooManyServers)?;
            next += pool.servers().len();
            built.push(PrefixRoute {
                prefix: prefix.into_boxed_slice(),
                base,
                pool,
            });
        }
        let mut names: Vec<&[u8]> = built.iter().map(|r| &*r.prefix).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(RoutesError::DuplicatePrefix(
                String::from_utf8_lossy(w[0]).into_owned(),
            ));
        }
        // Stable: equal lengths keep their configured order (no two are equal anyway).
        built.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        Ok(Routes {
            catch_all,
            routes: built,
        })
    }

    /// The slot `key` routes by: its pool's base plus the server its pool places it on.
    #[inline]
    pub fn slot(&self, key: &[u8]) -> u16 {
        match self.routes.iter().find(|r| key.starts_with(&r.prefix)) {
            Some(r) => r.base + r.pool.server_of(key),
            None => self.catch_all.server_of(key),
        }
    }

    /// How many servers the catch-all pool has: its slots are `0..n`, where commands
    /// without keys go.
    pub fn catch_all_servers(&self) -> u16 {
        self.catch_all.servers().len() as u16
    }

    /// Every pool with the slot its first server has: the catch-all, then the routes in
    /// slot order, each with its prefix (empty for the catch-all).
    pub fn pools(&self) -> Vec<(&[u8], u16, &Sharding)> {
        let mut all: Vec<(&[u8], u16, &Sharding)> = vec![(&[], 0, &self.catch_all)];
        all.extend(self.routes.iter().map(|r| (&*r.prefix, r.base, &r.pool)));
        all.sort_by_key(|(_, base, _)| *base);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(ports: &[u16]) -> Sharding {
        crate::sharding::local_pool(ports, b"{}")
    }

    fn table() -> Routes {
        Routes::new(
            pool(&[1, 2]),
            vec![
                (b"user:".to_vec(), pool(&[3, 4, 5])),
                (b"user:session:".to_vec(), pool(&[6])),
                (b"u".to_vec(), pool(&[7])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_longest_prefix_wins_and_each_pool_places_by_its_own_servers() {
        let r = table();
        let (user, session, u) = (pool(&[3, 4, 5]), pool(&[6]), pool(&[7]));
        let catch_all = pool(&[1, 2]);
        for i in 0..500 {
            let k = format!("user:{i}");
            assert_eq!(r.slot(k.as_bytes()), 2 + user.server_of(k.as_bytes()));
            let k = format!("user:session:{i}");
            assert_eq!(
                r.slot(k.as_bytes()),
                2 + 3 + session.server_of(k.as_bytes())
            );
            let k = format!("u{i}");
            assert_eq!(r.slot(k.as_bytes()), 2 + 3 + 1 + u.server_of(k.as_bytes()));
            let k = format!("other:{i}");
            assert_eq!(r.slot(k.as_bytes()), catch_all.server_of(k.as_bytes()));
        }
        // A key equal to a prefix is the route's; a shorter one is not.
        assert_eq!(r.slot(b"user:"), 2 + user.server_of(b"user:"));
        assert_eq!(r.slot(b"user"), 2 + 3 + 1);
        assert_eq!(r.slot(b""), catch_all.server_of(b""));
    }

    #[test]
    fn pools_list_in_slot_order() {
        let r = table();
        let bases: Vec<(Vec<u8>, u16, usize)> = r
            .pools()
            .into_iter()
            .map(|(p, b, s)| (p.to_vec(), b, s.servers().len()))
            .collect();
        assert_eq!(
            bases,
            vec![
                (b"".to_vec(), 0, 2),
                (b"user:".to_vec(), 2, 3),
                (b"user:session:".to_vec(), 5, 1),
                (b"u".to_vec(), 6, 1),
            ]
        );
        assert_eq!(r.catch_all_servers(), 2);
    }

    #[test]
    fn bad_tables_are_refused() {
        let empty = Routes::new(pool(&[1]), vec![(Vec::new(), pool(&[2]))]);
        assert_eq!(empty.unwrap_err(), RoutesError::EmptyPrefix);
        let twice = Routes::new(
            pool(&[1]),
            vec![(b"a:".to_vec(), pool(&[2])), (b"a:".to_vec(), pool(&[3]))],
        );
        assert_eq!(
            twice.unwrap_err(),
            RoutesError::DuplicatePrefix("a:".into())
        );
        let big: Vec<u16> = (1..=9000).collect();
        let many = Routes::new(pool(&big), vec![(b"a:".to_vec(), pool(&big))]);
        assert_eq!(many.unwrap_err(), RoutesError::TooManyServers);
    }
}
