//! Reading a 10 MB reply: valid JSON, and malformed (raw line breaks in strings, single
//! quotes, a trailing comma, never closed), each in prose.
//!
//! Run with `cargo bench -p toolhost-tests --bench reply`.

use criterion::{criterion_group, criterion_main, Criterion};
use toolhost::read_reply;

fn reply(malformed: bool) -> String {
    let line = if malformed {
        "'k': 'a line\twith a raw tab and an invalid escape C:\\Users\n', "
    } else {
        "\"k\": \"a line with an escape \\n and a quote \\\" in it\", "
    };
    let mut body = String::with_capacity(10 << 20);
    while body.len() < 10 << 20 {
        body.push_str(&line.replace('k', &body.len().to_string()));
    }
    if malformed {
        format!("Sure! {{'tool_name': 'write', 'tool_args': {{{body}")
    } else {
        format!("{{\"tool_name\": \"write\", \"tool_args\": {{{body}\"end\": 1}}}}")
    }
}

fn reading(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_reply 10 MB");
    group.sample_size(10);
    for (name, malformed) in [("valid", false), ("malformed", true)] {
        let text = reply(malformed);
        assert_eq!(read_reply(&text).unwrap().tool, "write", "{name}");
        group.bench_function(name, |b| b.iter(|| read_reply(&text)));
    }
    group.finish();
}

criterion_group!(benches, reading);
criterion_main!(benches);
