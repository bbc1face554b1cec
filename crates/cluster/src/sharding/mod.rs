//! Where a key lives in a sharded pool of standalone servers, placed as twemproxy places it.
//!
//! Fleets of standalone Redis behind nutcracker have their data where nutcracker's hash
//! and distribution put it. slotgate serves such a pool by computing the same server for
//! every key (`Sharding::server_of`), and from there routes as it routes a cluster: the
//! server's index plays the part of a slot, so ordering per slot, splitting multi-key
//! commands and fan-out work unchanged.
//!
//! ```text
//!   key ─hash_tag─▶ tagged part ─hash (hash.rs)─▶ u32 ─distribution─▶ server index
//!                                                 ketama: the continuum's next point
//!                                                 modula: hash % total weight
//!                                                 random: any server
//! ```
//!
//! Not covered: nutcracker's `auto_eject_hosts`, which rebuilds the distribution without
//! a failed server and so moves its keys elsewhere; slotgate keeps every key on its server.

use std::fmt;
use std::str::FromStr;

pub mod hash;
mod ketama;

pub use hash::{HashFn, UnknownHash};

/// One server of the pool: its address and what nutcracker's distributions read of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardServer {
    /// `host:port`, ready to dial.
    pub addr: String,
    /// Share of the keys, relative to the others' (at least 1).
    pub weight: u32,
    /// The name ketama hashes: the configured name, else `host:port` (`host` alone for
    /// port 11211, as libmemcached did).
    pub name: String,
}

/// A twemproxy `distribution:` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Distribution {
    #[default]
    Ketama,
    Modula,
    Random,
}

impl FromStr for Distribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Distribution, String> {
        match s {
            "ketama" => Ok(Distribution::Ketama),
            "modula" => Ok(Distribution::Modula),
            "random" => Ok(Distribution::Random),
            _ => Err(format!(
                "unknown distribution '{s}' (one of: ketama, modula, random)"
            )),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
            Distribution::Random => "random",
        })
    }
}

/// Why a pool cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardingError {
    #[error("a sharded pool needs at least one server")]
    NoServers,
    #[error("a sharded pool has at most 16384 servers")]
    TooManyServers,
    #[error("server {0} has weight 0")]
    ZeroWeight(String),
    #[error("two servers are named {0}")]
    DuplicateName(String),
    #[error("hash_tag must be two characters, like \"{{}}\"")]
    BadHashTag,
    #[error("the servers' weights add up to more than {MAX_TOTAL_WEIGHT}")]
    WeightTooLarge,
}

/// Servers `127.0.0.1:<port>`, weight 1, fnv1a_64 and ketama with `tag`: the tests'
/// shorthand for a pool (`routes.rs`, `placement.rs`).
#[cfg(test)]
pub(crate) fn local_pool(ports: &[u16], tag: &[u8]) -> Sharding {
    let servers = ports
        .iter()
        .map(|p| ShardServer {
            addr: format!("127.0.0.1:{p}"),
            weight: 1,
            name: format!("127.0.0.1:{p}"),
        })
        .collect();
    Sharding::new(servers, HashFn::default(), Distribution::Ketama, tag).unwrap()
}

/// Modula keeps one entry per unit of weight: this bounds its table (16 MB).
const MAX_TOTAL_WEIGHT: u64 = 1_000_000;

/// A pool's placement: servers in configuration order, hash, tag and distribution.
#[derive(Debug, Clone)]
pub struct Sharding {
    servers: Vec<ShardServer>,
    hash: HashFn,
    distribution: Distribution,
    tag: Option<[u8; 2]>,
    /// Ketama's points, sorted by value; modula's one entry per unit of weight.
    continuum: Vec<ketama::Point>,
}

impl Sharding {
    /// The placement of `servers`; `hash_tag` is empty or two bytes. The servers are
    /// ordered as nutcracker orders them, by name (shorter first, then bytewise), which
    /// is what modula's and random's index reads; names must differ, as nutcracker
    /// requires.
    pub fn new(
        mut servers: Vec<ShardServer>,
        hash: HashFn,
        distribution: Distribution,
        hash_tag: &[u8],
    ) -> Result<Sharding, ShardingError> {
        if servers.is_empty() {
            return Err(ShardingError::NoServers);
        }
        if servers.len() > crate::SLOT_COUNT {
            return Err(ShardingError::TooManyServers);
        }
        if let Some(s) = servers.iter().find(|s| s.weight == 0) {
            return Err(ShardingError::ZeroWeight(s.addr.clone()));
        }
        if servers.iter().map(|s| u64::from(s.weight)).sum::<u64>() > MAX_TOTAL_WEIGHT {
            return Err(ShardingError::WeightTooLarge);
        }
        servers.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        if let Some(w) = servers.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(ShardingError::DuplicateName(w[0].name.clone()));
        }
        let tag = match hash_tag {
            [] => None,
            [open, close] => Some([*open, *close]),
            _ => return Err(ShardingError::BadHashTag),
        };
        let continuum = match distribution {
            Distribution::Ketama => ketama::continuum(&servers),
            Distribution::Modula | Distribution::Random => ketama::by_weight(&servers),
        };
        Ok(Sharding {
            servers,
            hash,
            distribution,
            tag,
            continuum,
        })
    }

    /// The servers in placement order (nutcracker's: by name), which `server_of` indexes.
    pub fn servers(&self) -> &[ShardServer] {
        &self.servers
    }

    pub fn hash(&self) -> HashFn {
        self.hash
    }

    pub fn distribution(&self) -> Distribution {
        self.distribution
    }

    /// The index of the server `key` lives on.
    pub fn server_of(&self, key: &[u8]) -> u16 {
        if self.servers.len() == 1 {
            return 0;
        }
        let key = self.tagged(key);
        let index = match self.distribution {
            Distribution::Ketama => ketama::dispatch(&self.continuum, self.hash_of(key)),
            Distribution::Modula => {
                let at = self.hash_of(key) as usize % self.continuum.len();
                self.continuum[at].server
            }
            Distribution::Random => {
                let at = rand_index(self.continuum.len());
                self.continuum[at].server
            }
        };
        index as u16
    }

    /// nutcracker hashes an empty key (or its empty tag) as 0.
    fn hash_of(&self, key: &[u8]) -> u32 {
        match key.is_empty() {
            true => 0,
            false => self.hash.hash(key),
        }
    }

    /// The part of `key` the hash reads: between the tag's first opening byte and the next
    /// closing byte after it, when that part is not empty; else the whole key.
    fn tagged<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        let Some([open, close]) = self.tag else {
            return key;
        };
        let Some(start) = key.iter().position(|&b| b == open) else {
            return key;
        };
        match key[start + 1..].iter().position(|&b| b == close) {
            Some(len) if len > 0 => &key[start + 1..start + 1 + len],
            _ => key,
        }
    }
}

/// A uniformly spread index below `n` from a per-thread xorshift, as nutcracker's
/// `random()`: no lock, no allocation.
fn rand_index(n: usize) -> usize {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seeded per thread from an address and the clock's nanoseconds.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| u64::from(d.subsec_nanos()));
            x = (s as *const Cell<u64> as u64) ^ nanos.rotate_left(32) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x % n as u64) as usize
    })
}

#[cfg(test)]
mod tests;
