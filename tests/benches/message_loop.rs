//! The message loop's costs: secret masking (against the naive replace loop, same run), eight
//! parallel calls of a tool that sleeps 100 ms, and the overhead of one loop iteration.
//!
//! Run with `cargo bench -p toolhost-tests --bench message_loop` (`-- masking` for the masking
//! figures only).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::output::Silent;
use toolhost::{Agent, LoopOptions, ScriptedModel, Secrets};
use toolhost_tests::{Fixture, Rng, TestRoot};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn masking() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pairs: Vec<(String, String)> = (0..1000)
        .map(|i| {
            let len = 8 + (rng.next() % 33) as usize;
            (format!("KEY_{i}"), rng.token(len))
        })
        .collect();
    let start = Instant::now();
    let secrets = Secrets::from_pairs(pairs.clone());
    let built = start.elapsed();
    let (forms, memory) = secrets.matcher_size();
    // 64 KiB of words with a secret value every ~1 KiB.
    let mut text = String::new();
    while text.len() < 64 * 1024 {
        if rng.next().is_multiple_of(150) {
            text.push_str(&pairs[(rng.next() % 1000) as usize].1);
        } else {
            let len = 1 + (rng.next() % 9) as usize;
            text.push_str(&rng.token(len));
        }
        text.push(' ');
    }
    let mb = text.len() as f64 / 1e6;

    let fast: Vec<Duration> = (0..51)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(secrets.mask(std::hint::black_box(&text)));
            start.elapsed()
        })
        .collect();
    // Agent Zero's way: every value, longest first, `str::replace` over the whole text.
    let mut by_length = pairs.clone();
    by_length.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let naive: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut out = text.clone();
            for (key, value) in &by_length {
                if out.contains(value.as_str()) {
                    out = out.replace(value.as_str(), &format!("§§secret({key})"));
                }
            }
            std::hint::black_box(out);
            start.elapsed()
        })
        .collect();
    let naive_plain: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut out = text.clone();
            for (key, value) in &by_length {
                out = out.replace(value.as_str(), &format!("§§secret({key})"));
            }
            std::hint::black_box(out);
            start.elapsed()
        })
        .collect();
    assert_eq!(
        secrets.mask(&text),
        {
            let mut out = text.clone();
            for (key, value) in &by_length {
                out = out.replace(value.as_str(), &format!("§§secret({key})"));
            }
            out
        },
        "both ways must give the same text"
    );
    let (fast, naive, naive_plain) = (median(fast), median(naive), median(naive_plain));
    let rate = |d: Duration| mb / d.as_secs_f64();
    let encoded = encoded_text(&text, &pairs);
    let masked = secrets.mask(&encoded);
    assert!(!pairs.iter().any(|(_, v)| masked.contains(v.as_str())));
    let with_forms = median(
        (0..51)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(secrets.mask(std::hint::black_box(&encoded)));
                start.elapsed()
            })
            .collect(),
    );
    // The same text URL-encoded as Rust's NON_ALPHANUMERIC does (every byte but letters and
    // digits as `%XX`): matched on its decoded form, a second pass over a decoded copy.
    let url: String = text
        .bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect();
    let url_masked = secrets.mask(&url);
    let values_left = pairs
        .iter()
        .filter(|(_, v)| url_masked.contains(&*url_of(v)))
        .count();
    assert_eq!(values_left, 0, "a URL-encoded value was left");
    let url_time = median(
        (0..51)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(secrets.mask(std::hint::black_box(&url)));
                start.elapsed()
            })
            .collect(),
    );
    println!(
        "masking the 64 KiB text URL-encoded ({} KiB, every byte but letters and digits escaped): \
         {:.0} µs ({:.0} MB/s)",
        url.len() / 1024,
        url_time.as_secs_f64() * 1e6,
        url.len() as f64 / 1e6 / url_time.as_secs_f64()
    );
    // The worst case for the table behind the automaton: `\u00` and `&#` start ~2,000 forms
    // each (every character escaped), and this text is made of them.
    let escaped = "caf\\u00e9 &#233;t&#xe9; ".repeat(64 * 1024 / 24);
    let worst = median(
        (0..51)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(secrets.mask(std::hint::black_box(&escaped)));
                start.elapsed()
            })
            .collect(),
    );
    println!(
        "masking 64 KiB of \\u00XX and &#NNN; escapes (the heads of ~4,000 forms): {:.0} µs \
         ({:.0} MB/s)",
        worst.as_secs_f64() * 1e6,
        escaped.len() as f64 / 1e6 / worst.as_secs_f64()
    );
    println!(
        "masking matcher: 1,000 secrets, {forms} forms (the values and their encodings), built \
         in {:.0} ms, {:.1} MB",
        built.as_secs_f64() * 1e3,
        memory as f64 / 1e6
    );
    println!(
        "masking 64 KiB holding encoded values (upper case, hex, \\u escapes) every ~1 KiB: \
         {:.0} µs ({:.0} MB/s)",
        with_forms.as_secs_f64() * 1e6,
        encoded.len() as f64 / 1e6 / with_forms.as_secs_f64()
    );
    println!(
        "masking 64 KiB with 1,000 secrets and their forms: {:.0} µs ({:.0} MB/s); naive replace \
         loop over the values only {:.0} µs ({:.1} MB/s, {:.0}x slower); naive with a contains() check first {:.0} µs \
         ({:.1} MB/s, {:.0}x slower)",
        fast.as_secs_f64() * 1e6,
        rate(fast),
        naive_plain.as_secs_f64() * 1e6,
        rate(naive_plain),
        naive_plain.as_secs_f64() / fast.as_secs_f64(),
        naive.as_secs_f64() * 1e6,
        rate(naive),
        naive.as_secs_f64() / fast.as_secs_f64(),
    );
}

