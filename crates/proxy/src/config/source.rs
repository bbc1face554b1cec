//! Where a reload finds the configuration: the file, and what the binary adds around it
//! (its command-line overrides, its log level). Held by the proxy once the binary names it.

use std::path::PathBuf;

use super::Config;

/// Where a reload reads the configuration, and what the binary does around it.
pub struct ConfigSource {
    pub path: PathBuf,
    /// Applied after parsing: the command-line flags that override the file.
    pub overrides: Box<dyn Fn(&mut Config) + Send + Sync>,
    /// Told every configuration applied (the binary sets its log level from it).
    pub on_applied: Box<dyn Fn(&Config) + Send + Sync>,
}
