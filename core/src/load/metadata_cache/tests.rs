//! Unit tests of the metadata cache: its file, merging, and the host contract it trusts.

use super::cache_file::{LibraryRecord, Outcome, Store};
use super::*;

fn failed(reason: &str) -> Outcome {
    Outcome::Failed {
        kind: "not-a-plugin".to_owned(),
        reason: reason.to_owned(),
    }
}

#[test]
fn what_one_host_records_the_next_reads_and_a_corrupt_file_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (cache_file, library) = (dir.path().join(".cache/m.json"), dir.path().join("x.so"));
    std::fs::write(&library, b"bytes").unwrap();
    let key = FileKey::of(&library).unwrap();
    let first = MetadataCache::new(cache_file.clone());
    first.remember_file(&library, key, "abc");
    first.record("abc", false, failed("no root module"));
    first.save();

    let second = MetadataCache::new(cache_file.clone());
    assert_eq!(second.sha256(&library, key).as_deref(), Some("abc"));
    assert!(
        matches!(second.outcome("abc", false), Some(Outcome::Failed { reason, .. }) if reason == "no root module")
    );
    assert!(second.outcome("abc", true).is_none(), "another role");
    // A new identity on disk (a rewrite) is not found in the index.
    std::fs::write(&library, b"other bytes").unwrap();
    let changed = FileKey::of(&library).unwrap();
    assert_ne!(changed, key);
    assert_eq!(second.sha256(&library, changed), None);

    std::fs::write(&cache_file, b"\x00garbage").unwrap();
    let third = MetadataCache::new(cache_file);
    assert_eq!(third.sha256(&library, key), None);
    assert!(third.outcome("abc", false).is_none());
}

#[test]
fn writers_merge_and_a_record_of_another_host_contract_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let cache_file = dir.path().join("m.json");
    let (a, b) = (dir.path().join("a.so"), dir.path().join("b.so"));
    std::fs::write(&a, b"a").unwrap();
    std::fs::write(&b, b"b").unwrap();
    let one = MetadataCache::new(cache_file.clone());
    let two = MetadataCache::new(cache_file.clone());
    one.remember_file(&a, FileKey::of(&a).unwrap(), "aaa");
    one.record("aaa", false, failed("a"));
    two.remember_file(&b, FileKey::of(&b).unwrap(), "bbb");
    two.record("bbb", false, failed("b"));
    one.save();
    two.save();
    let three = MetadataCache::new(cache_file.clone());
    assert!(three.outcome("aaa", false).is_some() && three.outcome("bbb", false).is_some());

    // The same record, written by a host with another contract.
    let mut files = std::collections::BTreeMap::new();
    let mut libraries = std::collections::BTreeMap::new();
    let record = LibraryRecord {
        host: "plugin-api 0.0.1; toolhost 0.0.1; executable elsewhere".to_owned(),
        written: 0,
        outcome: failed("from another host"),
    };
    libraries.insert("ccc:tool".to_owned(), record);
    let c = dir.path().join("c.so");
    std::fs::write(&c, b"c").unwrap();
    let file = cache_file::FileRecord {
        key: FileKey::of(&c).unwrap(),
        sha256: "ccc".to_owned(),
    };
    files.insert(c.to_string_lossy().into_owned(), file);
    Store::merge_and_write(&cache_file, files, libraries).unwrap();
    let four = MetadataCache::new(cache_file);
    assert_eq!(
        four.sha256(&c, FileKey::of(&c).unwrap()).as_deref(),
        Some("ccc")
    );
    assert!(four.outcome("ccc", false).is_none());
}
