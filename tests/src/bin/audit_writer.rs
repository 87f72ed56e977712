//! `audit_writer DIR COUNT NAME`: appends COUNT call records named `NAME-<i>` to
//! `DIR/audit.jsonl`, starting once the file `DIR/go` exists (so that several writers start
//! together). For the test of writers in several processes at once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use toolhost::audit::{Audit, AuditOptions};
use toolhost_tests::audit::call_record;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: audit_writer DIR COUNT NAME";
    let dir = PathBuf::from(args.next().expect(usage));
    let count: u64 = args.next().expect(usage).parse().expect(usage);
    let name = args.next().expect(usage);
    let audit = Audit::open(&dir, AuditOptions::default()).expect("open the audit log");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.join("go").exists() {
        assert!(
            Instant::now() < deadline,
            "no {}/go after 10 s",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 1..=count {
        audit.append(&call_record(&name, i)).expect("append");
    }
}
