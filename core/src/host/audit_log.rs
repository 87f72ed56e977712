//! The host's audit log, opened on first use and shared by its agents.

use std::sync::OnceLock;

use crate::audit::{Audit, AuditOptions};
use crate::host::Host;

impl Host {
    /// The audit log, opened on first use (`None` if it cannot be opened: said once).
    pub(crate) fn audit(&self, fsync: bool) -> Option<&Audit> {
        static WARNED: OnceLock<()> = OnceLock::new();
        let audit = self.audit.get_or_init(|| {
            match Audit::open(&self.layout().audit_dir(), AuditOptions { fsync }) {
                Ok(audit) => Some(audit),
                Err(e) => {
                    WARNED.get_or_init(|| tracing::warn!("{e}; calls are not audited"));
                    None
                }
            }
        });
        audit.as_ref()
    }
}
