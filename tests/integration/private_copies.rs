//! Libraries are loaded from private copies that are removed once loaded, and folders left by
//! dead hosts are cleaned up.

use std::path::PathBuf;

use toolhost_tests::{Fixture, TestRoot};

/// The private folders of this process (one per live host).
fn own_private_dirs() -> Vec<PathBuf> {
    let prefix = format!("toolhost-{}-", std::process::id());
    let mut dirs = Vec::new();
    for parent in [PathBuf::from("/dev/shm"), std::env::temp_dir()] {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                dirs.push(entry.path());
            }
        }
    }
    dirs
}

#[test]
fn copies_are_removed_once_loaded_and_the_original_can_change() {
    let root = TestRoot::new();
    // A name no other test uses: other hosts of this test process share the folder prefix.
    let original = root.tool("usr", "copy_check", Fixture::Echo);
    // File copies as on systems without in-memory files (Linux uses those by default).
    let options = toolhost::HostOptions::default().with_file_copies(true);
    let host = std::sync::Arc::new(toolhost::Host::with_options(root.path(), options).unwrap());
    assert!(host.resolve("default", "copy_check").found.is_some());
    assert_eq!(host.load_stats().copied, 1, "{:?}", host.load_stats());
    let dirs = own_private_dirs();
    assert!(!dirs.is_empty(), "the host made a private folder");
    for dir in &dirs {
        let left: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with("-copy_check.so"))
            .collect();
        assert!(left.is_empty(), "{} still holds {left:?}", dir.display());
    }
    // Overwriting the original in place (what `cp` onto an existing file does) cannot touch
    // the loaded image: the call still works.
    std::fs::write(&original, b"overwritten").unwrap();
    let silent = std::sync::Arc::new(toolhost::output::Silent);
    let agent = toolhost::Agent::with_output(host, "A0", "default", silent).unwrap();
    let r =
        toolhost_tests::block_on(agent.call_tool("copy_check", serde_json::json!({"still": 1})));
    assert_eq!(r.unwrap().message, r#"{"still":1}"#);
}

#[test]
fn folders_of_dead_hosts_are_removed() {
    // No process has this id (above any pid_max), so its folders are stale.
    let stale: Vec<PathBuf> = [PathBuf::from("/dev/shm"), std::env::temp_dir()]
        .into_iter()
        .filter(|p| p.is_dir())
        .map(|p| p.join("toolhost-4000000000-0"))
        .collect();
    for dir in &stale {
        // Another test's host may remove the folder at any moment (that is the point): it is
        // made again until the copy in it is written once, so the test has something to check.
        let make = || {
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(dir.join("0-left.so"), b"copy"))
        };
        let made = (0..100).any(|_| make().is_ok());
        assert!(made, "cannot make the stale folder {}", dir.display());
    }
    let _host = TestRoot::new().host();
    for dir in &stale {
        assert!(!dir.exists(), "{} was not removed", dir.display());
    }
}
