//! A configured secret (`admin.token`): compared, never shown. Its `Debug` prints a
//! placeholder, so a `{:?}` of the configuration (a log line, a panic message, a test's
//! assertion) cannot carry it anywhere.

use serde::Deserialize;

/// A string the proxy checks against and never displays.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secret itself, for the one comparison that needs it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.is_empty() {
            true => f.write_str("Secret(unset)"),
            false => f.write_str("Secret(redacted)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_it() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(redacted)");
        assert_eq!(format!("{:?}", Secret::default()), "Secret(unset)");
    }
}
