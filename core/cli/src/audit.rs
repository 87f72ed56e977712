//! `toolhost audit`: check the audit log's chain, and show its last records.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use toolhost::audit::{self, AuditEntry, AuditRecord, TailLine, FILE_NAME};
use toolhost::Layout;

/// `toolhost audit verify`: exit 0 if the chain is whole, 1 naming the first broken record.
pub(crate) fn verify(root: &Path) -> Result<ExitCode> {
    let path = Layout::new(root).audit_dir().join(FILE_NAME);
    let report = audit::verify(&path)?;
    match report.broken {
        None => {
            let plural = if report.records == 1 { "" } else { "s" };
            println!("audit: {} record{plural}, chain intact", report.records);
            Ok(ExitCode::SUCCESS)
        }
        Some(broken) => {
            println!("{} {broken}", relative(root, &path));
            Ok(ExitCode::FAILURE)
        }
    }
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
    let time = utc(entry.time_ms);
    let seq = entry.seq;
    match &entry.record {
        AuditRecord::Call(call) => {
            let tool = match &call.method {
                Some(method) => format!("{}:{method}", call.tool),
                None => call.tool.clone(),
            };
            let decision = match &call.approval {
                Some(a) => format!("{} ({})", a.decision.as_str(), a.source),
                None => "-".to_owned(),
            };
            let line = format!(
                "{:<20} {:<12} {:>10.1} ms  {decision}",
                tool, call.outcome, call.duration_ms
            );
            format!("{time}  #{seq:<6} call      {}", clean(&line))
        }
        AuditRecord::Approval(a) => {
            let tool = match &a.method {
                Some(method) => format!("{}:{method}", a.tool),
                None => a.tool.clone(),
            };
            let line = format!("{tool:<20} {} ({})", a.decision.as_str(), a.source);
            format!("{time}  #{seq:<6} approval  {}", clean(&line))
        }
        AuditRecord::Breaker(b) => {
            let line = format!(
                "{:<20} {} -> {} ({})",
                b.tool,
                b.from.as_str(),
                b.to.as_str(),
                b.reason
            );
            format!("{time}  #{seq:<6} breaker   {}", clean(&line))
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
