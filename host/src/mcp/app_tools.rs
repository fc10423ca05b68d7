//! The MCP App carrier's tools on `/mcp/conversations` (the conversation seed's G3 and G4):
//! the model-visible `present_agent_continuation` and `present_goal_plan`, each presenting a
//! card ([`super::app_card`]), and the app-only tools the cards call through their
//! chat host (`_meta.ui.visibility: ["app"]`: hidden from the model): bind, recover (after a
//! restart), state, acquire, prepare, finish, unbind, recover_endpoint (after an expiry), and
//! the Goal Plan card's observe.
//!
//! Each call is authorized like every other tool of the surface (the caller's principal and
//! scope, the agent acting through its exact endpoint and generation) — nothing is remembered
//! between calls but the store's rows and this process's registry of bound Views
//! ([`crate::app_views`]). The View's **window** is the chat host's MCP session
//! (`Mcp-Session-Id`), read from the transport, never from the View's arguments: a refreshed
//! card in the same session is the same window; on the stateless protocol era there is none,
//! and only the exact View recovers.
//!
//! The consume token leaves the server in one place only: `agent_continuation_prepare`'s
//! automatic message, which the card sends as its one `ui/message`.

use std::sync::Arc;
use std::time::Duration;

use ahp_store::conversation::{
    AppAcquire, AppBindOutcome, AppBindingHolder, AppView, DispatchOutcome, DispatchTicket, Endpoint, EndpointRecovery,
    EndpointState,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use serde_json::json;

use super::app_card::{self, CONTINUATION_URI, GOAL_PLAN_URI};
use super::arguments::actor;
use super::conversation_schema::*;
use super::conversation_tools::ConversationTools;
use super::delegation_schema::GoalView;
use super::tool_error::ToolError;
use crate::app_views::AppViews;

/// The claim a View's acquire takes when it names none.
const DEFAULT_CLAIM: Duration = Duration::from_secs(60);
/// The longest an acquire waits for a wake (`waitSeconds`): well inside the listener's request
/// timeout and a chat host's tool-call timeout.
pub const MAX_ACQUIRE_WAIT: Duration = Duration::from_secs(25);
/// How often a waiting acquire looks at the store even unwoken: a wake this process was not
/// told of (one committed on another host without a signal, a stalled goal's) is seen within
/// this.
const ACQUIRE_LOOK: Duration = Duration::from_secs(2);
/// The longest automatic continuation message.
pub const MAX_AUTOMATIC_MESSAGE_BYTES: usize = 4096;

/// The chat host's window a request comes from: its MCP session, when the transport has one.
fn window(ext: &Extensions) -> Option<String> {
    let parts = ext.get::<http::request::Parts>()?;
    let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
    (!id.is_empty() && id.len() <= ahp_store::conversation::MAX_WINDOW_KEY_BYTES).then(|| id.to_owned())
}

/// The View a call names, in the window it comes from.
fn view_of<'a>(a: &'a ViewArgs, window: &'a Option<String>) -> AppView<'a> {
    AppView {
        binding: &a.binding_id,
        window: window.as_deref(),
    }
}

/// The automatic continuation message of `ticket` for the card's agent.
fn automatic_message(a: &ActingArgs, ticket: &DispatchTicket) -> AutomaticMessage {
    let line = json!({
        "version": 1,
        "agentId": a.agent_id,
        "endpointId": a.endpoint_id,
        "controllerGeneration": a.controller_generation,
        "wakeId": ticket.wake.id,
        "attemptId": ticket.attempt.id,
        "consumeToken": ticket.consume_token,
    });
    let text = format!(
        "[ahp] Automatic continuation: agent {agent} has new work. Run one turn as this agent now, \
         acting with agentId {agent}, endpointId {endpoint}, controllerGeneration {generation}:\n\
         1. bootstrap_agent_conversation with wakeId {wake};\n\
         2. consume_agent_wake with wakeId {wake} and consumeToken {token} (exactly once: it proves \
         this turn ran);\n\
         3. list_agent_inbox (queuedOnly) and answer each message with post_message as the agent, then \
         consume_agent_delivery what you answered; for a task, get_agent_task and \
         complete_agent_task_attempt; for an attention event, get_goal and decide from its current state.\n\
         ahp-continuation: {line}",
        agent = a.agent_id,
        endpoint = a.endpoint_id,
        generation = a.controller_generation,
        wake = ticket.wake.id,
        token = ticket.consume_token,
    );
    AutomaticMessage {
        version: 1,
        agent_id: a.agent_id.clone(),
        endpoint_id: a.endpoint_id.clone(),
        controller_generation: a.controller_generation,
        wake_id: ticket.wake.id.clone(),
        attempt_id: ticket.attempt.id.clone(),
        consume_token: ticket.consume_token.clone(),
        text,
    }
}

impl ConversationTools {
    /// This process's registry of bound Views.
    fn views(&self) -> Result<&AppViews, ToolError> {
        self.app_views().ok_or_else(|| {
            ToolError::new(
                "no_app_carrier",
                "this server process binds no MCP App View (ahp serve does)",
            )
        })
    }
}

#[tool_router(router = app_router, vis = "pub(super)")]
impl ConversationTools {
    /// Show the agent-continuation card for the caller's agent through its exact current
    /// endpoint and generation (named, never inferred): while the card is shown, it carries the
    /// agent's wakes — a message or task for it makes the card ask this chat to run one turn as
    /// the agent. Setup: create_agent_identity → attach_agent_endpoint → this, then end the
    /// turn; list_agent_identities says when the agent can be resumed by itself
    /// (`productionAutoResumeAvailable`).
    #[tool(
        meta = app_card::presents(CONTINUATION_URI),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn present_agent_continuation(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PresentContinuationArgs>,
    ) -> Result<Json<PresentContinuationResult>, ToolError> {
        self.run(&ext, move |s, c| {
            let agent = s.get_agent(c, &a.agent_id)?;
            let ep = s.get_endpoint(c, &a.agent_id, &a.endpoint_id)?;
            if ep.host_held {
                return Err(ToolError::new(
                    "host_held",
                    "the endpoint is the host's (a transferred agent's sandbox carries it)",
                ));
            }
            if ep.state != EndpointState::Attached || ep.generation != a.expected_controller_generation {
                return Err(ToolError::new(
                    "stale_endpoint",
                    format!(
                        "endpoint {} is {} at controller generation {}, not attached at {}",
                        ep.id, ep.state, ep.generation, a.expected_controller_generation
                    ),
                ));
            }
            Ok(Json(PresentContinuationResult {
                agent_id: agent.id,
                endpoint_id: ep.id,
                controller_generation: ep.generation,
                handle: agent.card.handle,
                display_name: agent.card.display_name,
                resource_uri: CONTINUATION_URI.into(),
            }))
        })
        .await
    }

    /// The card binds the agent's endpoint to its View through this server (app-only).
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn agent_continuation_bind(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ViewArgs>,
    ) -> Result<Json<BindResult>, ToolError> {
        let window = window(&ext);
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let view = view_of(&a, &window);
            this.bind_view(s, c, &a, &view)
        })
        .await
    }

    /// The card takes its binding up again after the server restarted (app-only): only a View
    /// the store still names — the exact one, or a refreshed one of its window — and only when
    /// this process holds no binding for the endpoint; anything else is `app_not_bound`.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn agent_continuation_recover(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ViewArgs>,
    ) -> Result<Json<BindResult>, ToolError> {
        let window = window(&ext);
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let view = view_of(&a, &window);
            let views = this.views()?;
            let acting = actor(&a.acting);
            let st = s.app_carrier_state(c, &acting, &view)?;
            let known =
                st.holder == AppBindingHolder::ThisView || (st.same_window && st.holder != AppBindingHolder::NoView);
            if !known || views.holds(&st.endpoint) {
                return Err(ToolError::new(
                    "app_not_bound",
                    "nothing to recover: this View is not the one the store names, or this server holds the binding",
                ));
            }
            this.bind_view(s, c, &a, &view)
        })
        .await
    }

    /// The card's heartbeat (app-only): who holds the binding, whether this process holds it
    /// (else `recovery`), the View's unresolved attempt, whether a wake waits.
    #[tool(meta = app_card::app_only(), annotations(read_only_hint = true, open_world_hint = false))]
    async fn agent_continuation_state(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ViewArgs>,
    ) -> Result<Json<StateResult>, ToolError> {
        let window = window(&ext);
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let view = view_of(&a, &window);
            let views = this.views()?;
            let st = s.app_carrier_state(c, &actor(&a.acting), &view)?;
            let held_here = views.holds(&st.endpoint);
            let bound = st.holder == AppBindingHolder::ThisView
                && st.endpoint.wake_capable
                && views.holds_view(&st.endpoint, &a.binding_id);
            let known =
                st.holder == AppBindingHolder::ThisView || (st.same_window && st.holder != AppBindingHolder::NoView);
            let recovery = (!bound && known && !held_here).then(|| BindingRecovery {
                kind: "host_binding_missing_in_process".into(),
            });
            Ok(Json(StateResult {
                host_binding: HostBinding { bound },
                holder: holder_name(st.holder).into(),
                same_window: st.same_window,
                recovery,
                attempt: st.attempt.as_ref().map(Into::into),
                wake_pending: st.wake_pending,
                production_auto_resume_available: st.endpoint.wake_capable && this.carriers().holds(&st.endpoint),
                endpoint: (&st.endpoint).into(),
            }))
        })
        .await
    }

    /// The card acquires the agent's next wake (app-only): its own unresolved attempt, or the
    /// pending wake claimed for it — waiting up to `waitSeconds` for one when none is pending.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn agent_continuation_acquire(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<AcquireArgs>,
    ) -> Result<Json<AcquireResult>, ToolError> {
        let wait = Duration::from_secs(a.wait_seconds.unwrap_or(0));
        if wait > MAX_ACQUIRE_WAIT {
            return Err(ToolError::invalid(format!(
                "waitSeconds must be at most {}",
                MAX_ACQUIRE_WAIT.as_secs()
            )));
        }
        let start = tokio::time::Instant::now();
        let (a, window) = (Arc::new(a), Arc::new(window(&ext)));
        // One look: the acquire, the endpoint, and how much of its lease is left.
        let look = || {
            let (a, window, this) = (a.clone(), window.clone(), self.clone());
            self.run(&ext, move |s, c| {
                let view = view_of(&a.view, &window);
                let acting = actor(&a.view.acting);
                let ep = this.require_bound_here(s, c, &acting, &a.view.binding_id)?;
                let lease = a.claim_seconds.map_or(DEFAULT_CLAIM, Duration::from_secs);
                let got: AppAcquire = s.acquire_app_wake(c, &acting, &view, lease)?;
                let left = ep.lease_expires_at.as_micros().saturating_sub(s.now().as_micros());
                Ok((got, ep, Duration::from_micros(u64::try_from(left).unwrap_or(0))))
            })
        };
        // The first look authorizes the View (only a bound one waits) and settles most calls.
        let (got, ep, lease_left) = look().await?;
        if wait.is_zero() || !matches!(got, AppAcquire::Idle) {
            return Ok(Json((&got).into()));
        }
        // A place in the line of waiting acquires; without one (the line is full) the answer is
        // the first look's. Never past half the lease left: the card's next state call, right
        // after this answer, renews it in time.
        let Some(waiting) = self.views()?.wait_for_wake(&ep.agent_id) else {
            return Ok(Json((&got).into()));
        };
        let deadline = start + wait.min(lease_left / 2);
        loop {
            // Armed before the look, so a wake scheduled between the look and the wait still
            // ends the wait.
            let woken = waiting.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let (got, _, _) = look().await?;
            let now = tokio::time::Instant::now();
            if !matches!(got, AppAcquire::Idle) || now >= deadline {
                return Ok(Json((&got).into()));
            }
            let _ = tokio::time::timeout(ACQUIRE_LOOK.min(deadline - now), woken).await;
        }
    }

    /// The card crosses the dispatch fence for its claimed attempt (app-only), immediately
    /// before it asks the host to run the turn: the answer's `output.app_protocol.automatic_message`
    /// is the one message to send. Never twice for one attempt.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn agent_continuation_prepare(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<PrepareArgs>,
    ) -> Result<Json<PrepareResult>, ToolError> {
        let window = window(&ext);
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let view = view_of(&a.view, &window);
            let acting = actor(&a.view.acting);
            this.require_bound_here(s, c, &acting, &a.view.binding_id)?;
            let ticket = s.prepare_app_dispatch(c, &acting, &view, &a.attempt_id)?;
            let message = automatic_message(&a.view.acting, &ticket);
            debug_assert!(message.text.len() <= MAX_AUTOMATIC_MESSAGE_BYTES);
            Ok(Json(PrepareResult {
                output: PrepareOutput {
                    app_protocol: AppProtocol {
                        automatic_message: message,
                    },
                },
            }))
        })
        .await
    }

    /// The card records what the host said to its `ui/message` (app-only): `dispatch_accepted`,
    /// or `delivery_unknown` for anything else. Accepted is not a turn: the turn's exact
    /// consume_agent_wake is.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn agent_continuation_finish(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<FinishArgs>,
    ) -> Result<Json<FinishResult>, ToolError> {
        let window = window(&ext);
        self.run(&ext, move |s, c| {
            let view = view_of(&a.view, &window);
            let outcome = match a.outcome {
                FinishOutcome::DispatchAccepted => DispatchOutcome::Accepted,
                FinishOutcome::DeliveryUnknown => DispatchOutcome::Unknown,
            };
            let m = s.finish_app_dispatch(c, &actor(&a.view.acting), &view, &a.attempt_id, outcome)?;
            Ok(Json(FinishResult {
                attempt: (&m.value).into(),
                state_changed: m.state_changed,
            }))
        })
        .await
    }

    /// The card lets its binding go (app-only): exact View only; its window may bind again.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn agent_continuation_unbind(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ViewArgs>,
    ) -> Result<Json<UnbindResult>, ToolError> {
        let window = window(&ext);
        let this = self.clone();
        self.run(&ext, move |s, c| {
            let view = view_of(&a, &window);
            let m = s.unbind_app_view(c, &actor(&a.acting), &view)?;
            if let Ok(views) = this.views() {
                views.unbind(&m.value.id, &a.binding_id);
            }
            Ok(Json(UnbindResult {
                state_changed: m.state_changed,
                endpoint: (&m.value).into(),
            }))
        })
        .await
    }

    /// The server decides about the card's stale endpoint (app-only): live (nothing to do), or
    /// expired and replaced — in one transaction — by its successor one generation on, for the
    /// same window, which the card then binds. Refused for another window, a detached or
    /// replaced endpoint, or a selector a later endpoint made stale.
    #[tool(
        meta = app_card::app_only(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn agent_continuation_recover_endpoint(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ViewArgs>,
    ) -> Result<Json<RecoverEndpointResult>, ToolError> {
        let window = window(&ext);
        self.run(&ext, move |s, c| {
            let view = view_of(&a, &window);
            let r = s.replace_expired_app_endpoint(
                c,
                &a.acting.agent_id,
                &a.acting.endpoint_id,
                a.acting.controller_generation,
                &view,
            )?;
            let old = EndpointSelector {
                agent_id: a.acting.agent_id.clone(),
                endpoint_id: a.acting.endpoint_id.clone(),
                controller_generation: a.acting.controller_generation,
            };
            let endpoint_recovery = match r {
                EndpointRecovery::Live { .. } => EndpointRecoveryView {
                    kind: "live".into(),
                    old,
                    successor: None,
                    replayed: false,
                },
                EndpointRecovery::Replaced {
                    successor, replayed, ..
                } => EndpointRecoveryView {
                    kind: "replaced".into(),
                    old,
                    successor: Some((&successor).into()),
                    replayed,
                },
            };
            Ok(Json(RecoverEndpointResult { endpoint_recovery }))
        })
        .await
    }

    /// Show the Goal Plan card for one of the caller's goals: its plan, steps, revision and last
    /// checkpoint, kept current while shown. A goal whose controller an MCP App carries and that
    /// sees no meaningful work for five minutes while shown wakes its controller once.
    #[tool(
        meta = app_card::presents(GOAL_PLAN_URI),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn present_goal_plan(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<GoalPlanArgs>,
    ) -> Result<Json<PresentGoalPlanResult>, ToolError> {
        self.run(&ext, move |s, c| {
            let g = s.get_goal(c, &ahp_store::conversation::Acting::Human, &a.goal_id)?;
            Ok(Json(PresentGoalPlanResult {
                goal_id: g.id,
                title: g.title,
                resource_uri: GOAL_PLAN_URI.into(),
            }))
        })
        .await
    }

    /// The Goal Plan card's observation (app-only): the goal as it is. Not meaningful work.
    #[tool(meta = app_card::app_only(), annotations(read_only_hint = true, open_world_hint = false))]
    async fn goal_plan_observe(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<GoalPlanArgs>,
    ) -> Result<Json<GoalPlanResult>, ToolError> {
        let quiet = self.views()?.quiet_period();
        self.ops(&ext, move |ops, c| {
            let o = ops.delegation().observe_goal_plan(c, &a.goal_id, quiet)?;
            Ok(Json(GoalPlanResult {
                goal: GoalView::from(&o.goal),
                last_meaningful_work_at: o.last_meaningful_work_at.to_string(),
                observed_since: o.observed_since.to_string(),
                stalled: o.stalled.as_ref().map(|e| StalledView {
                    attention_event_id: e.id.clone(),
                    target_agent_id: e.target_agent_id.clone(),
                    created_at: e.created_at.to_string(),
                }),
            }))
        })
        .await
    }
}

