//! `[near_cache]`: hot keys' values served from the proxy's memory, kept exact by RESP3
//! tracking (`session/near_cache.rs`, docs/hotkeys.md). Its own section: it changes what
//! the proxy answers, where `[hotkeys]` only counts.

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NearCacheConfig {
    /// Answer GET of a cached key from the proxy. Restart-only: writes are accounted for
    /// the cache from the start, so an entry can never miss one.
    pub enabled: bool,
    /// A key read at least this often (estimated from the sampled requests, one in 16) is
    /// cached; 0 caches only the keys of `patterns`.
    pub auto_reads_per_second: u64,
    /// Glob patterns (as KEYS matches them) of keys cached from their first read.
    pub patterns: Vec<String>,
    /// Values held at most, for the whole proxy (each worker holds its share), charged to
    /// the memory budget.
    pub max_bytes: usize,
    /// A value longer than this is never cached.
    pub max_value_bytes: usize,
}

impl Default for NearCacheConfig {
    fn default() -> Self {
        NearCacheConfig {
            enabled: false,
            auto_reads_per_second: 1000,
            patterns: Vec::new(),
            max_bytes: 64 * 1024 * 1024,
            max_value_bytes: 64 * 1024,
        }
    }
}

impl NearCacheConfig {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        if self.max_bytes == 0 {
            return Err(ConfigError::Zero("near_cache.max_bytes"));
        }
        if self.max_value_bytes == 0 {
            return Err(ConfigError::Zero("near_cache.max_value_bytes"));
        }
        if self.auto_reads_per_second == 0 && self.patterns.is_empty() {
            return Err(ConfigError::NearCache(
                "nothing would be cached: set auto_reads_per_second above 0, or patterns".into(),
            ));
        }
        if self.patterns.iter().any(String::is_empty) {
            return Err(ConfigError::NearCache("a pattern is empty".into()));
        }
        Ok(())
    }
}
