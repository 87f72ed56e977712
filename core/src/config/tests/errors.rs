//! Every kind of mistake gives one line naming the file, the line and the key.

use super::*;

#[test]
fn unknown_key_names_file_line_and_expected_keys() {
    let dev = "# dev profile\n\n[calls]\ntimeout = 3\n";
    assert_eq!(
        error(&[(DEV, dev)]),
        "usr/agents/dev/toolhost.toml line 4: unknown key `timeout` in [calls] (expected one of: \
         timeout_seconds, max_retries, backoff_ms, backoff_max_ms)"
    );
    let tool = "[tools.weather]\ntimeout_seconds = 3\npolcy = \"deny\"\n";
    assert_eq!(
        error(&[(GLOBAL, tool)]),
        "usr/toolhost.toml line 3: unknown key `polcy` in [tools.weather] (expected one of: \
         timeout_seconds, max_retries, policy)"
    );
    assert_eq!(
        error(&[(
            GLOBAL,
            "[limits]\nmax_output = 10\n\n[call]\nmax_retries = 1\n"
        )]),
        "usr/toolhost.toml line 4: unknown table `call` (expected one of: limits, calls, \
         breaker, policy, tools, access, audit, isolate, isolation, pinning)"
    );
    let err = load(&root(&[(GLOBAL, "verbose = true\n")])).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::UnknownKey);
    assert_eq!(err.line, Some(1));
}

#[test]
fn bad_enum_value_names_key_value_and_choices() {
    let text = "[calls]\nmax_retries = 1\n\n\n\n\n\n[policy]\nexec = \"maybe\"\n";
    assert_eq!(
        error(&[(GLOBAL, text)]),
        "usr/toolhost.toml line 9: [policy] exec = \"maybe\": expected \"allow\", \"ask\" or \
         \"deny\""
    );
    assert_eq!(
        error(&[(DEV, "[tools.\"my.tool\"]\npolicy = \"always\"\n")]),
        "usr/agents/dev/toolhost.toml line 2: [tools.\"my.tool\"] policy = \"always\": expected \
         \"allow\", \"ask\" or \"deny\""
    );
}

#[test]
fn bad_types_name_key_value_and_expected_type() {
    let cases = [
        (
            "[limits]\nmax_output = \"big\"\n",
            "line 2: [limits] max_output = \"big\": expected a whole number of bytes, 1 or more",
        ),
        (
            "[calls]\nmax_retries = 1.5\n",
            "line 2: [calls] max_retries = 1.5: expected a whole number, 0 or more",
        ),
        (
            "[calls]\nmax_retries = -1\n",
            "line 2: [calls] max_retries = -1: expected a whole number, 0 or more",
        ),
        (
            "[breaker]\nfailures = 0\n",
            "line 2: [breaker] failures = 0: expected a whole number, 1 or more",
        ),
        (
            "[audit]\nenabled = \"yes\"\n",
            "line 2: [audit] enabled = \"yes\": expected true or false",
        ),
        (
            "[access]\nallow = \"weather\"\n",
            "line 2: [access] allow = \"weather\": expected an array",
        ),
        (
            "[access]\ndeny = [\"shell\", \"cap:\"]\n",
            "line 2: [access] deny = \"cap:\": expected a tool name or cap:<capability tag>",
        ),
        ("calls = 5\n", "line 1: calls = 5: expected a table"),
        (
            "[tools]\nw = { policy = { a = 1 } }\n",
            "line 2: [tools.w] policy = { a = 1 }: expected \"allow\", \"ask\" or \"deny\"",
        ),
        (
            "[calls]\nmax_retries = 4294967296\n",
            "line 2: [calls] max_retries = 4294967296: expected a whole number, at most 4294967295",
        ),
    ];
    for (text, want) in cases {
        let err = load(&root(&[(GLOBAL, text)])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("usr/toolhost.toml {want}"),
            "{text}"
        );
        assert_eq!(err.kind(), ConfigErrorKind::InvalidValue);
    }
}

#[test]
fn zero_or_negative_timeouts_are_errors() {
    let expected = "expected a number of seconds greater than 0 (0.5 is half a second)";
    for value in ["0", "-1", "0.0", "-0.5", "nan", "-inf"] {
        let text = format!("[calls]\ntimeout_seconds = {value}\n");
        let want =
            format!("usr/toolhost.toml line 2: [calls] timeout_seconds = {value}: {expected}");
        assert_eq!(error(&[(GLOBAL, &text)]), want);
    }
    let text = "[tools.weather]\ntimeout_seconds = 0\n";
    let want = format!("usr/toolhost.toml line 2: [tools.weather] timeout_seconds = 0: {expected}");
    assert_eq!(error(&[(GLOBAL, text)]), want);
    let text = "[breaker]\ncooldown_seconds = 0\n";
    assert!(error(&[(GLOBAL, text)]).contains("[breaker] cooldown_seconds = 0: expected"));
}

#[test]
fn syntax_error_names_file_and_line() {
    let err = load(&root(&[(DEV, "[calls]\nmax_retries = 1\n[policy\n")])).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Syntax);
    assert_eq!(err.line, Some(3));
    let line = err.to_string();
    assert!(
        line.starts_with("usr/agents/dev/toolhost.toml line 3: invalid TOML: "),
        "{line}"
    );
    assert!(!line.contains('\n'));
    let err = load(&root(&[(GLOBAL, "a = 1\na = 2\n")])).unwrap_err();
    assert_eq!(
        (err.kind(), err.line),
        (ConfigErrorKind::Syntax, Some(2)),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn fifo_and_directory_are_refused() {
    let dir = root(&[]);
    fs::create_dir_all(dir.path().join("usr/agents/dev/toolhost.toml")).unwrap();
    let err = load(&dir).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::NotAFile);
    assert_eq!(
        err.to_string(),
        "usr/agents/dev/toolhost.toml: a directory, not a regular file; remove it, or put a \
         TOML configuration file there"
    );
    let fifo = dir.path().join(GLOBAL);
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = load(&dir).unwrap_err(); // returns: a FIFO is never opened
    assert_eq!(err.kind(), ConfigErrorKind::NotAFile);
    assert!(
        err.to_string()
            .starts_with("usr/toolhost.toml: a named pipe (FIFO)"),
        "{err}"
    );
}

#[test]
fn a_file_over_the_cap_is_refused() {
    let dir = root(&[(GLOBAL, &format!("# {}\n", "x".repeat(100)))]);
    let err = Config::load(&Layout::new(dir.path()), "dev", 64).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::TooLarge);
    assert!(
        err.to_string()
            .starts_with("usr/toolhost.toml: the file is 103 bytes"),
        "{err}"
    );
}

#[test]
fn an_unsafe_profile_name_is_refused() {
    let err = Config::load(&Layout::new("/nonexistent"), "../x", CAP).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidProfile);
}
