//! `[hotkeys]`: the hot-key board (`context/hotkeys.rs`), INFO `hotkeys`, HOTKEYS.

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HotkeysConfig {
    /// Count the first key of the sampled requests (one in 16). Reloadable.
    pub enabled: bool,
    /// A window's length: a key leaves the board within two windows of cooling down.
    pub window_seconds: u64,
    /// Keys INFO `hotkeys` lists, reads, writes and big keys each (at most 64, the
    /// sketch's size).
    pub top: usize,
}

impl Default for HotkeysConfig {
    fn default() -> Self {
        HotkeysConfig {
            enabled: false,
            window_seconds: 10,
            top: 10,
        }
    }
}

impl HotkeysConfig {
    /// Keys a worker's sketch holds, hence the most `top` may ask for.
    pub const SKETCH_KEYS: usize = 64;

    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.window_seconds == 0 {
            return Err(ConfigError::Zero("hotkeys.window_seconds"));
        }
        if self.top == 0 || self.top > Self::SKETCH_KEYS {
            return Err(ConfigError::Hotkeys(format!(
                "top must be 1 to {}",
                Self::SKETCH_KEYS
            )));
        }
        Ok(())
    }
}
