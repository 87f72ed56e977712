//! `toolhost audit`: check the audit log's chain, and show its last records.

use std::path::Path;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use toolhost::audit::{
    self, AuditEntry, AuditKey, AuditRecord, TailLine, VerifyOptions, VerifyReport, FILE_NAME,
};
use toolhost::config::Config;
use toolhost::Layout;

/// The audit log (usr/audit/audit.jsonl): check its hash chain, or show its last records.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(clap::Subcommand)]
enum AuditCommand {
    /// Check every record's hash and link, every segment, every value stored apart and the
    /// chain's end against usr/audit/head.json: exit 0 if the chain is intact (printing its
    /// head, to keep elsewhere), 1 naming the first broken record. Also lists damaged tails
    /// kept aside and calls that started and never finished.
    Verify {
        /// A copy of the head kept elsewhere (`SEQ:HASH`, as printed): the log must reach it,
        /// with that record unchanged.
        #[arg(long, value_name = "SEQ:HASH")]
        head: Option<String>,
        /// Check the MACs with the key in this environment variable (default: `[audit]
        /// key_env` of the profile's toolhost.toml, if set).
        #[arg(long, value_name = "NAME")]
        key_env: Option<String>,
        /// The profile whose toolhost.toml names the key.
        #[arg(long, short, default_value = "default")]
        profile: String,
    },
    /// The last records, one line each: time, seq, type, tool, outcome, duration, decision.
    Tail {
        /// How many records.
        #[arg(short, default_value_t = 20)]
        n: usize,
    },
}

impl Args {
    /// `toolhost audit verify|tail`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let root = &global.root;
        match self.command {
            AuditCommand::Verify {
                head,
                key_env,
                profile,
            } => verify(root, head.as_deref(), key_env.as_deref(), &profile),
            AuditCommand::Tail { n } => tail(root, n),
        }
    }
}

/// `toolhost audit verify`: exit 0 if the chain is intact (printing its head), 1 naming the
/// first broken record. `head`: a kept copy of the head (`SEQ:HASH`); `key_env`: the key's
/// variable, else `[audit] key_env` of `profile`'s config.
pub(crate) fn verify(
    root: &Path,
    head: Option<&str>,
    key_env: Option<&str>,
    profile: &str,
) -> Result<ExitCode> {
    let layout = Layout::new(root);
    let dir = layout.audit_dir();
    let path = dir.join(FILE_NAME);
    let options = verify_options(&layout, head, key_env, profile)?;
    let report = audit::verify_with(&path, &options)?;
    print_findings(root, &dir, &report);
    Ok(verdict(root, &dir, report))
}

/// The copy of the head to check against, and the key: from `key_env`, else `[audit] key_env`
/// of `profile`'s config.
fn verify_options(
    layout: &Layout,
    head: Option<&str>,
    key_env: Option<&str>,
    profile: &str,
) -> Result<VerifyOptions> {
    let head = match head {
        Some(text) => Some(anchor(text)?),
        None => None,
    };
    let configured;
    let key_env = match key_env {
        Some(name) => Some(name),
        None => {
            configured = Config::load(layout, profile, toolhost::DEFAULT_MAX_TEXT_BYTES)
                .ok()
                .and_then(|c| c.audit_key_env().map(str::to_owned));
            configured.as_deref()
        }
    };
    let key = match key_env {
        Some(name) => Some(AuditKey::from_env(name, &layout.audit_dir())?),
        None => None,
    };
    Ok(VerifyOptions { key, head })
}

/// What the verification found besides the verdict: damaged tails kept aside, calls that
/// never finished, cuts.
fn print_findings(root: &Path, dir: &Path, report: &VerifyReport) {
    for q in &report.quarantined {
        println!(
            "quarantined: {} from line {}: {} bytes, {} (a new segment follows)",
            relative(root, &dir.join(&q.file)),
            q.line,
            q.bytes,
            clean(&q.reason)
        );
    }
    for call in report.unfinished.iter().take(MAX_LISTED) {
        let why = match call.noted {
            true => "its process ended",
            false => "no record of its end: still running, or its process died",
        };
        println!(
            "started, never finished: seq {} tool {} (execution id {}): {why}",
            call.seq,
            clean(&call.tool),
            clean(&call.execution_id)
        );
    }
    if report.unfinished.len() > MAX_LISTED {
        println!(
            "... and {} more calls that started and never finished",
            report.unfinished.len() - MAX_LISTED
        );
    }
    for cut in &report.cuts {
        println!(
            "cut: {} seq {} ({}): {}",
            relative(root, &dir.join(&cut.file)),
            cut.seq,
            utc(cut.time_ms),
            clean(&cut.reason)
        );
    }
}

