//! A record of the libraries whose layout this host's contract has already accepted, so that
//! loading the same bytes again skips abi_stable's layout walk.
//!
//! abi_stable checks a library in two steps: its version (cheap) and the layout of its root
//! module, walked type by type against the layout this host was built with (about half of a
//! load). The walk's answer depends only on the library's bytes and on the host's side of the
//! contract, so it is recorded per (host contract identity, library content hash) in
//! `usr/.cache/checked-layouts`, and a library whose pair is recorded is loaded with
//! [`LibHeader::init_root_module_with_unchecked_layout`](abi_stable::library::LibHeader), which
//! still runs abi_stable's version check (and the loader runs its own before it). Only a
//! library that passed the walk is ever recorded: a refused one is walked, and refused with the
//! same reason, on every load.
//!
//! The file is a cache. It is read once per host, at its first load; a line that does not parse
//! or whose check sum does not match is ignored (and so is a file that cannot be read); a write
//! replaces the file whole (a temporary file renamed over it), and one that fails (a read-only
//! `usr/`) only costs the walk again in the next process.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use abi_stable::library::AbiHeader;
use abi_stable::type_layout::TypeLayout;
use abi_stable::StableAbi;
use plugin_abi::wire::PluginModuleRef;
use xxhash_rust::xxh3::Xxh3Default;

use crate::sync::lock;

/// The record's file name in `usr/.cache/`.
pub(crate) use crate::layout::CHECKED_LAYOUTS_FILE_NAME as FILE_NAME;

/// The first line of the file.
const HEADER: &str =
    "# toolhost: libraries whose layout passed abi_stable's check (a cache: safe to delete)";

/// At most this many lines are kept (the newest); older ones are dropped at the next write.
const MAX_RECORDS: usize = 4096;

/// Libraries whose layout check passed against this host's contract.
#[derive(Debug)]
pub(crate) struct LayoutChecks {
    /// `usr/.cache/checked-layouts`; `None`: nothing is recorded (in memory only).
    file: Option<PathBuf>,
    /// The content hashes recorded for this host's contract, read at the first use.
    known: Mutex<Option<HashSet<u128>>>,
    /// Layout walks run, and skipped because the bytes were recorded.
    walked: AtomicU64,
    skipped: AtomicU64,
}

