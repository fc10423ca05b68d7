//! The conversation tools — agents, endpoints, conversations, messages, inboxes and
//! wakes — as a second MCP server beside the transfer one.
//!
//! Served over HTTP at `/mcp/conversations` (same bearer keys, Host/Origin checks and protocol
//! eras as `/mcp`; read tools need `communication:read`, the rest `communication:manage`, see
//! [`required_scope`]) and over stdio by `ahp serve --stdio --surface conversations`.
//!
//! **Who is calling** ([`identity`](super::identity)). Over HTTP the caller's communication
//! principal is a stable hash of its API key's principal (`prn_…`) in its own namespace
//! (`api-key:`), with the key's communication scopes ([`api_key_caller`]); a transfer token
//! never becomes one, and no result shows a digest. Over stdio (and over HTTP with
//! `--auth none`, loopback only) the caller is the local operator: the principal of the subject
//! [`OPERATOR_SUBJECT`](super::identity::OPERATOR_SUBJECT), with both scopes ([`operator_caller`]). Its agents and conversations
//! are its own, invisible to API keys, and the reverse.
//!
//! **Refusals** are tool errors whose structured content is a [`ToolErrorContent`] with a stable
//! `kind`. A not-found message never echoes the id, so a well-formed foreign id and a
//! nonexistent one give byte-identical responses. **Leases**: every agent-acting call renews
//! the acting endpoint's lease ([`crate::ops`]), so renewal is never a chore for the model.
//! The agent-acting tools adapt the [conversation operations](crate::ops::Conversations).

use crate::shared_store::{SharedStore, StoreLock};
use std::sync::Arc;
use std::time::Duration;

use ahp_store::Store;
use ahp_store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, Extensions, GetTaskParams, GetTaskResult, Implementation, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{Json, ServerHandler, tool, tool_handler, tool_router};

use super::arguments::{acting, actor, page};
use super::changed::Changed;
use super::conversation_schema::*;
use super::identity::{Asker, api_key_caller, operator_caller, principal_of};
use super::tasks;
pub use super::tool_error::ToolError;
use crate::carrier::Carriers;
use crate::ops::Page;

/// Default endpoint lease when `attach_agent_endpoint` names none.
const DEFAULT_LEASE: Duration = Duration::from_secs(300);

pub use super::scopes::{READ_TOOLS, required_scope};

/// The conversation MCP server over the shared store.
#[derive(Clone)]
pub struct ConversationTools {
    store: SharedStore,
    /// Whether a call without an authenticated principal is the local operator (stdio, or HTTP
    /// with `--auth none`); otherwise it is refused.
    operator_fallback: bool,
    /// The wake carriers this process holds: the readiness flag, and whom a post schedules.
    carriers: Arc<dyn Carriers>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for ConversationTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationTools").finish_non_exhaustive()
    }
}

impl ConversationTools {
    /// Tools over `store`. With `operator_fallback`, a call that carries no authenticated
    /// principal acts as the local operator; without it, such a call is refused.
    pub fn new(store: SharedStore, operator_fallback: bool) -> Self {
        Self {
            store,
            operator_fallback,
            carriers: Arc::new(crate::app_views::ViewCarriers::default()),
            tool_router: Self::tool_router() + Self::delegation_router() + Self::app_router() + Self::fixture_router(),
        }
    }

    /// The conformance suite's fixture tools, in a `conformance` build only.
    pub(super) fn fixture_router() -> ToolRouter<Self> {
        #[cfg(feature = "conformance")]
        return super::conformance::fixtures();
        #[cfg(not(feature = "conformance"))]
        ToolRouter::new()
    }

    /// These tools, in a process holding `carriers` (`ahp serve`'s controller).
    #[must_use]
    pub fn with_carriers(mut self, carriers: Arc<dyn Carriers>) -> Self {
        self.carriers = carriers;
        self
    }

    /// The caller of a request: its API key's principal over HTTP, else the local operator.
    fn caller(&self, ext: &Extensions) -> Result<Caller, ToolError> {
        match principal_of(ext) {
            Some(p) => Ok(api_key_caller(p)),
            None if self.operator_fallback => Ok(operator_caller()),
            None => Err(ToolError::new("insufficient_scope", "no authenticated principal")),
        }
    }

