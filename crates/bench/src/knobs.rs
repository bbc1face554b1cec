//! The proxy's fairness knobs as scenario flags (`--event-interval`, `--turn-quantum-kb`), so
//! one binary can be measured with several settings: unset, slotgate runs with its defaults.

use std::path::Path;

use anyhow::Result;
use clap::Args;

/// `proxy.event_interval` and `proxy.turn_quantum_bytes` for the slotgate a scenario starts.
#[derive(Args, Debug, Clone, Default)]
pub struct Knobs {
    /// slotgate's `proxy.event_interval` (task polls between socket polls) [default: its own].
    #[arg(long)]
    pub event_interval: Option<u32>,
    /// slotgate's `proxy.turn_quantum_bytes`, in KB [default: its own].
    #[arg(long)]
    pub turn_quantum_kb: Option<u64>,
}

impl Knobs {
    /// A `[proxy]` TOML section with the knobs that are set (empty when none is).
    pub fn proxy_toml(&self) -> String {
        let mut s = String::new();
        if let Some(n) = self.event_interval {
            s += &format!("event_interval = {n}\n");
        }
        if let Some(kb) = self.turn_quantum_kb {
            s += &format!("turn_quantum_bytes = {}\n", kb * 1024);
        }
        if s.is_empty() {
            return s;
        }
        format!("[proxy]\n{s}")
    }

    /// slotgate flags for them: `--config FILE` written into `dir`, or none.
    pub fn slotgate_flags(&self, dir: &Path) -> Result<Vec<String>> {
        let toml = self.proxy_toml();
        if toml.is_empty() {
            return Ok(Vec::new());
        }
        let path = dir.join("slotgate-knobs.toml");
        std::fs::write(&path, toml)?;
        Ok(vec!["--config".into(), path.to_string_lossy().into()])
    }

    /// For reports: "event_interval 16, turn_quantum 1024 KB" (or "defaults").
    pub fn describe(&self) -> String {
        let ei = self
            .event_interval
            .map_or("default".into(), |n| n.to_string());
        let q = self
            .turn_quantum_kb
            .map_or("default".into(), |kb| format!("{kb} KB"));
        format!("event_interval {ei}, turn_quantum {q}")
    }
}

#[cfg(test)]
mod tests {
    use super::Knobs;

    #[test]
    fn only_set_knobs_reach_the_config() {
        assert_eq!(Knobs::default().proxy_toml(), "");
        let k = Knobs {
            event_interval: Some(8),
            turn_quantum_kb: Some(256),
        };
        assert_eq!(
            k.proxy_toml(),
            "[proxy]\nevent_interval = 8\nturn_quantum_bytes = 262144\n"
        );
        assert_eq!(k.describe(), "event_interval 8, turn_quantum 256 KB");
    }
}
