//! The official MCP conformance suite's fixture tools for the tasks extension — served only by a
//! build with the `conformance` cargo feature (`ahp-conformance`, which `.ci/conformance` builds
//! and runs); the `ahp` binary never has them.
//!
//! The suite's `tasks-*` scenarios call tools of its reference server by name: `greet`
//! (synchronous), `slow_compute` (a task when the client declares the extension, else
//! synchronous), and, each needing the extension (`-32021` without it): `failing_job` (a tool
//! error), `protocol_error_job` (a failed task), `confirm_delete` and `multi_input` (a task that
//! asks for one, then two, answers with `input_required`), and `test_tool_with_task` (one MRTR
//! round, then a task). Each task is a call task of the store
//! ([`ahp_store::conversation::mcp_call`]) run here on the runtime: the same rows, `tasks/get`,
//! `tasks/update` and `tasks/cancel` as ahp's own tools, owned by the caller's principal. A run
//! is not resumed after a restart (its task stays `working` until its time runs out).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use ahp_store::conversation::mcp_task::{JsonObject, McpTask, McpTaskStatus};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, InputRequests, InputRequiredResult, Tool,
};
use serde_json::{Value, json};

use super::identity::Asker;
use super::tasks;
use crate::shared_store::{SharedStore, StoreLock};

/// Longest `slow_compute` run, in seconds.
pub(crate) const MAX_COMPUTE_SECONDS: u64 = 120;
/// Longest string argument a fixture takes, in bytes.
pub(crate) const MAX_ARGUMENT_BYTES: usize = 256;
/// How often a run waiting for answers reads its task.
const ANSWER_POLL: Duration = Duration::from_millis(50);
/// How long a run waits for answers before it fails its task.
const ANSWER_WAIT: Duration = Duration::from_secs(600);

/// A surface that serves the fixtures: they need its store.
pub(crate) trait FixtureHost: Send + Sync + 'static {
    /// The store the surface's tasks live in.
    fn fixture_store(&self) -> SharedStore;
}

/// The fixture tools, as routes of a surface `S`.
pub(crate) fn fixtures<S: FixtureHost>() -> ToolRouter<S> {
    let string = |name: &str| json!({"type": "object", "properties": {name: {"type": "string"}}});
    let tools = [
        ("greet", "Says hello to `name` (synchronous).", string("name")),
        (
            "slow_compute",
            "Waits `seconds` (0 to 120), then reports `label`: a task when the client declares the tasks extension.",
            json!({"type": "object", "properties": {"seconds": {"type": "integer"}, "label": {"type": "string"}}}),
        ),
        (
            "failing_job",
            "A task that completes with a tool error.",
            json!({"type": "object"}),
        ),
        ("protocol_error_job", "A task that fails.", json!({"type": "object"})),
        (
            "confirm_delete",
            "A task that asks to confirm deleting `filename`.",
            string("filename"),
        ),
        (
            "multi_input",
            "A task that asks two questions at once.",
            json!({"type": "object"}),
        ),
        (
            "test_tool_with_task",
            "Asks for a name (one MRTR round), then greets it from a task.",
            json!({"type": "object"}),
        ),
    ];
    let mut router = ToolRouter::new();
    for (name, description, schema) in tools {
        let Value::Object(schema) = schema else { unreachable!() };
        let tool = Tool::new(name, description, Arc::new(schema));
        router.add_route(ToolRoute::new_dyn(tool, |ctx: ToolCallContext<'_, S>| {
            Box::pin(call(ctx))
        }));
    }
    router
}

