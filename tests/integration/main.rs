//! The integration tests: one binary, real plugin libraries built from this workspace, each test
//! in its own temporary root.

mod audit;
mod book;
mod breaker;
mod cli;
mod cli_mistakes;
mod deadlines;
mod extensions;
mod fakellm;
mod fast_loading;
mod governance;
mod hostile_files;
mod inspect;
mod isolation;
mod layers;
mod lifecycle;
mod load_errors;
mod long_output;
mod mcp_client;
mod mcp_server;
mod message_loop;
mod metadata_cache;
mod model_failures;
mod models;
mod names;
mod new_plugin;
mod panics;
mod pinning;
mod private_copies;
mod reload;
mod reply_corpus;
mod run_cli;
mod secrets;
mod testkit;
mod unknown;
mod watch_mode;
