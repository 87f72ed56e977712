//! The host's per-profile caches, and the one rule that keeps them right while files change:
//! an entry computed from the folders is kept only if no change arrived while it was computed,
//! and a replaced entry is dropped outside the lock (dropping a plugin instance runs plugin
//! code, which must never run under one of the host's locks).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::sync::{read, write};

/// Counts file changes. A lookup takes a [`Ticket`] before it reads the folders; if the epoch
/// moved by the time it stores its result, the result may be stale and is not cached.
#[derive(Debug, Default)]
pub(crate) struct Epoch(AtomicU64);

/// The epoch when a lookup started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

impl Epoch {
    /// Files changed: lookups running now must not cache what they find.
    pub(crate) fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// A ticket for a lookup that starts now.
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.0.load(Ordering::SeqCst))
    }

    fn is_current(&self, ticket: Ticket) -> bool {
        self.0.load(Ordering::SeqCst) == ticket.0
    }
}

/// What a lookup found, for [`ProfileCache::settle`].
pub(crate) enum Found<T: ?Sized> {
    /// Cache it (if no change overtook the lookup).
    Keep(Arc<T>),
    /// Do not cache it, and drop what was cached: the next lookup reads the folders again.
    Forget,
}

/// `profile -> key -> value`, each value behind an `Arc` so readers never wait for a lookup.
pub(crate) struct ProfileCache<T: ?Sized> {
    map: RwLock<FxHashMap<String, FxHashMap<String, Arc<T>>>>,
}

impl<T: ?Sized> Default for ProfileCache<T> {
    fn default() -> Self {
        Self {
            map: RwLock::default(),
        }
    }
}

impl<T: ?Sized> ProfileCache<T> {
    /// The cached value, if any.
    pub(crate) fn get(&self, profile: &str, key: &str) -> Option<Arc<T>> {
        read(&self.map).get(profile)?.get(key).cloned()
    }

    /// The cached values of every key, or `None` if any is missing.
    pub(crate) fn get_all(&self, profile: &str, keys: &[&str]) -> Option<Vec<Arc<T>>> {
        let map = read(&self.map);
        let entries = map.get(profile);
        keys.iter()
            .map(|key| entries.and_then(|m| m.get(*key)).cloned())
            .collect()
    }

    /// Stores what a lookup that started at `ticket` found, replacing the old entry, unless a
    /// change overtook the lookup or it found nothing worth keeping: then the old entry is
    /// dropped too. The replaced entry is dropped after the lock is released.
    pub(crate) fn settle(
        &self,
        epoch: &Epoch,
        ticket: Ticket,
        profile: &str,
        key: &str,
        found: Found<T>,
    ) {
        let mut map = write(&self.map);
        let replaced = match found {
            Found::Keep(value) if epoch.is_current(ticket) => map
                .entry(profile.to_owned())
                .or_default()
                .insert(key.to_owned(), value),
            _ => map.get_mut(profile).and_then(|keys| keys.remove(key)),
        };
        drop(map);
        drop(replaced);
    }

    /// Every `(profile, key)` held.
    pub(crate) fn keys(&self) -> Vec<(String, String)> {
        read(&self.map)
            .iter()
            .flat_map(|(profile, keys)| keys.keys().map(|key| (profile.clone(), key.clone())))
            .collect()
    }

    /// The profiles that hold `key`.
    pub(crate) fn profiles_with(&self, key: &str) -> Vec<String> {
        read(&self.map)
            .iter()
            .filter(|(_, keys)| keys.contains_key(key))
            .map(|(profile, _)| profile.clone())
            .collect()
    }

    /// Whether any profile's entry satisfies `pick`.
    pub(crate) fn any(&self, pick: impl Fn(&T) -> bool) -> bool {
        read(&self.map)
            .values()
            .any(|keys| keys.values().any(|v| pick(v)))
    }

    /// Empties the cache in one step; returns the profiles it held. The entries are dropped
    /// after the lock is released.
    pub(crate) fn clear(&self) -> Vec<String> {
        let taken = std::mem::take(&mut *write(&self.map));
        taken.into_keys().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts how many values were dropped, and whether the lock was free at the time.
    struct Probe(Arc<ProfileCache<Probe>>, Arc<AtomicU64>);
    impl Drop for Probe {
        fn drop(&mut self) {
            assert!(self.0.map.try_write().is_ok(), "dropped under the lock");
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_lookup_overtaken_by_a_change_is_not_kept() {
        let cache: ProfileCache<str> = ProfileCache::default();
        let epoch = Epoch::default();
        let ticket = epoch.ticket();
        cache.settle(&epoch, ticket, "p", "a", Found::Keep("one".into()));
        assert_eq!(cache.get("p", "a").as_deref(), Some("one"));
        let stale = epoch.ticket();
        epoch.bump();
        cache.settle(&epoch, stale, "p", "a", Found::Keep("two".into()));
        assert_eq!(
            cache.get("p", "a"),
            None,
            "a stale result also drops the old entry"
        );
        cache.settle(
            &epoch,
            epoch.ticket(),
            "p",
            "a",
            Found::Keep("three".into()),
        );
        cache.settle(&epoch, epoch.ticket(), "q", "b", Found::Keep("four".into()));
        assert_eq!(cache.get("p", "a").as_deref(), Some("three"));
        assert_eq!(cache.get_all("p", &["a"]).unwrap().len(), 1);
        assert!(cache.get_all("p", &["a", "b"]).is_none());
        assert_eq!(cache.profiles_with("b"), ["q"]);
        let mut keys = cache.keys();
        keys.sort();
        assert_eq!(keys, [("p".into(), "a".into()), ("q".into(), "b".into())]);
        cache.settle(&epoch, epoch.ticket(), "p", "a", Found::Forget);
        assert_eq!(cache.get("p", "a"), None);
    }

    #[test]
    fn replaced_and_cleared_entries_are_dropped_outside_the_lock() {
        let cache = Arc::new(ProfileCache::<Probe>::default());
        let drops = Arc::new(AtomicU64::new(0));
        let epoch = Epoch::default();
        let probe = || Arc::new(Probe(cache.clone(), drops.clone()));
        cache.settle(&epoch, epoch.ticket(), "p", "a", Found::Keep(probe()));
        cache.settle(&epoch, epoch.ticket(), "p", "a", Found::Keep(probe()));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        cache.settle(&epoch, epoch.ticket(), "p", "b", Found::Keep(probe()));
        cache.clear();
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }
}