impl LayoutChecks {
    /// A record kept in `file` (`None`: in memory only, for this value's life).
    pub(crate) fn new(file: Option<PathBuf>) -> Self {
        Self {
            file,
            known: Mutex::new(None),
            walked: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// The record of the root folder `root`: `root/usr/.cache/checked-layouts`.
    pub(crate) fn in_root(root: &Path) -> Self {
        Self::new(Some(root.join("usr").join(".cache").join(FILE_NAME)))
    }

    /// Whether the library with content hash `hash` passed the layout check of this host's
    /// contract before (in this process or, through the file, in an earlier one).
    pub(crate) fn passed(&self, hash: u128) -> bool {
        let mut known = lock(&self.known);
        let known = known.get_or_insert_with(|| self.read());
        let passed = known.contains(&hash);
        if passed {
            self.skipped.fetch_add(1, Ordering::Relaxed);
        } else {
            self.walked.fetch_add(1, Ordering::Relaxed);
        }
        passed
    }

    /// Records that the library with content hash `hash` passed the layout check.
    pub(crate) fn record(&self, hash: u128) {
        let mut known = lock(&self.known);
        let known = known.get_or_insert_with(|| self.read());
        if !known.insert(hash) {
            return;
        }
        let Some(file) = &self.file else { return };
        // Under the lock: two loads of this host never write at once. Another process may;
        // the last rename wins and the lost line only costs a walk.
        if let Err(e) = write(file, hash) {
            tracing::debug!(
                "cannot record a checked layout in {}: {e}; it is checked again next time",
                file.display()
            );
        }
    }

    /// `(walked, skipped)`: layout checks run, and skipped, so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.walked.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }

    /// The hashes recorded in the file for this host's contract (none if it cannot be read).
    fn read(&self) -> HashSet<u128> {
        let Some(file) = &self.file else {
            return HashSet::new();
        };
        let ours = contract_identity();
        let Ok(text) = read_small(file) else {
            return HashSet::new();
        };
        text.lines()
            .filter_map(parse_line)
            .filter(|(contract, _)| *contract == ours)
            .map(|(_, hash)| hash)
            .collect()
    }
}

/// Reads `file` if it is a regular file of a sane size (a cache is never large).
fn read_small(file: &Path) -> std::io::Result<String> {
    let meta = fs::metadata(file)?;
    if !meta.is_file() || meta.len() > (MAX_RECORDS as u64 + 16) * 128 {
        return Err(std::io::Error::other("not a record file"));
    }
    fs::read_to_string(file)
}

/// One line: `<contract identity> <library hash> <check>`, each 32 hex digits, the check the
/// XXH3-128 of the first two fields with their space.
fn format_line(contract: u128, hash: u128) -> String {
    let fields = format!("{contract:032x} {hash:032x}");
    let check = xxhash_rust::xxh3::xxh3_128(fields.as_bytes());
    format!("{fields} {check:032x}")
}

fn parse_line(line: &str) -> Option<(u128, u128)> {
    let mut parts = line.split(' ');
    let (contract, hash, check) = (parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str| {
        (s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u128::from_str_radix(s, 16).ok())
            .flatten()
    };
    let (contract, hash, check) = (hex(contract)?, hex(hash)?, hex(check)?);
    let fields = &line[..65];
    (parts.next().is_none() && xxhash_rust::xxh3::xxh3_128(fields.as_bytes()) == check)
        .then_some((contract, hash))
}

/// Adds the line for `hash` to `file`, keeping its other valid lines (of any contract, newest
/// last, at most [`MAX_RECORDS`]): a temporary file in the same folder, renamed over it. Not
/// synced to disk: a cache that is lost costs one walk, and a torn file is ignored line by line.
fn write(file: &Path, hash: u128) -> std::io::Result<()> {
    let dir = file
        .parent()
        .ok_or_else(|| std::io::Error::other("no folder"))?;
    if !dir.is_dir() {
        // Only `.cache` is made: a root without `usr/` does not get one from a load.
        fs::create_dir(dir)?;
    }
    let ours = contract_identity();
    let line = format_line(ours, hash);
    let text = read_small(file).unwrap_or_default();
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| parse_line(l).is_some() && *l != line)
        .collect();
    lines.push(&line);
    let keep = &lines[lines.len().saturating_sub(MAX_RECORDS)..];
    let mut out = String::with_capacity((keep.len() + 1) * 100);
    out.push_str(HEADER);
    out.push('\n');
    for l in keep {
        out.push_str(l);
        out.push('\n');
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{FILE_NAME}.{}.{n}.tmp", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut f| f.write_all(out.as_bytes()))
        .and_then(|()| fs::rename(&temp, file));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// The identity of the contract this build of the host checks libraries against: it changes
/// whenever the layout abi_stable would compare a library with can change. It hashes
/// plugin-abi's version, abi_stable's ABI version (the checker's rules), and every type layout
/// reachable from the root module's (as abi_stable's own traversal finds them), each as
/// abi_stable displays it (type, size, alignment, package and version, fields with their types,
/// functions, tag, representation) plus its string table (every field and function name).
/// Computed once per process.
pub(crate) fn contract_identity() -> u128 {
    static IDENTITY: OnceLock<u128> = OnceLock::new();
    *IDENTITY.get_or_init(|| fingerprint(<PluginModuleRef as StableAbi>::LAYOUT))
}

fn fingerprint(root: &'static TypeLayout) -> u128 {
    use std::fmt::Write as _;
    let mut hasher = Xxh3Default::new();
    let abi = AbiHeader::VALUE;
    let mut text = format!(
        "toolhost layout identity 1\nplugin-abi {}\nabi_stable abi {}.{}\n",
        plugin_abi::ABI_VERSION,
        abi.abi_major,
        abi.abi_minor
    );
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(layout) = stack.pop() {
        if !seen.insert(layout.get_utypeid()) {
            continue;
        }
        let _ = write!(text, "{layout}\n{}\n", layout.shared_vars().strings());
        hasher.update(text.as_bytes());
        text.clear();
        // Pushed in reverse so the walk visits them in their order (stable from run to run).
        for nested in layout.shared_vars().type_layouts().iter().rev() {
            stack.push(nested());
        }
        if let Some(checks) = layout.extra_checks() {
            for nested in checks.nested_type_layouts().iter().rev() {
                stack.push(nested);
            }
        }
    }
    hasher.update(text.as_bytes());
    hasher.digest128()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_and_a_changed_one_is_refused() {
        let line = format_line(1, u128::MAX - 5);
        assert_eq!(parse_line(&line), Some((1, u128::MAX - 5)));
        let mut flipped = line.clone().into_bytes();
        flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
        assert_eq!(parse_line(std::str::from_utf8(&flipped).unwrap()), None);
        assert_eq!(parse_line(&line[..80]), None);
        assert_eq!(parse_line(&format!("{line} x")), None);
        assert_eq!(parse_line("garbage"), None);
        assert_eq!(parse_line(HEADER), None);
    }

    #[test]
    fn the_identity_is_stable_and_covers_the_root_module() {
        let a = contract_identity();
        let took = std::time::Instant::now();
        let again = fingerprint(<PluginModuleRef as StableAbi>::LAYOUT);
        eprintln!("identity {a:032x}, computed in {:?}", took.elapsed());
        assert_eq!(a, again);
        // Another root layout gives another identity.
        let other = fingerprint(<abi_stable::std_types::RString as abi_stable::StableAbi>::LAYOUT);
        assert_ne!(a, other);
    }

    #[test]
    fn records_persist_and_a_corrupt_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("usr")).unwrap();
        let checks = LayoutChecks::in_root(dir.path());
        assert!(!checks.passed(7));
        checks.record(7);
        assert!(checks.passed(7));
        let fresh = LayoutChecks::in_root(dir.path());
        assert!(fresh.passed(7), "read back from the file");
        assert!(!fresh.passed(8));
        assert_eq!(fresh.counts(), (1, 1));

        let file = dir.path().join("usr/.cache").join(FILE_NAME);
        std::fs::write(&file, b"\xff\xfe not text\n").unwrap();
        let corrupt = LayoutChecks::in_root(dir.path());
        assert!(!corrupt.passed(7));
        corrupt.record(9);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(HEADER), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn a_root_without_usr_gets_no_cache_folder() {
        let dir = tempfile::tempdir().unwrap();
        let checks = LayoutChecks::in_root(dir.path());
        checks.record(1);
        assert!(checks.passed(1), "kept in memory");
        assert!(!dir.path().join("usr").exists());
    }
}
