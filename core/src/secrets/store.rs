//! The host's live secrets: replaced when `usr/secrets.env` changes, read at every step of a
//! call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use super::TextFields;
use super::{Masked, MaskedError, Secrets};
use crate::sync::{read, write};
use plugin_api::ToolError;

/// The secrets a host masks with right now (every log line of the process is masked with them
/// too, see `in_logs.rs`).
#[derive(Debug, Default)]
pub(crate) struct SecretStore {
    secrets: super::in_logs::Live,
    /// Whether any secret is set: each step of a call masks through this store, and without
    /// secrets that costs one atomic load instead of a lock and a reference count.
    any: AtomicBool,
}

impl SecretStore {
    pub(crate) fn new(secrets: Secrets) -> Self {
        let store = Self::default();
        super::in_logs::register(&store.secrets);
        store.set(secrets);
        store
    }

    /// The current secrets.
    pub(crate) fn get(&self) -> Arc<Secrets> {
        read(&self.secrets).clone()
    }

    /// The current secrets, if any are set.
    pub(crate) fn active(&self) -> Option<Arc<Secrets>> {
        self.any.load(Ordering::Acquire).then(|| self.get())
    }

    /// Replaces the secrets.
    pub(crate) fn set(&self, secrets: Secrets) {
        let mut current = write(&self.secrets);
        self.any.store(!secrets.is_empty(), Ordering::Release);
        *current = Arc::new(secrets);
    }

    /// `text`, masked (without secrets: as it is, at the cost of one atomic load).
    pub(crate) fn text(&self, text: String) -> Masked {
        match self.active() {
            Some(secrets) => secrets.mask_owned(text),
            None => Masked::new(text),
        }
    }

    /// `map`, masked at any depth.
    pub(crate) fn map(&self, map: Map<String, Value>) -> Masked<Map<String, Value>> {
        match self.active() {
            Some(secrets) => secrets.mask_map(map),
            None => Masked::new(map),
        }
    }

    /// Each of `items` with each of its text fields masked (a model's native tool calls).
    pub(crate) fn each<T: TextFields>(&self, items: Vec<T>) -> Masked<Vec<T>> {
        match self.active() {
            Some(secrets) => secrets.mask_each(items),
            None => Masked::new(items),
        }
    }

    /// The error with its message masked.
    pub(crate) fn error(&self, error: &ToolError) -> MaskedError {
        MaskedError::new(error.kind(), self.text(error.message().to_owned()))
    }

    /// `masked` followed by `more`, masked as a whole: a value split between the two is caught.
    pub(crate) fn append(&self, masked: &Masked, more: &str) -> Masked {
        self.text(format!("{masked}{more}"))
    }

    /// Typed data (an extension point's), with every string in it masked at any depth (field
    /// names are left alone).
    pub(crate) fn point<P: Serialize + DeserializeOwned>(
        &self,
        data: P,
    ) -> Result<Masked<P>, ToolError> {
        let Some(secrets) = self.active() else {
            return Ok(Masked::new(data));
        };
        let mut value =
            serde_json::to_value(data).map_err(|e| ToolError::internal(e.to_string()))?;
        secrets.strings_in_place(&mut value);
        P::deserialize(value)
            .map(Masked::new)
            .map_err(|e| ToolError::internal(e.to_string()))
    }
}
