//! Temporary: reads each argument as a reply with the given tools.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tools: Vec<&str> = args[0].split(',').collect();
    for text in &args[1..] {
        println!("{:?}", toolhost_reply::read_reply_with(text, &tools));
    }
}
