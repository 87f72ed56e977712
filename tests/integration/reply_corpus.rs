//! Real model replies quoted in public issue trackers (`tests/corpus/replies.json`, each with
//! its source address and the call a person reads in it, or "unusable"), and a fuzz test of
//! the reader on a 2 MiB stack: generated nesting up to 1,000,000 levels, and mutations of the
//! corpus.

use serde_json::Value;
use toolhost::{read_reply, read_reply_with};
use toolhost_tests::Rng;

/// The recovery rate the corpus must keep (the target). Not read today: an invented
/// `--- CALL --- nc://name {…}` form, and a DSML call whose parameter is written as a
/// self-closing `invoke` with its value in `string` (refused: never a call without it).
const FLOOR: f64 = 0.95;

fn corpus() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/replies.json");
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

#[test]
fn the_corpus_of_real_replies_is_read_with_no_wrong_call() {
    let entries = corpus();
    assert!(entries.len() >= 60, "{}", entries.len());
    // The tools the reader knows, as a host knows its profile's: every tool the corpus's
    // replies meant to call (so a reply naming another is never read as a call of it).
    let mut tools: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["expect"]["tool"].as_str())
        .collect();
    tools.sort_unstable();
    tools.dedup();
    let (mut intended, mut recovered, mut wrong) = (0, 0, Vec::new());
    for entry in &entries {
        let reply = entry["reply"].as_str().unwrap();
        let source = entry["source"].as_str().unwrap();
        assert!(source.starts_with("https://github.com/"), "{source}");
        let read = read_reply_with(reply, &tools);
        match (&entry["expect"], read) {
            (Value::String(u), Ok(r)) if u == "unusable" => wrong.push((source, r.tool)),
            (Value::String(_), Err(_)) => {}
            (expect, Ok(r)) => {
                intended += 1;
                if expect["tool"] == r.tool.as_str() && expect["args"] == r.args {
                    recovered += 1;
                } else {
                    wrong.push((source, format!("{} {}", r.tool, r.args)));
                }
            }
            (_, Err(misformat)) => {
                intended += 1;
                println!("not recovered: {source}: {misformat}");
            }
        }
    }
    let rate = f64::from(recovered) / f64::from(intended);
    println!(
        "reply corpus: {} entries, {intended} intended calls, {recovered} recovered ({:.1} %), {} wrong",
        entries.len(),
        rate * 100.0,
        wrong.len()
    );
    assert!(wrong.is_empty(), "wrong calls: {wrong:?}");
    assert!(rate >= FLOOR, "recovery rate {rate}");
}

const PIECES: [&str; 16] = [
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\\",
    ":",
    ",",
    "\n",
    "<invoke name=\"x\">",
    "</invoke>",
    "<parameter=p>",
    "{\"tool_name\": \"t\", \"tool_args\": ",
    "/*",
    "é",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..=rng.below(8) {
        let at = rng.below(chars.len() + 1);
        match rng.below(3) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 => chars
                .splice(at..at, PIECES[rng.below(PIECES.len())].chars())
                .for_each(drop),
            _ => chars.truncate(at.max(1)),
        }
    }
    chars.into_iter().collect()
}

fn nested(rng: &mut Rng, depth: usize) -> String {
    let (open, close) = [
        ("[", "]"),
        ("{\"a\":", "}"),
        ("{\"tool\":\"x\",\"args\":", "}"),
    ][rng.below(3)];
    let mut text = String::from("Sure:\n");
    text.push_str(&open.repeat(depth));
    if rng.below(2) == 0 {
        text.push_str(&close.repeat(depth));
    }
    text
}

#[test]
fn no_reply_panics_or_overflows_a_2_mib_stack() {
    let entries = corpus();
    let replies: Vec<String> = entries
        .iter()
        .map(|e| e["reply"].as_str().unwrap().to_owned())
        .collect();
    let worker = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let mut rng = Rng(0x2545_f491_4f6c_dd1d);
            for depth in [1, 127, 128, 129, 1_000, 100_000, 1_000_000] {
                for _ in 0..3 {
                    let text = nested(&mut rng, depth);
                    let read = read_reply(&text);
                    assert!(depth <= 128 || read.is_err(), "{depth}");
                }
            }
            for _ in 0..20_000 {
                let base = &replies[rng.below(replies.len())];
                let mutated = mutate(&mut rng, base);
                let _ = read_reply(&mutated);
                let _ = read_reply_with(
                    &mutated,
                    &["execute_command", "aio-webcontent", "read", "read_file"],
                );
            }
        });
    worker
        .unwrap()
        .join()
        .expect("the reader panicked or overflowed");
}