/// A call of one fixture.
async fn call<S: FixtureHost>(ctx: ToolCallContext<'_, S>) -> Result<CallToolResponse, McpError> {
    let store = ctx.service.fixture_store();
    let asker = Asker::of(&ctx.request_context.extensions);
    let as_task = tasks::answers_with_task(&ctx.request_context);
    let args = ctx.arguments.unwrap_or_default();
    let run = Run { store, asker };
    let needs_task = || {
        if as_task {
            Ok(())
        } else {
            Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))
        }
    };
    match ctx.name.as_ref() {
        "greet" => Ok(text(format!("Hello, {}!", string(&args, "name")?)).into()),
        "slow_compute" => {
            let seconds = args.get("seconds").map_or(Some(0), Value::as_u64);
            let seconds = seconds.filter(|s| *s <= MAX_COMPUTE_SECONDS).ok_or_else(|| {
                McpError::invalid_params(format!("seconds: an integer from 0 to {MAX_COMPUTE_SECONDS}"), None)
            })?;
            let label = string(&args, "label")?;
            let compute = async move {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                Ok(text(format!("{label}: computed in {seconds}s")))
            };
            if as_task {
                run.start("slow_compute", compute).await
            } else {
                Ok(compute.await?.into())
            }
        }
        "failing_job" => {
            needs_task()?;
            let fail = async { Ok(CallToolResult::error(vec![ContentBlock::text("the job failed")])) };
            run.start("failing_job", fail).await
        }
        "protocol_error_job" => {
            needs_task()?;
            let fail = async { Err(McpError::internal_error("the job broke down", None)) };
            run.start("protocol_error_job", fail).await
        }
        "confirm_delete" => {
            needs_task()?;
            let file = string(&args, "filename")?;
            let question = elicit(&format!("Delete {file}?"), "confirm", "boolean");
            let requests = [("confirm".to_owned(), question)].into_iter().collect();
            run.start_asking("confirm_delete", requests, move |answers| {
                let yes = answers["confirm"]["action"] == "accept" && answers["confirm"]["content"]["confirm"] == true;
                text(if yes {
                    format!("Deleted {file}")
                } else {
                    format!("Kept {file}")
                })
            })
            .await
        }
        "multi_input" => {
            needs_task()?;
            let requests = [
                ("first".to_owned(), elicit("First name?", "name", "string")),
                ("second".to_owned(), elicit("Second name?", "name", "string")),
            ]
            .into_iter()
            .collect();
            run.start_asking("multi_input", requests, |answers| {
                let name = |k: &str| answers[k]["content"]["name"].as_str().unwrap_or("?").to_owned();
                text(format!("Got {} and {}", name("first"), name("second")))
            })
            .await
        }
        "test_tool_with_task" => {
            let Some(answers) = ctx.input_responses else {
                let request = elicit("What is your name?", "name", "string");
                let requests: InputRequests = serde_json::from_value(json!({ "user_name": request }))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                return Ok(InputRequiredResult::from_input_requests(requests).into());
            };
            let name = answers.get("user_name").and_then(|a| a["content"]["name"].as_str());
            let name = bounded("user_name", name.unwrap_or_default())?.to_owned();
            needs_task()?;
            run.start(
                "test_tool_with_task",
                async move { Ok(text(format!("Hello, {name}!"))) },
            )
            .await
        }
        other => Err(McpError::invalid_params(format!("no fixture {other}"), None)),
    }
}

/// The task of a run: created in the store before the client hears of it, ended by the run.
struct Run {
    store: SharedStore,
    asker: Asker,
}

impl Run {
    /// Creates the task of `tool` and runs `work` for it on the runtime; answers with the task.
    async fn start(
        self,
        tool: &'static str,
        work: impl Future<Output = Result<CallToolResult, McpError>> + Send + 'static,
    ) -> Result<CallToolResponse, McpError> {
        let task = self.create(tool).await?;
        let id = task.id.clone();
        tokio::spawn(async move {
            let outcome = work.await;
            self.end(&id, outcome).await;
        });
        Ok(tasks::created(&task))
    }

    /// Creates the task of `tool`, which asks the client `requests` and, once every one is
    /// answered, completes with `finish(answers)`.
    async fn start_asking(
        self,
        tool: &'static str,
        requests: JsonObject,
        finish: impl FnOnce(&JsonObject) -> CallToolResult + Send + 'static,
    ) -> Result<CallToolResponse, McpError> {
        let task = self.create(tool).await?;
        let id = task.id.clone();
        let (store, principal) = (self.store.clone(), self.asker.caller.principal().clone());
        let asked = blocking(move || store.locked().ask_mcp_call_input(&principal, &id, &requests)).await?;
        let id = asked.id.clone();
        tokio::spawn(async move {
            let outcome = match self.answers(&id).await {
                Some(Ok(answers)) => Ok(finish(&answers)),
                Some(Err(e)) => Err(e),
                None => return,
            };
            self.end(&id, outcome).await;
        });
        Ok(tasks::created(&task))
    }

