//! The caching hints of 2026-07-28 results (`ttlMs`, `cacheScope`): how long a client may
//! keep a list or a read before asking again, and whether a shared cache may hold it.
//! Clients of earlier versions get no hints, as before.
//!
//! The lists (`server/discover`, tools, prompts, resources, templates) change only when the
//! plugin folders do, which a live reload tells `subscriptions/listen` at once: they are
//! fresh for [`LIST_TTL_MS`]. A resource's contents are a file read now: never fresh. Behind
//! a bearer token every result is `private` (a shared cache must not give it to someone
//! without the token); without one, the lists are the same for every caller: `public`.

use rmcp::model::{CacheScope, ProtocolVersion};
use rmcp::service::{RequestContext, RoleServer};

/// How long a list stays fresh: 10 s, so that a client that does not listen sees a reload
/// within that long.
pub(crate) const LIST_TTL_MS: u64 = 10_000;

/// Whether `context`'s request is of protocol 2026-07-28 or later.
pub(crate) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The hints of a list: [`LIST_TTL_MS`], public unless behind a token.
pub(crate) fn list(behind_token: bool) -> (u64, CacheScope) {
    let scope = match behind_token {
        true => CacheScope::Private,
        false => CacheScope::Public,
    };
    (LIST_TTL_MS, scope)
}

/// The hints of a resource's contents: stale at once, private.
pub(crate) fn read() -> (u64, CacheScope) {
    (0, CacheScope::Private)
}
