//! The profile's `toolhost.toml` configuration, cached until one of its files changes.

use std::sync::Arc;

use super::Host;
use crate::config::{Config, ConfigError};
use crate::host::cache::Found;

/// The cache key of a profile's configuration.
const CONFIG: &str = "config";

impl Host {
    /// The profile's configuration: `usr/toolhost.toml`, then `usr/agents/<profile>/toolhost.toml`
    /// ([`Config::load`]). Read once and kept until one of the files changes (with a
    /// [`Watcher`](crate::Watcher)); a mistake in a file is kept too, so every call reports it
    /// until the file is fixed.
    pub fn config(&self, profile: &str) -> Result<Arc<Config>, ConfigError> {
        let cached = self.configs.get(profile, CONFIG);
        let loaded = match cached {
            Some(loaded) => loaded,
            None => {
                let ticket = self.epoch.ticket();
                let loaded = Arc::new(
                    Config::load(&self.layout, profile, self.options.max_text_bytes).map(Arc::new),
                );
                let found = Found::Keep(loaded.clone());
                self.configs
                    .settle(&self.epoch, ticket, profile, CONFIG, found);
                loaded
            }
        };
        (*loaded).clone()
    }

    /// Forgets every cached configuration: the next use reads the files again (after the host
    /// itself wrote one, without a watcher to say so).
    pub(crate) fn config_changed(&self) {
        self.epoch.bump();
        drop(self.configs.clear());
    }
}