    async fn create(&self, tool: &'static str) -> Result<McpTask, McpError> {
        let (store, principal) = (self.store.clone(), self.asker.caller.principal().clone());
        blocking(move || store.locked().create_mcp_call(&principal, tool)).await
    }

    /// The answers, once the task works again; `None` if it ended meanwhile (cancelled).
    async fn answers(&self, id: &str) -> Option<Result<JsonObject, McpError>> {
        let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
        while tokio::time::Instant::now() < deadline {
            let (store, principal, id) = (self.store.clone(), self.asker.caller.principal().clone(), id.to_owned());
            let task = match blocking(move || store.locked().mcp_task(&principal, &id)).await {
                Ok(Some(t)) => t,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            match task.status {
                McpTaskStatus::InputRequired => tokio::time::sleep(ANSWER_POLL).await,
                McpTaskStatus::Working => return Some(Ok(task.input_responses.unwrap_or_default())),
                _ => return None,
            }
        }
        Some(Err(McpError::internal_error("no answer came in time", None)))
    }

    /// Ends task `id` with the run's outcome (a cancel that came first keeps it cancelled).
    async fn end(&self, id: &str, outcome: Result<CallToolResult, McpError>) {
        let (status, outcome) = match outcome.map(serde_json::to_value) {
            Ok(Ok(Value::Object(result))) => (McpTaskStatus::Completed, result),
            Ok(_) => (
                McpTaskStatus::Failed,
                error_object(-32603, "the result could not be serialized"),
            ),
            Err(e) => (McpTaskStatus::Failed, error_object(e.code.0, &e.message)),
        };
        let (store, principal, id) = (self.store.clone(), self.asker.caller.principal().clone(), id.to_owned());
        let ended = blocking(move || store.locked().end_mcp_call(&principal, &id, status, &outcome)).await;
        if let Err(e) = ended {
            tracing::warn!("conformance fixture: the task could not be ended: {e}");
        }
    }
}

async fn blocking<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, McpError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(McpError::internal_error(e.to_string(), None)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

fn error_object(code: i32, message: &str) -> JsonObject {
    [("code".to_owned(), json!(code)), ("message".to_owned(), json!(message))]
        .into_iter()
        .collect()
}

fn text(t: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

/// An `elicitation/create` request for one `field` of `kind`.
fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]},
        },
    })
}

/// The string argument `name` (empty if absent), at most [`MAX_ARGUMENT_BYTES`].
fn string(args: &JsonObject, name: &'static str) -> Result<String, McpError> {
    match args.get(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => bounded(name, s).map(str::to_owned),
        Some(_) => Err(McpError::invalid_params(format!("{name}: a string"), None)),
    }
}

fn bounded<'a>(name: &str, s: &'a str) -> Result<&'a str, McpError> {
    if s.len() > MAX_ARGUMENT_BYTES {
        let reason: Cow<'static, str> = format!("{name}: at most {MAX_ARGUMENT_BYTES} bytes").into();
        return Err(McpError::invalid_params(reason, None));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::ConversationTools;

    fn names<S: FixtureHost>(router: &ToolRouter<S>) -> Vec<String> {
        router.list_all().into_iter().map(|t| t.name.into_owned()).collect()
    }

    #[test]
    fn the_fixtures_are_the_suites_seven_tools() {
        let mut got = names(&fixtures::<ConversationTools>());
        got.sort();
        let want = [
            "confirm_delete",
            "failing_job",
            "greet",
            "multi_input",
            "protocol_error_job",
            "slow_compute",
            "test_tool_with_task",
        ];
        assert_eq!(got, want);
    }

    /// The production build's surfaces route none of them (a `conformance` build does).
    #[cfg(not(feature = "conformance"))]
    #[test]
    fn a_production_build_serves_no_fixture() {
        let store = ahp_store::Store::open_in_memory().unwrap();
        let conversations = names(&ConversationTools::fixture_router());
        let dir = tempfile::tempdir().unwrap();
        let transfers =
            crate::mcp::TransferTools::new(crate::host::HostBuilder::new(store, dir.path()).build().unwrap())
                .tool_names();
        assert!(conversations.is_empty(), "{conversations:?}");
        for fixture in names(&fixtures::<ConversationTools>()) {
            assert!(!transfers.contains(&fixture), "/mcp routes {fixture}");
        }
    }
}
