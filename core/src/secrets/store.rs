//! The host's live secrets: replaced when `usr/secrets.env` changes, read at every step of a
//! call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::Secrets;

/// The secrets a host masks with right now.
#[derive(Debug, Default)]
pub(crate) struct SecretStore {
    secrets: RwLock<Arc<Secrets>>,
    /// Whether any secret is set: each step of a call masks through this store, and without
    /// secrets that costs one atomic load instead of a lock and a reference count.
    any: AtomicBool,
}

impl SecretStore {
    pub(crate) fn new(secrets: Secrets) -> Self {
        let store = Self::default();
        store.set(secrets);
        store
    }

    /// The current secrets.
    pub(crate) fn get(&self) -> Arc<Secrets> {
        self.secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The current secrets, if any are set.
    pub(crate) fn active(&self) -> Option<Arc<Secrets>> {
        self.any.load(Ordering::Acquire).then(|| self.get())
    }

    /// Replaces the secrets.
    pub(crate) fn set(&self, secrets: Secrets) {
        let mut current = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        self.any.store(!secrets.is_empty(), Ordering::Release);
        *current = Arc::new(secrets);
    }
}