/// The verdict's line (and the head to keep), and the exit code: 0 for an intact chain.
fn verdict(root: &Path, dir: &Path, report: VerifyReport) -> ExitCode {
    match report.broken {
        None if !report.cuts.is_empty() => {
            let n = report.cuts.len();
            println!(
                "audit: {} records; the chain links, but records were lost: {n} cut{} recorded (listed above; a cut stays reported)",
                report.records,
                plural_of(n as u64)
            );
            ExitCode::FAILURE
        }
        None => {
            let plural = if report.records == 1 { "" } else { "s" };
            let signed = match (report.key_checked, report.signed) {
                (true, n) => format!(", {n} MAC{} checked with the key", plural_of(n)),
                (false, 0) => String::new(),
                (false, n) => format!(", {n} MAC{} not checked (no key)", plural_of(n)),
            };
            println!(
                "audit: {} record{plural}, chain intact{signed}",
                report.records
            );
            if let Some(head) = &report.head {
                println!(
                    "head: {} (keep a copy elsewhere; `toolhost audit verify --head {}` checks \
                     the log against it)",
                    head.anchor(),
                    head.anchor()
                );
            }
            ExitCode::SUCCESS
        }
        Some(broken) => {
            let file = dir.join(&broken.file);
            println!(
                "{}",
                broken.located(file.strip_prefix(root).unwrap_or(&file))
            );
            ExitCode::FAILURE
        }
    }
}

/// Calls that started and never finished listed one by one, at most.
const MAX_LISTED: usize = 20;

fn plural_of(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `SEQ:HASH`, as `verify` prints the head.
fn anchor(text: &str) -> Result<(u64, String)> {
    let parsed = text.split_once(':').and_then(|(seq, hash)| {
        let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        Some((seq.parse::<u64>().ok()?, hex.then(|| hash.to_owned())?))
    });
    parsed.ok_or_else(|| {
        anyhow::anyhow!(
            "--head {text}: expected SEQ:HASH (a number, a colon and 64 lower-case hex digits), \
             as `toolhost audit verify` prints it"
        )
    })
}

/// `toolhost audit tail`: the last `n` records, one line each.
pub(crate) fn tail(root: &Path, n: usize) -> Result<ExitCode> {
    let path = Layout::new(root).audit_dir().join(FILE_NAME);
    for line in audit::tail(&path, n)? {
        match line {
            TailLine::Entry(entry) => println!("{}", describe(&entry)),
            TailLine::Unreadable(why) => println!("(unreadable line: {})", clean(&why)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `<time> #<seq> <type> <tool> <outcome> <duration> <decision>`
fn describe(entry: &AuditEntry) -> String {
    let (kind, line) = kind_and_line(&entry.record);
    format!(
        "{}  #{:<6} {kind:<9} {}",
        utc(entry.time_ms),
        entry.seq,
        clean(&line)
    )
}

/// `tool` or `tool:method`.
fn tool_name(tool: &str, method: Option<&str>) -> String {
    match method {
        Some(method) => format!("{tool}:{method}"),
        None => tool.to_owned(),
    }
}

/// A record's kind and what `tail` shows of it.
fn kind_and_line(record: &AuditRecord) -> (&'static str, String) {
    match record {
        AuditRecord::Call(call) => {
            let tool = tool_name(&call.tool, call.method.as_deref());
            let decision = match &call.approval {
                Some(a) => format!("{} ({})", a.decision.as_str(), a.source),
                None => "-".to_owned(),
            };
            let line = format!(
                "{:<20} {:<12} {:>10.1} ms  {decision}",
                tool, call.outcome, call.duration_ms
            );
            ("call", line)
        }
        AuditRecord::Approval(a) => {
            let tool = tool_name(&a.tool, a.method.as_deref());
            let line = format!("{tool:<20} {} ({})", a.decision.as_str(), a.source);
            ("approval", line)
        }
        AuditRecord::Breaker(b) => {
            let (from, to) = (b.from.as_str(), b.to.as_str());
            (
                "breaker",
                format!("{:<20} {from} -> {to} ({})", b.tool, b.reason),
            )
        }
        AuditRecord::Start(start) => {
            let tool = tool_name(&start.tool, start.method.as_deref());
            let line = format!("{tool:<20} started (execution id {})", start.execution_id);
            ("start", line)
        }
        AuditRecord::Unfinished(u) => {
            let line = format!(
                "{:<20} never finished (seq {}: {})",
                u.tool, u.start_seq, u.reason
            );
            ("unfinished", line)
        }
        AuditRecord::Segment(s) => {
            let line = format!(
                "{} kept aside: {} damaged bytes after byte {} ({})",
                s.previous, s.quarantined_bytes, s.good_bytes, s.reason
            );
            ("segment", line)
        }
        AuditRecord::Sampling(s) => {
            let model = s.model.as_deref().unwrap_or("-");
            let line = format!(
                "{:<20} {} by model {model} for {} ({}: {})",
                s.tool,
                s.outcome,
                s.requester,
                s.decision.as_str(),
                s.source
            );
            ("sampling", line)
        }
        AuditRecord::Definition(d) => {
            let (event, members) = (d.event.as_str(), d.members.join(", "));
            let line = format!("{}.{:<20} {event} ({members})", d.server, d.tool);
            ("definition", line)
        }
        AuditRecord::Cut(c) => {
            let line = format!("records lost: {} (found by process {})", c.reason, c.pid);
            ("cut", line)
        }
    }
}

/// `text` with control characters escaped: one record, one line, no terminal escapes.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS.mmm` (UTC).
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

fn relative(root: &Path, path: &Path) -> String {
    toolhost::Escaped(path.strip_prefix(root).unwrap_or(path)).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_unix_milliseconds() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00.000");
        assert_eq!(super::utc(951_782_400_123), "2000-02-29 00:00:00.123");
        assert_eq!(super::utc(1_764_531_296_789), "2025-11-30 19:34:56.789");
    }
}
