//! The reader's rules, one test per rule.

use serde_json::json;

use super::*;

fn call(text: &str) -> (String, Value) {
    let r = read_reply(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    (r.tool, r.args)
}

#[test]
fn strict_json_with_agent_zero_fields() {
    let r = read_reply(
        r#"{"thoughts": ["a"], "headline": "Greeting", "tool_name": "greet", "tool_args": {"name": "Ada"}}"#,
    )
    .unwrap();
    assert_eq!(r.tool, "greet");
    assert_eq!(r.args, json!({"name": "Ada"}));
    assert_eq!(r.thoughts, Some(json!(["a"])));
    assert_eq!(r.headline.as_deref(), Some("Greeting"));
}

#[test]
fn lenient_forms() {
    for text in [
        "~~~json\n{\"tool_name\": \"x\", \"tool_args\": {\"a\": 1,},}\n~~~",
        "Here you go: {'name': 'x', 'parameters': {'a': 1}} thanks",
        "{ /* c */ tool: \"x\", args: { a: 1 } // end\n }",
        "{\"tool_name\": \"x\", \"tool_args\": {\"a\": 1}}\nI hope this helps! {}",
        "{\"tool_name\": \"x\", \"tool_args\": {\"a\": 1}",
        "{\"tool_name\": \"x\", \"tool_args\": {\"a\": 1,",
        "{'tool_name': 'x', 'tool_args': {'a': +1,}}",
    ] {
        assert_eq!(call(text), ("x".to_owned(), json!({"a": 1})), "{text}");
    }
}

#[test]
fn other_frameworks_shapes() {
    let cases = [
        r#"{"name": "x", "arguments": {"a": 1}}"#,
        r#"{"name": "x", "arguments": "{\"a\": 1}"}"#,
        r#"{"name": "x", "arguments": "\"{\\\"a\\\": 1}\""}"#,
        r#"{"type": "function", "function": {"name": "x", "arguments": "{\"a\":1}"}}"#,
        r#"{"tool_calls": [{"id": "c1", "function": {"name": "x", "arguments": {"a": 1}}}, {"function": {"name": "y", "arguments": {}}}]}"#,
        r#"{"thoughts": {"text": "t"}, "command": {"name": "x", "args": {"a": 1}}}"#,
        r#"{"function": "x", "params": {"a": 1}}"#,
        "<tool_call>\n{\"name\": \"x\", \"arguments\": {\"a\": 1}}\n</tool_call>",
        "I'll do it.\n<invoke name=\"x\">\n<parameter name=\"a\">[1]</parameter>\n</invoke>",
        "<tool_call>\n<function=x>\n<parameter=a>\n{\"b\": 2}\n</parameter>\n</function>\n</tool_call>",
        r#"[TOOL_CALLS][{"name": "x", "arguments": {"a": 1}}]"#,
    ];
    let expected = [
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": 1}),
        json!({"a": [1]}),
        json!({"a": {"b": 2}}),
        json!({"a": 1}),
    ];
    for (text, args) in cases.iter().zip(expected) {
        assert_eq!(call(text), ("x".to_owned(), args), "{text}");
    }
    let (_, args) = call("<invoke name=\"x\"><parameter name=\"n\">5</parameter></invoke>");
    assert_eq!(args, json!({"n": "5"}));
    let text =
        "<invoke name=\"x\">\n<parameter name=\"q\" string=\"true\">a b</parameter>\n</invoke>";
    assert_eq!(call(text).1, json!({"q": "a b"}));
    let text =
        "<invoke name=\"x\">\n<tool_args>{\"a\": 1}</tool_args>\nHuman: {\"tool_name\": \"y\"}";
    assert_eq!(call(text), ("x".to_owned(), json!({"a": 1})));
    let text =
        "{\"function\": \"x\",\n\"params\": {\"a\": 1}\nFUNCTION RETURN {\"status\": \"OK\"}";
    assert_eq!(call(text), ("x".to_owned(), json!({"a": 1})));
}

#[test]
fn the_arguments_are_never_dropped() {
    // Before: `{"name", "arguments"}` ran the tool with `{}`.
    for text in [
        r#"{"name": "x", "arguments": "not json"}"#,
        r#"{"tool_name": "x", "tool_args": [1]}"#,
        r#"{"tool_name": "x", "tool_args": "{\"a\": "}"#,
        r#"{"tool_name": "x", "tool_args": {"a": "b", "c"}}"#,
        "<invoke name=\"x\"><parameter name=\"a\">1</invoke>",
    ] {
        let error = read_reply(text).unwrap_err();
        assert!(
            matches!(&error, Misformat::Unreadable(s) if !s.is_empty()),
            "{text}: {error:?}"
        );
    }
    let seen = read_reply(r#"{"name": "x", "arguments": "not json"}"#).unwrap_err();
    assert!(seen.to_string().contains("not json"), "{seen}");
}

#[test]
fn plain_objects_are_not_calls() {
    for text in [
        r#"{"name": "Ada", "age": 36}"#,
        r#"{"name": "x", "description": "d", "parameters": {"type": "object", "properties": {}}}"#,
        "no json here",
        "} backwards {",
        "{\"tool_args\": {}}",
        "{broken",
        "{\"command\": \"ls\"}",
    ] {
        assert_eq!(read_reply(text), Err(Misformat::NoRequest), "{text}");
    }
    for text in ["{\"tool_name\": 3}", "{\"tool_name\": \"  \"}"] {
        assert!(
            matches!(read_reply(text), Err(Misformat::Unreadable(_))),
            "{text}"
        );
    }
}

#[test]
fn invalid_escapes_keep_their_backslash() {
    // Before: JSON5 turned these into `dir C:UsersPublic` and `grep -E 'd+s'`.
    let (_, args) = call(r#"{"tool_name": "t", "tool_args": {"c": "dir C:\Users\Public"}}"#);
    assert_eq!(args, json!({"c": r"dir C:\Users\Public"}));
    let (_, args) = call(r#"{'tool_name': 't', 'tool_args': {'c': "grep -E '\d+\s' f"}}"#);
    assert_eq!(args, json!({"c": r"grep -E '\d+\s' f"}));
    let (_, args) = call(r#"{"tool_name": "t", "tool_args": {"c": "a\tb\u00e9\ud83d\ude00\q"}}"#);
    assert_eq!(args, json!({"c": "a\tbé😀\\q"}));
}

#[test]
fn raw_control_characters_and_inner_quotes() {
    let (_, args) = call("{\"tool_name\": \"t\", \"tool_args\": {\"code\": \"a\n\tb\"}}");
    assert_eq!(args, json!({"code": "a\n\tb"}));
    let text = r#"{"tool_name": "t", "tool_args": {"c": "echo "hi" > f", "d": "use {"a"} here"}}"#;
    assert_eq!(
        call(text).1,
        json!({"c": "echo \"hi\" > f", "d": "use {\"a\"} here"})
    );
    let text = "{\"tool_name\": \"t\", \"tool_args\": {\"c\": \"say \"hi\"\"}}</tool_call>";
    assert_eq!(call(text).1, json!({"c": "say \"hi\""}));
    // Ambiguous: the quotes would not pair up.
    let text = r#"{"tool_name": "t", "tool_args": {"q": "say "hi", "bye": "now""}}"#;
    assert!(
        matches!(read_reply(text), Err(Misformat::Unreadable(_))),
        "{text}"
    );
}

#[test]
fn the_first_block_level_request_wins_over_an_example_in_prose() {
    let text = "Use it like `{\"tool_name\": \"example\", \"tool_args\": {}}`, so:\n```json\n\
                {\"tool_name\": \"real\", \"tool_args\": {}}\n```";
    assert_eq!(call(text).0, "real");
    let text = "Example: {\"name\": \"example\", \"arguments\": {}} - here:\n{\"name\": \"real\", \"arguments\": {}}";
    assert_eq!(call(text).0, "real");
    // Two requests, both block-level: the first one.
    let text = "{\"tool_name\": \"a\"}\n{\"tool_name\": \"b\"}";
    assert_eq!(call(text).0, "a");
    // Only inline: one is taken, several different ones are examples.
    let text = "Calling {\"tool_name\": \"a\"} now.";
    assert_eq!(call(text).0, "a");
    let text = "Either {\"tool_name\": \"a\"} or {\"tool_name\": \"b\"}";
    assert!(matches!(read_reply(text), Err(Misformat::Unreadable(_))));
    // Non-requests and braces in prose before it are skipped.
    let text = "Set {x} to {\"name\": \"Ada\", \"age\": 36}.\n{\"tool_name\": \"real\"}";
    assert_eq!(call(text).0, "real");
    // A broken request is not passed over for a later one.
    let text = "{\"tool_name\": \"a\", \"tool_args\": \"oops\"}\n{\"tool_name\": \"b\"}";
    assert!(matches!(read_reply(text), Err(Misformat::Unreadable(_))));
}

#[test]
fn deep_nesting_is_a_misformat_on_a_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            for n in [129, 20_000, 1_000_000] {
                for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
                    let text = format!(
                        "{{\"tool\": \"x\", \"args\": {}1{}}}",
                        open.repeat(n),
                        close.repeat(n)
                    );
                    assert_eq!(read_reply(&text), Err(Misformat::TooDeep), "{n}");
                    let unclosed = format!("x \"{}", "{\"a\":[".repeat(n));
                    assert!(read_reply(&unclosed).is_err(), "{n}");
                }
            }
            let ok = format!(
                "{{\"tool\": \"x\", \"args\": {{\"a\": {}1{}}}}}",
                "[".repeat(126),
                "]".repeat(126)
            );
            assert!(read_reply(&ok).is_ok());
        })
        .unwrap();
    handle.join().unwrap();
}

#[test]
fn a_comment_or_a_stray_quote_cannot_hide_deep_nesting() {
    let deep = |prefix: &str| {
        format!(
            "{{\"tool_name\": \"x\", {prefix} \"tool_args\": {{\"v\": {}1{}}}}}",
            "[".repeat(200_000),
            "]".repeat(200_000)
        )
    };
    let replies = [
        deep("// don't\n"),
        deep("/* it's */"),
        deep("'"),
        deep("\""),
    ];
    let reader = std::thread::Builder::new().stack_size(2 << 20);
    let reader = reader
        .spawn(move || replies.iter().map(|r| parse_reply(r)).collect::<Vec<_>>())
        .unwrap();
    let read = reader.join().expect("the reader overflowed or panicked");
    assert!(read.iter().all(Option::is_none), "{read:?}");
}

#[test]
fn calls_named_outside_the_object() {
    let args = json!({"q": "x"});
    for text in [
        "[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}",
        "functions.search:0<|tool_call_argument_begin|>{\"q\": \"x\"}<|tool_calls_section_end|>",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{\"q\": \"x\"}\n```<｜tool▁call▁end｜>",
        "<tool_call>search<arg_key>q</arg_key><arg_value>x</arg_value></tool_call>",
        "<tool_call>search\n<arg_key>q</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
        "Action:\n```json\n{\"action\": \"search\", \"action_input\": {\"q\": \"x\"}}\n```",
        "{\"tool_name\": \"search\", \"tool_input\": {\"q\": \"x\"}}",
    ] {
        assert_eq!(call(text), ("search".to_owned(), args.clone()), "{text}");
    }
    assert_eq!(
        call("<tool_call>now</tool_call>"),
        ("now".to_owned(), json!({}))
    );
}

#[test]
fn calls_written_as_python() {
    for (text, args) in [
        ("[search(q=\"x\")]", json!({"q": "x"})),
        (
            "<|tool_call_start|>[search(q='x', n=3)]<|tool_call_end|>",
            json!({"q": "x", "n": 3}),
        ),
        (
            "search(q=\"C:\\Users\", deep=True, tags=['a'], none=None)",
            json!({"q": "C:\\Users", "deep": true, "tags": ["a"], "none": null}),
        ),
        (
            "Checking.<|tool_call_start|>[search(q=\"x\"), other(a=1)]<|tool_call_end|>",
            json!({"q": "x"}),
        ),
        ("```python\nsearch()\n```", json!({})),
    ] {
        assert_eq!(call(text), ("search".to_owned(), args), "{text}");
    }
    // A positional argument is unreadable, never a call without it.
    assert!(matches!(
        read_reply("[search(\"x\")]"),
        Err(Misformat::Unreadable(_))
    ));
    // Prose is not Python.
    for text in [
        "Sure (I will) do it",
        "f(x) is a function",
        "See [the docs(v2)](url)",
    ] {
        assert!(read_reply(text).is_err(), "{text}");
    }
}

#[test]
fn arguments_under_an_unknown_key_are_not_dropped() {
    let read = read_reply(r#"{"tool_name": "search", "tool_arguments": {"q": "x"}}"#);
    assert!(
        matches!(read, Err(Misformat::Unreadable(ref s)) if s.contains("tool_arguments")),
        "{read:?}"
    );
    // Other fields of a request are not taken for arguments.
    assert_eq!(
        call(r#"{"thoughts": {"a": 1}, "tool_name": "now"}"#),
        ("now".to_owned(), json!({}))
    );
}

#[test]
fn deepseek_dsml_markup_is_read() {
    let text = "Let me look.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read\">\n<｜DSML｜parameter name=\"path\" string=\"true\">src/app.ts</｜DSML｜parameter>\n<｜DSML｜parameter name=\"limit\" string=\"false\">40</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    assert_eq!(
        call(text),
        (
            "read".to_owned(),
            json!({"path": "src/app.ts", "limit": 40})
        )
    );
}

#[test]
fn an_element_named_after_a_known_tool_is_a_call_and_other_xml_is_not() {
    let tools = ["execute_command", "write_to_file", "attempt_completion"];
    let read = |text: &str| read_reply_with(text, &tools);
    let cline = "<execute_command>\n<command>ls -la &amp;&amp; echo &quot;ok&quot;</command>\n<requires_approval>false</requires_approval>\n</execute_command>";
    let request = read(cline).unwrap();
    assert_eq!(request.tool, "execute_command");
    assert_eq!(
        request.args,
        json!({"command": "ls -la && echo \"ok\"", "requires_approval": "false"})
    );
    // Content with markup of its own, and no closing tag of the call.
    let write = "<write_to_file>\n<path>a.html</path>\n<content>\n<p>hi</p>\n</content>";
    assert_eq!(
        read(write).unwrap().args,
        json!({"path": "a.html", "content": "<p>hi</p>"})
    );
    // Today's dialects still win: a JSON request is read as before.
    let json = r#"{"tool_name": "response", "tool_args": {"text": "<attempt_completion>"}}"#;
    assert_eq!(read(json).unwrap().tool, "response");
    // No known tool named, or prose around the name: not a call.
    for text in [
        "<read_file><path>a</path></read_file>",
        "Use <execute_command> to run it.",
        "<execute_command>ls</execute_command>",
        "<b>bold</b>",
    ] {
        assert_eq!(read(text), Err(Misformat::NoRequest), "{text}");
    }
    // An argument never closed: unreadable, never a call without it.
    let broken = read("<execute_command>\n<command>ls\n</execute_command>");
    assert!(
        matches!(broken, Err(Misformat::Unreadable(_))),
        "{broken:?}"
    );
}

// The dialects of issue 61, each from real replies (sources named).

#[test]
fn dsml_with_doubled_ascii_or_spaced_bars() {
    // https://github.com/syt2/paper-chat-for-zotero/issues/28: doubled bars, typographic quotes.
    let doubled = "<｜｜DSML｜｜tool_calls>\n<｜｜DSML｜｜invoke name=“get_pages”>\n<｜｜DSML｜｜parameter name=“pages” string=“true”>3-5</｜｜DSML｜｜parameter>\n</｜｜DSML｜｜invoke>\n</｜｜DSML｜｜tool_calls>";
    assert_eq!(
        call(doubled),
        ("get_pages".to_owned(), json!({"pages": "3-5"}))
    );
    // The spaced form of https://github.com/diegosouzapw/OmniRoute/pull/13930.
    let spaced = "<｜｜DSML｜｜ calls>\n<｜｜DSML｜｜ invoke name=\"read\">\n<｜｜DSML｜｜ parameter name=\"path\" string=\"true\">[1]</｜｜DSML｜｜ parameter>\n<｜｜DSML｜｜ parameter name=\"n\" string=\"false\">2</｜｜DSML｜｜ parameter>\n</｜｜DSML｜｜ invoke>\n</｜｜DSML｜｜ calls>";
    assert_eq!(
        call(spaced),
        ("read".to_owned(), json!({"path": "[1]", "n": 2}))
    );
    // https://github.com/kittors/deepseek-web-api/issues/11: ASCII bars, a wrapper's marker lost.
    let ascii = "< calls>\n<|DSML|invoke name=\"pwsh\">\n<|DSML|parameter name=\"command\" string=\"true\">Get-ChildItem</|DSML|parameter>\n</|DSML|invoke>\n</|DSML|calls>";
    assert_eq!(
        call(ascii),
        ("pwsh".to_owned(), json!({"command": "Get-ChildItem"}))
    );
    // https://github.com/adolfousier/opencrabs/issues/419: `<function><name>`, closers corrupted.
    let element = "<function>\n  <name>bash</name>\n  <parameter name=\"command\" string=\"true\">ls 2>/dev/null</｜｜DSML｜｜parameter>\n  </｜｜DSML｜｜invoke>";
    assert_eq!(
        call(element),
        ("bash".to_owned(), json!({"command": "ls 2>/dev/null"}))
    );
    // https://github.com/Luce-Org/lucebox/issues/742: a closing tag left out before the next call.
    let unclosed = "<invoke name=\"a\">\n<parameter name=\"p\">1</parameter>\n<invoke name=\"b\">\n<parameter name=\"q\">2</parameter>\n</invoke>";
    assert_eq!(call(unclosed), ("a".to_owned(), json!({"p": "1"})));
    // Refused: https://github.com/anomalyco/opencode/issues/24566 (string="false", broken JSON)
    // and https://github.com/MetaFARS/codex-relay/pull/49 (a parameter written as an invoke).
    for text in [
        "<｜DSML｜invoke name=\"question\">\n<｜DSML｜parameter name=\"questions\" string=\"false\">[{\"a\": 1}, {\"b\"}]</｜DSML｜parameter>\n</｜DSML｜invoke>",
        "<｜｜DSML｜｜invoke name=\"exec_command\">\n<｜｜DSML｜｜invoke name=\"cmd\" string=\"echo alpha\" />\n</｜｜DSML｜｜invoke>",
    ] {
        assert!(matches!(read_reply(text), Err(Misformat::Unreadable(_))), "{text}");
    }
}

#[test]
fn elements_named_after_tools_with_attributes_self_closing_or_cdata() {
    let tools = ["read_file", "list_files", "write_to_file"];
    let read = |text: &str| read_reply_with(text, &tools);
    // https://github.com/RooCodeInc/Roo-Code/issues/10358: nested, after prose; `args` is its
    // XML text, as Roo Code reads it.
    let roo = "I need to read it.\n\n<read_file>\n<args>\n<file>\n<path>docs/plan.md</path>\n</file>\n</args>\n</read_file>";
    let request = read(roo).unwrap();
    assert_eq!(
        request.args,
        json!({"args": "<file>\n<path>docs/plan.md</path>\n</file>"})
    );
    let attributes = read("<list_files path=\"src\" recursive=\"true\"/>").unwrap();
    assert_eq!(attributes.args, json!({"path": "src", "recursive": "true"}));
    let cdata = "<write_to_file>\n<path>a.html</path>\n<content><![CDATA[<p>a &amp; b</p></content>]]></content>\n</write_to_file>";
    assert_eq!(
        read(cdata).unwrap().args,
        json!({"path": "a.html", "content": "<p>a &amp; b</p></content>"})
    );
    // An argument given as an attribute and as a child: unreadable.
    let twice = read("<read_file path=\"a\"><path>b</path></read_file>");
    assert!(matches!(twice, Err(Misformat::Unreadable(_))), "{twice:?}");
}

#[test]
fn values_are_typed_by_the_schema() {
    // https://github.com/RooCodeInc/Roo-Code/issues/10358 again, with `args` an object.
    let schema = json!({"type": "object", "properties": {
        "args": {"type": "object", "properties": {"file": {"type": "array", "items": {
            "type": "object", "properties": {"line": {"type": "integer"}}}}}},
        "flag": {"type": "boolean"},
        "label": {"type": "string"},
        "either": {"type": ["string", "integer"]}}});
    let tools = [("read_file", &schema)];
    let text = "<read_file>\n<args>\n<file>\n<path>a.md</path>\n<line>3</line>\n</file>\n</args>\n<flag>true</flag>\n<label>7</label>\n<either>8</either>\n</read_file>";
    let request = read_reply_typed(text, &tools).unwrap();
    assert_eq!(
        request.args,
        json!({"args": {"file": [{"path": "a.md", "line": 3}]}, "flag": true, "label": "7", "either": "8"})
    );
    // A value that does not convert stays as written.
    let text = "<read_file><flag>yes</flag></read_file>";
    assert_eq!(
        read_reply_typed(text, &tools).unwrap().args,
        json!({"flag": "yes"})
    );
}

#[test]
fn arrow_maps_with_cli_arguments() {
    // https://github.com/NousResearch/hermes-agent/issues/35935 (MiniMax M2.7).
    let text = "[TOOL_CALL]\n{tool => \"terminal\", args => {\n  --command \"echo test\"\n}}\n[/TOOL_CALL]";
    assert_eq!(
        call(text),
        ("terminal".to_owned(), json!({"command": "echo test"}))
    );
    // The issue's form, JSON arguments, `key =>` pairs, flags and numbers.
    for (text, tool, args) in [
        (
            "[TOOL_CALL] {tool => \"skills_list\", args => { --category \"research\" }} [/TOOL_CALL]",
            "skills_list",
            json!({"category": "research"}),
        ),
        (
            "[TOOL_CALL]{tool => \"web_search\", args => {\"query\":\"NET\"}}[/TOOL_CALL]",
            "web_search",
            json!({"query": "NET"}),
        ),
        (
            "[TOOL_CALL]{tool => \"recall\", args => { query => \"topic\", k => 3 }}[/TOOL_CALL]",
            "recall",
            json!({"query": "topic", "k": 3}),
        ),
        (
            "[TOOL_CALL]{tool => \"ls\", args => { --all --depth: 2 }}[/TOOL_CALL]",
            "ls",
            json!({"all": true, "depth": 2}),
        ),
        ("[TOOL_CALL]{tool => \"now\"}[/TOOL_CALL]", "now", json!({})),
    ] {
        assert_eq!(call(text), (tool.to_owned(), args), "{text}");
    }
    for text in [
        "[TOOL_CALL]{tool => \"x\", args => { --a \"1\" --a \"2\" }}[/TOOL_CALL]",
        "[TOOL_CALL]{tool => \"x\", args => { --a \"never closed }}[/TOOL_CALL]",
        "[TOOL_CALL]{tool => \"x\", args => \"a\"}[/TOOL_CALL]",
    ] {
        assert!(
            matches!(read_reply(text), Err(Misformat::Unreadable(_))),
            "{text}"
        );
    }
}

#[test]
fn a_request_whose_head_was_cut() {
    // The form issue 61 measured: the reply starts inside the `thoughts` array.
    let text = "the user greeted me\",\n    \"I will answer\"\n  ],\n  \"tool_name\": \"response\",\n  \"tool_args\": {\"text\": \"Hi!\"}\n}";
    assert_eq!(call(text), ("response".to_owned(), json!({"text": "Hi!"})));
    // A key inside a sentence, or not after a member's comma, is not a cut request.
    for text in [
        "Write \"tool_name\": \"response\" to answer.",
        "I think\n\"tool_name\": \"response\"}",
    ] {
        assert_eq!(read_reply(text), Err(Misformat::NoRequest), "{text}");
    }
}

#[test]
fn a_broken_repeated_prefix() {
    // https://github.com/letta-ai/letta/issues/1450 (llama3 on groq).
    let text = "\n{\n  \"function\": \"send_message\",{\n  \"function\": \"send_message\",\n  \"params\": {\n    \"message\": \"Nice to meet you, Chad!\"\n  }\n}";
    assert_eq!(
        call(text),
        (
            "send_message".to_owned(),
            json!({"message": "Nice to meet you, Chad!"})
        )
    );
    // Another tool in the inner request, or arguments in the broken one: unreadable.
    for text in [
        "{\"function\": \"send_message\",{\"function\": \"other\", \"params\": {}}}",
        "{\"function\": \"x\", \"params\": {\"a\": 1},{\"function\": \"x\", \"params\": {}}}",
    ] {
        assert!(
            matches!(read_reply(text), Err(Misformat::Unreadable(_))),
            "{text}"
        );
    }
}
