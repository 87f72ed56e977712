//! Temporary: the corpus, read as reply_corpus.rs reads it.
use serde_json::Value;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut tools: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["expect"]["tool"].as_str())
        .collect();
    tools.sort_unstable();
    tools.dedup();
    let (mut intended, mut recovered, mut wrong) = (0, 0, 0);
    for e in &entries {
        let reply = e["reply"].as_str().unwrap();
        let source = e["source"].as_str().unwrap();
        let read = toolhost_reply::read_reply_with(reply, &tools);
        match (&e["expect"], read) {
            (Value::String(_), Ok(r)) => {
                wrong += 1;
                println!("WRONG (unusable read): {source}: {} {}", r.tool, r.args)
            }
            (Value::String(_), Err(_)) => {}
            (x, Ok(r)) => {
                intended += 1;
                if x["tool"] == r.tool.as_str() && x["args"] == r.args {
                    recovered += 1
                } else {
                    wrong += 1;
                    println!("WRONG: {source}: {} {}", r.tool, r.args)
                }
            }
            (_, Err(m)) => {
                intended += 1;
                println!("not recovered: {source}: {m}")
            }
        }
    }
    println!(
        "{} entries, {intended} intended, {recovered} recovered, {wrong} wrong",
        entries.len()
    );
}
