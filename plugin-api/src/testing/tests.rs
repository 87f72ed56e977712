use std::time::Duration;

use serde_json::json;

use super::*;
use crate::{Args, ErrorKind};

/// Does what its `op` argument says, through the context.
#[derive(Default)]
struct Probe;

impl Tool for Probe {
    async fn execute(&self, ctx: &Context, args: Args) -> Result<Response, ToolError> {
        match args.str("op").unwrap_or_default() {
            "fields" => Ok(Response::text(format!(
                "{} {} {} {:?} {}",
                ctx.agent_name(),
                ctx.profile(),
                ctx.tool_name(),
                ctx.method(),
                ctx.log_id()
            ))),
            "record" => {
                ctx.set_progress("one").await;
                ctx.add_progress(" and more");
                ctx.log_content("details");
                ctx.add_history(Role::Warning, "careful");
                ctx.set_loop_data("k", json!([1]))?;
                let seen = ctx.loop_data("given");
                Ok(Response::text(format!("{seen:?}")))
            }
            "wait" => {
                ctx.cancelled().await;
                Ok(Response::text(format!("cancelled: {}", ctx.is_cancelled())))
            }
            "check" => ctx
                .check_intervention()
                .await
                .map(|()| Response::text("went on")),
            "panic" => panic!("boom"),
            "leak" => Err(ToolError::business(format!(
                "bad {}",
                args.require_str("v")?
            ))),
            other => Ok(Response::text(other)),
        }
    }
}

#[tokio::test]
async fn fields_are_the_ones_set() {
    let answer = TestContext::new()
        .with_agent_name("A7")
        .with_profile("dev")
        .with_tool_name("probe")
        .with_method("m")
        .with_log_id(42)
        .call(&Probe, json!({"op": "fields"}))
        .await
        .unwrap();
    assert_eq!(answer.message, r#"A7 dev probe Some("m") 42"#);
    let defaults = TestContext::new()
        .call(&Probe, json!({"op": "fields"}))
        .await;
    assert_eq!(defaults.unwrap().message, "A0 default tool None 1");
}

#[tokio::test]
async fn records_what_the_tool_did() {
    let ctx = TestContext::new().with_loop_data("given", json!("x"));
    let answer = ctx.call(&Probe, json!({"op": "record"})).await.unwrap();
    assert_eq!(answer.message, r#"Some(String("x"))"#);
    assert_eq!(ctx.progress(), "one and more");
    assert_eq!(ctx.progress_updates(), ["one"]);
    assert_eq!(ctx.log_content().as_deref(), Some("details"));
    let history = ctx.history();
    assert_eq!(
        (history[0].role, history[0].content.as_str()),
        (Role::Warning, "careful")
    );
    assert_eq!(ctx.loop_data_writes(), [("k".to_owned(), json!([1]))]);
    assert_eq!(ctx.loop_data("k"), Some(json!([1])));
}

#[tokio::test]
async fn a_cancel_wakes_a_waiting_call() {
    let ctx = TestContext::new();
    let call = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.call(&Probe, json!({"op": "wait"})).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!ctx.context().is_cancelled());
    ctx.cancel();
    let answer = call.await.unwrap().unwrap();
    assert_eq!(answer.message, "cancelled: true");
}

#[tokio::test]
async fn an_intervention_fails_the_check() {
    let ctx = TestContext::new();
    assert_eq!(
        ctx.call(&Probe, json!({"op": "check"}))
            .await
            .unwrap()
            .message,
        "went on"
    );
    ctx.intervene("stopped by the user");
    let error = ctx.call(&Probe, json!({"op": "check"})).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Intervention);
    assert_eq!(error.message(), "stopped by the user");
}

#[tokio::test]
async fn a_panic_is_an_internal_error_with_its_message() {
    let error = TestContext::new()
        .call(&Probe, json!({"op": "panic"}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(error.message().contains("boom"), "{}", error.message());
    assert!(error.message().contains("tests.rs"), "{}", error.message());
}

#[tokio::test]
async fn arguments_must_be_an_object() {
    let error = TestContext::new()
        .call(&Probe, json!([1]))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Validation);
    let answer = TestContext::new().call(&Probe, Value::Null).await.unwrap();
    assert_eq!(answer.message, "");
}

#[tokio::test]
async fn secrets_are_masked_in_errors_and_unknown_keys_are_repairable() {
    let ctx = TestContext::new().with_secret("PW", "hunter22");
    let error = ctx
        .call(&Probe, json!({"op": "leak", "v": "§§secret(PW)"}))
        .await;
    assert_eq!(error.unwrap_err().message(), "bad §§secret(PW)");
    let error = ctx
        .call(&Probe, json!({"op": "§§secret(NOPE)"}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Repairable);
    assert!(
        error.message().contains("known secret keys are PW"),
        "{}",
        error.message()
    );
    let plugin_side = ctx.context();
    let mut value = json!({"§§secret(PW)": ["§§secret(PW)"]});
    plugin_side.unmask_secrets(&mut value).unwrap();
    assert_eq!(value, json!({"hunter22": ["hunter22"]}));
    assert_eq!(plugin_side.mask_secrets("pw=hunter22"), "pw=§§secret(PW)");
}

#[tokio::test]
async fn extension_handlers_answer_fail_or_panic() {
    let ctx = TestContext::new()
        .with_extensions("refuse", |_| Err(ToolError::business("no")))
        .with_extensions("crash", |_| panic!("handler bug"));
    let plugin_side = ctx.context();
    let same = plugin_side.call_extensions("none", json!({"a": 1})).await;
    assert_eq!(same.unwrap(), json!({"a": 1}));
    let refused = plugin_side.call_extensions("refuse", json!(null)).await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Business);
    let crashed = plugin_side
        .call_extensions("crash", json!(null))
        .await
        .unwrap_err();
    assert!(
        crashed.message().contains("handler bug"),
        "{}",
        crashed.message()
    );
    let points: Vec<String> = ctx.extension_calls().into_iter().map(|c| c.point).collect();
    assert_eq!(points, ["none", "refuse", "crash"]);
}

#[tokio::test]
async fn default_after_execution_adds_the_answer_to_history() {
    let ctx = TestContext::new();
    let plugin_side = ctx.context();
    plugin_side
        .default_before_execution(&Args::default())
        .await
        .unwrap();
    plugin_side
        .default_after_execution(&Response::text("done"))
        .await
        .unwrap();
    assert_eq!(
        ctx.history(),
        [HistoryEntry {
            role: Role::Tool,
            content: "done".into()
        }]
    );
}

#[test]
fn the_context_outlives_the_test_context() {
    let plugin_side = TestContext::new().with_tool_name("kept").context();
    let copy = plugin_side.clone();
    drop(plugin_side);
    assert_eq!(copy.tool_name(), "kept");
}