    /// The wake carriers this process holds (whom a call that woke agents schedules).
    pub(super) fn carriers(&self) -> Arc<dyn Carriers> {
        self.carriers.clone()
    }

    /// The MCP App Views bound through this process, if it binds any.
    pub(super) fn app_views(&self) -> Option<&crate::app_views::AppViews> {
        self.carriers.app_views()
    }

    /// Whether a live carrier holds `endpoint` (this process's, or a live host's).
    fn carrier_held(&self, endpoint: &ahp_store::conversation::Endpoint) -> bool {
        self.carriers.holds(endpoint)
    }

    /// Runs `f` with the caller on the [operations](crate::ops::Ops) over the store, on a
    /// blocking thread, as [`run`](Self::run) does.
    pub(super) async fn ops<T: Send + 'static>(
        &self,
        ext: &Extensions,
        f: impl FnOnce(&mut crate::ops::Ops<'_>, &Caller) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let carriers = self.carriers();
        self.run(ext, move |s, c| f(&mut crate::ops::Ops::new(s, carriers.as_ref()), c))
            .await
    }

    /// Runs `f` with the caller on the store, on a blocking thread (every write is an fsynced
    /// commit; reads are short and share the one connection).
    pub(super) async fn run<T: Send + 'static>(
        &self,
        ext: &Extensions,
        f: impl FnOnce(&mut Store, &Caller) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let caller = self.caller(ext)?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&mut store.locked(), &caller))
            .await
            .map_err(|e| ToolError::new("internal", format!("internal error: {e}")))?
    }
}

/// How long a synchronous `ask_agent` waits for the reply.
pub const ASK_WAIT: Duration = Duration::from_secs(60);
/// How often it looks at least (one indexed read of the task's row on a blocking thread): a
/// reply made on another host is seen within this of its commit; one made in this process at
/// its commit (every agent post here wakes the waiters, `ops::posting::AGENT_POSTED`).
const ASK_POLL: Duration = Duration::from_millis(100);

/// A structured result as a complete tool answer.
pub(super) fn complete<T: serde::Serialize + schemars::JsonSchema + 'static>(value: T) -> CallToolResponse {
    CallToolResponse::Complete(tasks::structured(value))
}

