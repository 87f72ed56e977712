//! Pins the compiler errors a wrong use of the export macros gives, so a change to the macros
//! cannot make them worse unnoticed. After a deliberate change (or a new rustc that words them
//! differently), regenerate with `TRYBUILD=overwrite cargo test -p plugin-api --test
//! compile_fail` and read the new `.stderr` files before committing them.

#[test]
fn export_macros_explain_a_wrong_use() {
    // trybuild checks the cases in a project of its own (target/tests/trybuild), which does not
    // see this workspace's `[profile.dev] debug = false`: without this its proc-macros and
    // build scripts (syn, serde, abi_stable, tokio) are built with debug info, for nothing.
    // SAFETY: this binary's only test, and no thread of its own reads the environment yet.
    unsafe { std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false") };
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
