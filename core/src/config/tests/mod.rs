//! Unit tests of the configuration: files in temporary roots, no plugin built. Loading and
//! layering here; [`errors`] checks every message, [`resolve`] the governance answers, [`edit`]
//! saving a policy.

mod edit;
mod errors;
mod isolation;
mod resolve;
mod telemetry;

use std::fs;
use std::path::Path;
use std::time::Duration;

use plugin_api::RiskLevel;

use super::*;

const GLOBAL: &str = "usr/toolhost.toml";
const DEV: &str = "usr/agents/dev/toolhost.toml";
const CAP: u64 = crate::layout::DEFAULT_MAX_TEXT_BYTES;

/// A root holding `files` (`(path, text)`).
fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
    }
    dir
}

fn load(dir: &tempfile::TempDir) -> Result<Config, ConfigError> {
    Config::load(&Layout::new(dir.path()), "dev", CAP)
}

/// The one-line error that loading `files` for profile `dev` gives.
fn error(files: &[(&str, &str)]) -> String {
    let err = load(&root(files)).unwrap_err();
    let line = err.to_string();
    assert!(!line.contains('\n'), "{line}");
    line
}

fn caps(tags: &[&str]) -> Vec<String> {
    tags.iter().map(|t| t.to_string()).collect()
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn defaults_without_files() {
    let dir = root(&[]);
    let config = load(&dir).unwrap();
    assert!(config.files().is_empty());
    assert_eq!(config.timeout("x", 7 * SECOND), 7 * SECOND);
    assert_eq!(config.max_retries("x", 3), 3);
    assert_eq!(config.max_output(65536), 65536);
    assert_eq!(config.backoff(), Backoff::default());
    assert_eq!(config.breaker(), BreakerSettings::default());
    assert_eq!(config.breaker().failures, 5);
    assert_eq!(config.breaker().cooldown, 60 * SECOND);
    assert_eq!(config.breaker().half_open_calls, 2);
    assert_eq!(
        config.audit(),
        AuditSettings {
            enabled: true,
            fsync: false,
            required: None,
        }
    );
    assert_eq!(config.access("shell", &caps(&["exec"])), Access::Allowed);
    assert!(config.origin(&["calls", "timeout_seconds"]).is_none());
}

#[test]
fn global_file_alone() {
    let text = "[limits]\nmax_output = 1000\n[calls]\ntimeout_seconds = 0.5\nmax_retries = 2\n\
                backoff_ms = 50\nbackoff_max_ms = 400\n[breaker]\nfailures = 3\n\
                cooldown_seconds = 1.5\nhalf_open_calls = 1\n[audit]\nenabled = false\n\
                fsync = true\n";
    let dir = root(&[(GLOBAL, text)]);
    let config = load(&dir).unwrap();
    assert_eq!(config.files(), [dir.path().join(GLOBAL)]);
    assert_eq!(config.max_output(65536), 1000);
    assert_eq!(
        config.timeout("any", 30 * SECOND),
        Duration::from_millis(500)
    );
    assert_eq!(config.max_retries("any", 0), 2);
    let backoff = config.backoff();
    assert_eq!(
        (backoff.first, backoff.max),
        (50 * SECOND / 1000, 400 * SECOND / 1000)
    );
    assert_eq!(backoff.delay(5, 1.0), Duration::from_millis(400));
    let breaker = config.breaker();
    assert_eq!(breaker.failures, 3);
    assert_eq!(breaker.cooldown, Duration::from_millis(1500));
    assert_eq!(breaker.half_open_calls, 1);
    assert_eq!(
        config.audit(),
        AuditSettings {
            enabled: false,
            fsync: true,
            required: None,
        }
    );
    let origin = config.origin(&["calls", "max_retries"]).unwrap();
    assert_eq!(
        origin.to_string(),
        "usr/toolhost.toml:5 [calls] max_retries"
    );
}

#[test]
fn profile_overrides_global_key_by_key() {
    let global = "[calls]\ntimeout_seconds = 20\nmax_retries = 1\n\n[tools.weather]\n\
                  timeout_seconds = 10\nmax_retries = 4\n";
    let dev = "[calls]\nmax_retries = 3\n\n[tools.weather]\ntimeout_seconds = 2\n";
    let dir = root(&[(GLOBAL, global), (DEV, dev)]);
    let config = load(&dir).unwrap();
    assert_eq!(config.files().len(), 2);
    // [calls]: timeout from the global file, retries from the profile's.
    assert_eq!(config.timeout("greet", 30 * SECOND), 20 * SECOND);
    assert_eq!(config.max_retries("greet", 0), 3);
    // [tools.weather]: merged too; a tool's own entry beats [calls].
    assert_eq!(config.timeout("weather", 30 * SECOND), 2 * SECOND);
    assert_eq!(config.max_retries("weather", 0), 4);
    let from = |keys: &[&str]| config.origin(keys).unwrap().file.clone();
    assert_eq!(from(&["calls", "max_retries"]), Path::new(DEV));
    assert_eq!(from(&["calls", "timeout_seconds"]), Path::new(GLOBAL));
    assert_eq!(
        from(&["tools", "weather", "timeout_seconds"]),
        Path::new(DEV)
    );
    assert_eq!(
        from(&["tools", "weather", "max_retries"]),
        Path::new(GLOBAL)
    );
}

#[test]
fn other_profiles_files_are_not_read() {
    let other = "usr/agents/other/toolhost.toml";
    let dir = root(&[(other, "[calls]\nmax_retries = 9\n")]);
    assert_eq!(load(&dir).unwrap().max_retries("x", 0), 0);
}

#[test]
fn arrays_are_replaced_not_appended() {
    let global = "[access]\nallow = [\"weather\", \"greet\"]\ndeny = [\"shell\"]\n";
    let dev = "[access]\nallow = [\"greet\"]\n";
    let config = load(&root(&[(GLOBAL, global), (DEV, dev)])).unwrap();
    assert_eq!(config.access("greet", &[]), Access::Allowed);
    let Access::Denied { reason } = config.access("weather", &[]) else {
        panic!("weather is no longer allowed");
    };
    let want = "tool `weather` is not in usr/agents/dev/toolhost.toml:2 [access] allow";
    assert_eq!(reason, want);
    // The global deny list is still there: only `allow` was replaced.
    assert!(matches!(config.access("shell", &[]), Access::Denied { .. }));
}