impl ConversationTools {
    /// Binds the View in the store and in this process's registry.
    fn bind_view(
        &self,
        s: &mut ahp_store::Store,
        c: &ahp_store::conversation::Caller,
        a: &ViewArgs,
        view: &AppView<'_>,
    ) -> Result<Json<BindResult>, ToolError> {
        let views = self.views()?;
        let bound = s.bind_app_view(c, &actor(&a.acting), view)?;
        views.bind(&bound.endpoint, &a.binding_id).map_err(|limit| {
            ToolError::new(
                "limit",
                format!("this process holds {limit} App Views, the most it holds"),
            )
        })?;
        let outcome = match bound.outcome {
            AppBindOutcome::Bound => "bound",
            AppBindOutcome::Renewed => "renewed",
            AppBindOutcome::Rebound => "rebound",
        };
        Ok(Json(BindResult {
            host_binding: HostBinding { bound: true },
            outcome: outcome.into(),
            settled_attempts: bound.settled.len(),
            endpoint: (&bound.endpoint).into(),
        }))
    }

    /// Refuses a View this process does not hold the binding of (after a restart, say): the
    /// card binds again first. Returns the endpoint.
    fn require_bound_here(
        &self,
        s: &mut ahp_store::Store,
        c: &ahp_store::conversation::Caller,
        acting: &ahp_store::conversation::AgentActor,
        binding: &str,
    ) -> Result<Endpoint, ToolError> {
        let ep = s.get_endpoint(c, &acting.agent, &acting.endpoint)?;
        if !self.views()?.holds_view(&ep, binding) {
            return Err(ToolError::new(
                "app_not_bound",
                "host_binding_missing_in_process: this server holds no binding for this View; bind first",
            ));
        }
        Ok(ep)
    }
}
