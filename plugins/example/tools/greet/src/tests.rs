//! Unit tests: the tool called with a host-less context, as plain Rust.

use plugin_api::serde_json::json;
use plugin_api::testing::TestContext;
use plugin_api::ErrorKind;

use super::Greet;

#[tokio::test]
async fn greets_and_reports_progress() {
    let ctx = TestContext::new().with_tool_name("greet");
    let answer = ctx
        .call(&Greet, json!({"name": "Ada", "times": 2}))
        .await
        .unwrap();
    assert_eq!(answer.message, "Hello, Ada! Hello, Ada!");
    assert!(!answer.break_loop);
    assert_eq!(answer.additional.unwrap()["greeted"], json!("Ada"));
    assert_eq!(ctx.progress_updates(), ["thinking of a greeting for Ada"]);
}

#[tokio::test]
async fn the_shout_method_shouts() {
    let ctx = TestContext::new().with_method("shout");
    let answer = ctx.call(&Greet, json!({"name": "Ada"})).await.unwrap();
    assert_eq!(answer.message, "HELLO, ADA!");
}

#[tokio::test]
async fn a_secret_is_filled_in_for_the_tool_and_masked_in_its_answer() {
    let ctx = TestContext::new().with_secret("GUEST", "Ada Lovelace");
    let answer = ctx
        .call(&Greet, json!({"name": "§§secret(GUEST)"}))
        .await
        .unwrap();
    // The tool worked with the value...
    assert_eq!(ctx.progress(), "thinking of a greeting for Ada Lovelace");
    // ...and the model sees the placeholder again.
    assert_eq!(answer.message, "Hello, §§secret(GUEST)!");
}

#[tokio::test]
async fn a_missing_name_is_a_validation_error() {
    let error = TestContext::new()
        .call(&Greet, json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Validation);
    assert_eq!(
        error.message(),
        "invalid tool arguments: missing field `name`"
    );
}

#[test]
fn the_parameters_are_derived_from_the_arguments_type() {
    let parameters = plugin_api::Tool::info(&Greet).parameters;
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["required"], json!(["name"]));
    let properties = &parameters["properties"];
    assert_eq!(properties["name"]["type"], "string");
    assert_eq!(properties["name"]["description"], "Who to greet.");
    assert_eq!(properties["times"]["type"], "integer");
    assert_eq!(properties["times"]["minimum"], 1);
    assert_eq!(properties["times"]["maximum"], 1000);
    assert_eq!(properties["times"]["default"], 1);
    assert_eq!(properties["times"]["description"], "How often.");
}

#[tokio::test]
async fn an_intervention_stops_it_after_the_progress() {
    let ctx = TestContext::new();
    ctx.intervene("stopped by the user");
    let error = ctx.call(&Greet, json!({"name": "Ada"})).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Intervention);
    assert_eq!(ctx.progress_updates().len(), 1);
}