/// `text` with a value, encoded, before every 170th word: upper-cased, in hex, or with every
/// character as a `\u` escape.
fn encoded_text(text: &str, pairs: &[(String, String)]) -> String {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut out = String::with_capacity(text.len() + 4096);
    for (i, word) in text.split(' ').enumerate() {
        if i % 170 == 0 {
            let value = &pairs[(rng.next() % 1000) as usize].1;
            match rng.next() % 3 {
                0 => out.push_str(&value.to_uppercase()),
                1 => value
                    .bytes()
                    .for_each(|b| out.push_str(&format!("{b:02x}"))),
                _ => value
                    .chars()
                    .for_each(|c| out.push_str(&format!("\\u{:04x}", c as u32))),
            }
            out.push(' ');
        }
        out.push_str(word);
        out.push(' ');
    }
    out.truncate(64 * 1024);
    while !out.is_char_boundary(out.len()) {
        out.pop();
    }
    out
}

fn parallel(runtime: &tokio::runtime::Runtime) {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let agent = Agent::with_output(root.host(), "A0", "default", Arc::new(Silent)).unwrap();
    let calls: Vec<_> = (0..8)
        .map(|_| json!({"tool_name": "echo:sleep", "tool_args": {"ms": 100}}))
        .collect();
    let args = json!({ "calls": calls });
    runtime
        .block_on(agent.call_tool("parallel", args.clone()))
        .unwrap(); // warm up: load the library, start its runtime
    let times: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            let r = runtime
                .block_on(agent.call_tool("parallel", args.clone()))
                .unwrap();
            assert!(!r.message.contains("\"error\""), "{}", r.message);
            start.elapsed()
        })
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    println!(
        "8 parallel calls of a tool that sleeps 100 ms, whole parallel call (21 runs): median \
         {:.1} ms, max {:.1} ms",
        median(times).as_secs_f64() * 1e3,
        sorted.last().unwrap().as_secs_f64() * 1e3
    );
}

fn iteration(runtime: &tokio::runtime::Runtime) {
    let root = TestRoot::new();
    root.tool("usr", "noop", Fixture::Noop);
    root.tool("core", "response", Fixture::Response);
    let host = root.host();
    const ITERATIONS: usize = 200;
    let reply = json!({"thoughts": ["again"], "headline": "Calling noop", "tool_name": "noop", "tool_args": {"a": 1}}).to_string();
    let run = |n: usize| {
        let agent = Agent::with_output(host.clone(), "A0", "default", Arc::new(Silent)).unwrap();
        // Each reply differs (the same reply twice is a "repeat").
        let mut replies: Vec<String> = (0..n)
            .map(|i| reply.replace("\"a\":1", &format!("\"a\":{i}")))
            .collect();
        replies.push(json!({"tool_name": "response", "tool_args": {"text": "done"}}).to_string());
        let model = ScriptedModel::new(replies);
        let options = LoopOptions::default().with_max_iterations(n + 1);
        let start = Instant::now();
        let answer = runtime
            .block_on(agent.monologue(&model, "go", &options))
            .unwrap();
        assert_eq!(answer, "done");
        start.elapsed()
    };
    run(10); // warm up
    let per: Vec<Duration> = (0..11)
        .map(|_| run(ITERATIONS) / ITERATIONS as u32)
        .collect();
    println!(
        "one loop iteration (system prompt, scripted reply streamed and masked, parse, full \
         lifecycle of a no-op tool, history and log), {ITERATIONS} per run, 11 runs: median {:.1} µs",
        median(per).as_secs_f64() * 1e6
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of benchmarks; there are none to list.
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    masking();
    if std::env::args().any(|a| a == "masking") {
        return; // `-- masking`: the masking figures only
    }
    parallel(&runtime);
    iteration(&runtime);
}

/// `value` URL-encoded as the bench's text is: every byte but letters and digits as `%XX`.
fn url_of(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect()
}
