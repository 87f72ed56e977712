//! The host's audit log, opened on first use and shared by its agents.

use crate::audit::{Audit, AuditError, AuditKey, AuditOptions};
use crate::config::Config;
use crate::host::Host;

impl Host {
    /// The audit log, opened on first use with the settings of `config` (the calling
    /// profile's): `fsync`, and the key named by `key_env`. When it cannot be opened, the error
    /// (each use tries again, so a log that becomes writable is used from then on).
    pub(crate) fn audit(&self, config: &Config) -> Result<&Audit, AuditError> {
        if let Some(audit) = self.audit.get() {
            return Ok(audit);
        }
        let dir = self.layout().audit_dir();
        let key = match config.audit_key_env() {
            Some(name) => Some(AuditKey::from_env(name, &dir)?),
            None => None,
        };
        let fsync = config.audit().fsync;
        let audit = Audit::open(&dir, AuditOptions { fsync, key })?;
        // Another thread may have opened it meanwhile: either serves.
        Ok(self.audit.get_or_init(|| audit))
    }

    /// Whether a call whose audit record cannot be written is refused under `config`.
    pub(crate) fn audit_required(&self, config: &Config) -> bool {
        config
            .audit()
            .required
            .unwrap_or(self.options.audit_required)
    }
}
