//! Pins the compiler errors a wrong use of the export macros gives, so a change to the macros
//! cannot make them worse unnoticed. After a deliberate change (or a new rustc that words them
//! differently), regenerate with `TRYBUILD=overwrite cargo test -p plugin-api --test
//! compile_fail` and read the new `.stderr` files before committing them.

#[test]
fn export_macros_explain_a_wrong_use() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