#[tool_router]
impl ConversationTools {
    /// Create an agent identity (`agt_…`) owned by the caller, with its Agent Card. The card is
    /// self-description only: it grants nothing.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn create_agent_identity(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CreateAgentArgs>,
    ) -> Result<Json<Changed<AgentResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let m = s.create_agent(c, &a.card.into(), &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// The caller's agents, paged, each with its card, live endpoint count, queued deliveries and
    /// whether this server can resume it by itself (`productionAutoResumeAvailable`).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_agent_identities(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PageArgs>,
    ) -> Result<Json<AgentListResult>, ToolError> {
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let limit = page(a.limit);
            let listings = s.list_agent_listings(c, a.after.as_deref(), limit)?;
            let agents: Vec<AgentListingView> = listings
                .iter()
                .map(|l| {
                    let endpoint = l.current_endpoint.as_ref();
                    let held = endpoint.is_some_and(|e| this.carrier_held(e));
                    AgentListingView::new(l, held, endpoint.and_then(|e| this.carriers.residency(e)))
                })
                .collect();
            let agents = Page::of(agents, limit, |a| a.agent_id.clone());
            Ok(Json(AgentListResult {
                agents: agents.items,
                next_after: agents.next_after,
            }))
        })
        .await
    }

    /// Replace an agent's card; `expectedProfileRevision` must be the current one (`conflict`
    /// otherwise). An identical card changes nothing.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn update_agent_identity(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<UpdateAgentArgs>,
    ) -> Result<Json<Changed<AgentResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let m = s.update_agent(c, &a.agent_id, a.expected_profile_revision, &a.card.into())?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Attach an endpoint to an agent the caller owns: it gets the agent's next
    /// `controllerGeneration` and replaces the previous endpoint. Agent-acting calls name the
    /// returned `endpointId` and `controllerGeneration`, and each renews the lease.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn attach_agent_endpoint(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<AttachArgs>,
    ) -> Result<Json<Changed<EndpointResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let lease = a.lease_seconds.map_or(DEFAULT_LEASE, Duration::from_secs);
            let m = s.attach_endpoint(c, &a.agent_id, lease, &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Detach exactly this endpoint (never its successor). Desired-state idempotent: an endpoint
    /// already detached, replaced or expired is returned unchanged.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn detach_agent_endpoint(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<DetachArgs>,
    ) -> Result<Json<Changed<EndpointResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let m = s.detach_endpoint(c, &a.agent_id, &a.endpoint_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// The bounded bootstrap of an agent turn: card, endpoint, an optional conversation summary,
    /// queued inbox count and high-water mark, one wake's metadata and the reply bound — never a
    /// transcript or message body. With `activationIdempotencyKey` and a pending `wakeId`, a
    /// turn that is already running accepts that wake and gets its consume token.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn bootstrap_agent_conversation(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<BootstrapArgs>,
    ) -> Result<Json<BootstrapResult>, ToolError> {
        let this = self.clone();
        self.ops(&ext, move |ops, c| {
            if a.activation_idempotency_key.is_some() && a.wake_id.is_none() {
                return Err(ToolError::invalid(
                    "invalid wakeId: activationIdempotencyKey needs the wakeId of the pending wake to activate",
                ));
            }
            let (activated, b) = ops.conversations().bootstrap(
                c,
                &actor(&a.acting),
                a.conversation_id.as_deref(),
                a.wake_id.as_deref(),
                a.activation_idempotency_key.as_deref(),
            )?;
            let activation = activated.map(|m| ActivationView {
                wake_id: m.value.wake.id.clone(),
                consume_token: m.value.consume_token.clone(),
                replayed: m.replayed,
                state_changed: m.state_changed,
            });
            Ok(Json(BootstrapResult {
                agent_id: b.agent.id.clone(),
                endpoint_id: b.endpoint.id.clone(),
                controller_generation: b.endpoint.generation,
                production_auto_resume_available: b.endpoint.wake_capable && this.carrier_held(&b.endpoint),
                agent: (&b.agent).into(),
                endpoint: (&b.endpoint).into(),
                conversation: b.conversation.as_ref().map(Into::into),
                queued_count: b.queued_count,
                queued_high_water_order: b.queued_high_water_order,
                wake: b.wake.as_ref().map(Into::into),
                activation,
                max_reply_operations: b.max_reply_operations,
            }))
        })
        .await
    }

    /// Create a conversation: the caller is its human participant; `agentIds` (each owned by the
    /// caller) are its agent participants.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn create_conversation(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CreateConversationArgs>,
    ) -> Result<Json<Changed<ConversationResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let new = NewConversation {
                title: a.title,
                agents: a.agent_ids,
            };
            let m = s.create_conversation(c, &new, &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Conversations whose human participant is the caller, paged by id.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_conversations(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PageArgs>,
    ) -> Result<Json<ConversationListResult>, ToolError> {
        self.run(&ext, move |s, c| {
            let limit = page(a.limit);
            let list = Page::of(s.list_conversations(c, a.after.as_deref(), limit)?, limit, |c| {
                c.id.clone()
            });
            Ok(Json(ConversationListResult {
                conversations: list.items.iter().map(Into::into).collect(),
                next_after: list.next_after,
            }))
        })
        .await
    }

    /// A conversation's participants and its transcript after the exclusive `afterSeq`, as the
    /// human participant or (with `agentId`, `endpointId`, `controllerGeneration`) as an agent
    /// participant. Reading consumes nothing.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn read_conversation(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ReadConversationArgs>,
    ) -> Result<Json<ReadConversationResult>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let who = acting(a.agent_id, a.endpoint_id, a.controller_generation)?;
            let (conversation, messages) =
                ops.conversations()
                    .read(c, &who, &a.conversation_id, a.after_seq, page(a.limit))?;
            Ok(Json(ReadConversationResult {
                conversation_id: conversation.id.clone(),
                conversation: (&conversation).into(),
                messages: messages.items.iter().map(Into::into).collect(),
                next_after_seq: messages.next_after,
            }))
        })
        .await
    }

    /// Ask the conversation's agents a question, as the human participant, and answer with an
    /// agent's reply: the first agent message after it that replies to it or to nothing. A
    /// client that declares the tasks extension (2026-07-28) gets a task at once, which that
    /// reply's commit completes; any other waits up to 60 s for the reply (`reply` absent if it
    /// has not come; the task still ends with it). Retry with the same `idempotencyKey` to ask
    /// nothing new.
    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::common::schema_for_output::<AskAgentResult>()
    )]
    async fn ask_agent(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<AskAgentArgs>,
    ) -> Result<CallToolResponse, ToolError> {
        let as_task = tasks::answers_with_task(&ctx);
        let (question, task) = self
            .ops(&ctx.extensions, move |ops, c| {
                let new = NewMessage {
                    conversation: a.conversation_id,
                    acting: Acting::Human,
                    body: a.body,
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(a.idempotency_key),
                };
                let (posted, task) = ops.conversations().ask(c, &new)?;
                Ok((posted.value, task))
            })
            .await?;
        if as_task {
            return Ok(tasks::created(&task));
        }
        let deadline = tokio::time::Instant::now() + ASK_WAIT;
        loop {
            // Armed before the read, so a reply committed here between the read and the wait
            // still wakes it.
            let posted = crate::ops::posting::AGENT_POSTED.notified();
            tokio::pin!(posted);
            posted.as_mut().enable();
            let id = task.id.clone();
            let now = self
                .run(&ctx.extensions, move |s, c| Ok(s.mcp_task(c.principal(), &id)?))
                .await?;
            if let Some(ended) = now.filter(|t| t.status.is_terminal())
                && let Some(reply) = ended.answer
            {
                let (conversation, reply_id) = (question.conversation_id.clone(), reply);
                let r = self
                    .ops(&ctx.extensions, move |ops, c| {
                        Ok(ops.conversations().message(c, &conversation, &reply_id)?)
                    })
                    .await?;
                return Ok(complete(AskAgentResult::answered(&question, &r, &task.id)));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(complete(AskAgentResult::waiting(&question, &task.id)));
            }
            // An agent post here, or the next look (for a reply made on another host).
            let _ = tokio::time::timeout(ASK_POLL, posted).await;
        }
    }

    /// Post a message as the human participant or, with `agentId`, `endpointId` and
    /// `controllerGeneration`, as an agent through its exact endpoint. Identity: `idempotencyKey`,
    /// or `wakeId` + `operationIndex` for a reply from a woken turn. Every other agent
    /// participant gets a delivery and a (coalesced) wake.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn post_message(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PostMessageArgs>,
    ) -> Result<Json<Changed<PostMessageResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let who = acting(a.agent_id, a.endpoint_id, a.controller_generation)?;
            let idempotency = match (a.idempotency_key, a.wake_id, a.operation_index) {
                (Some(k), None, None) => IdempotencyKey::Key(k),
                (None, Some(wake), Some(index)) => IdempotencyKey::WakeReply { wake, index },
                _ => {
                    return Err(ToolError::invalid(
                        "invalid idempotencyKey: give either idempotencyKey, or wakeId with operationIndex",
                    ));
                }
            };
            let new = NewMessage {
                conversation: a.conversation_id,
                acting: who,
                body: a.body,
                reply_to: a.reply_to,
                idempotency,
            };
            let m = ops.conversations().post(c, &new)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// An agent's inbox after the exclusive `afterDeliveryOrder`, through its exact endpoint:
    /// queued deliveries only (default) or all. Reading consumes nothing.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_agent_inbox(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<InboxArgs>,
    ) -> Result<Json<InboxResult>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let actor = actor(&a.acting);
            let queued_only = a.queued_only.unwrap_or(true);
            let list = ops
                .conversations()
                .inbox(c, &actor, a.after_delivery_order, page(a.limit), queued_only)?;
            Ok(Json(InboxResult {
                agent_id: actor.agent,
                deliveries: list.items.iter().map(Into::into).collect(),
                next_after_delivery_order: list.next_after,
            }))
        })
        .await
    }

    /// Mark the agent's delivery of `messageId` consumed. Desired-state idempotent; never
    /// consumes a wake.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn consume_agent_delivery(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ConsumeDeliveryArgs>,
    ) -> Result<Json<Changed<DeliveryResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let actor = actor(&a.acting);
            let m = ops.conversations().consume_delivery(c, &actor, &a.message_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Consume one exact wake after its dispatch fence: wake, agent, endpoint, generation and
    /// consume token must all match. An exact retry after success changes nothing. Never
    /// consumes a delivery.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn consume_agent_wake(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ConsumeWakeArgs>,
    ) -> Result<Json<Changed<WakeResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let actor = actor(&a.acting);
            let m = ops
                .conversations()
                .consume_wake(c, &actor, &a.wake_id, &a.consume_token)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Close a conversation whose human participant is the caller: no posts after it; reads
    /// still work. Desired-state idempotent.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn close_conversation(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CloseConversationArgs>,
    ) -> Result<Json<Changed<ConversationResult>>, ToolError> {
        self.run(&ext, move |s, c| {
            let m = s.close_conversation(c, &a.conversation_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }
}

impl super::conformance::FixtureHost for ConversationTools {
    fn fixture_store(&self) -> SharedStore {
        self.store.clone()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ConversationTools {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .enable_resources()
            .build();
        // The MCP Apps extension: the cards (`app_card`) are its UI resources.
        capabilities
            .extensions
            .get_or_insert_default()
            .insert(super::app_card::UI_EXTENSION_ID.into(), super::app_card::ui_extension());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("ahp-conversations", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Durable conversations between people and agents: create_agent_identity → attach_agent_endpoint → \
                 create_conversation → post_message; an agent reads list_agent_inbox and read_conversation through \
                 its exact endpointId and controllerGeneration, replies with post_message, consumes deliveries and \
                 wakes exactly. To delegate: create_agent_task for another agent of the same owner, \
                 register_agent_wait over those tasks (all or any) and end the turn; the assignee finishes with \
                 complete_agent_task_attempt and the wait wakes you once. Goals (create_goal, checkpoint_goal) \
                 hold a plan across turns. In an MCP Apps host, present_agent_continuation lets this chat carry an \
                 agent (a message or task for it runs one turn here) and present_goal_plan shows a goal's plan. \
                 Every mutation that creates something takes an idempotencyKey.",
            )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(super::app_card::listed()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let card = super::app_card::card(&request.uri).ok_or_else(|| {
            McpError::resource_not_found("no such resource", Some(serde_json::json!({ "uri": request.uri })))
        })?;
        Ok(ReadResourceResult::new(vec![super::app_card::contents(card)]).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let asker = Asker::of(&ctx.extensions);
        tasks::get(
            self.store.clone(),
            tasks::Surface::Conversations,
            asker,
            request.task_id,
        )
        .await
    }

    async fn cancel_task(&self, request: CancelTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), McpError> {
        let asker = Asker::of(&ctx.extensions);
        let surface = tasks::Surface::Conversations;
        tasks::cancel(self.store.clone(), self.carriers(), surface, asker, request.task_id).await
    }

    async fn update_task(&self, request: UpdateTaskParams, ctx: RequestContext<RoleServer>) -> Result<(), McpError> {
        let asker = Asker::of(&ctx.extensions);
        tasks::update(
            self.store.clone(),
            tasks::Surface::Conversations,
            asker,
            request.task_id,
            request.input_responses,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_tools_need_read_and_the_rest_manage() {
        let tools = ConversationTools::new(crate::shared_store::share(Store::open_in_memory().unwrap()), true);
        let names: Vec<String> = tools
            .tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(names.len(), 38, "{names:?}");
        let schemaless: Vec<_> = tools
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| t.output_schema.is_none())
            .map(|t| t.name)
            .collect();
        assert!(schemaless.is_empty(), "no outputSchema: {schemaless:?}");
        for r in READ_TOOLS.into_iter().chain(super::super::delegation_tools::READ_TOOLS) {
            use ahp_store::ApiScope;
            assert!(names.iter().any(|n| n == r), "{r} is not a tool");
            assert_eq!(required_scope(r), ApiScope::CommunicationRead);
        }
        let manage = ahp_store::ApiScope::CommunicationManage;
        assert_eq!(required_scope("post_message"), manage);
        assert_eq!(required_scope("create_agent_task"), manage);
        assert_eq!(required_scope("complete_agent_task_attempt"), manage);
        assert_eq!(required_scope("no_such_tool"), manage);
    }
}
