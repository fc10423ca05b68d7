//! The `ahp:agent/delegation` calls whose arguments hold lists — `register-wait`,
//! `create-goal`, `checkpoint-goal` — linked with lazy types over the generated ones (see
//! [`super::bounded`]): each count and length is checked against the store's bound before
//! anything is copied, and a call past one is refused with `invalid`, as the store would refuse
//! the copy. The call is counted, and its idempotency index spent, before it is weighed, as for
//! any other delegation write; what fits goes on to the same code as the generated binding.

use ahp_store::delegation::bounds::{
    MAX_CHECKPOINT_NOTE_BYTES, MAX_COMPLETION_INTENT_BYTES, MAX_PLAN_STEP_BYTES, MAX_PLAN_STEPS, MAX_TITLE_BYTES,
    MAX_WAIT_SOURCES,
};
use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, WasmList, WasmStr};

use super::bindings::v0_3::ahp::agent::delegation::{Error, Goal, NewGoal, PlanStep, StepStatus, Wait, WaitMode};
use super::bounded::{self, MAX_ID_BYTES, element, len, string, string_within, weighing};
use super::context::AgentView;
use super::delegation::Keyed;

/// The WIT `plan-step`, its title left in guest memory.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestPlanStep {
    title: WasmStr,
    status: StepStatus,
}

/// The WIT `new-goal`, its strings and plan left in guest memory.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct GuestNewGoal {
    title: WasmStr,
    #[component(name = "completion-intent")]
    completion_intent: WasmStr,
    plan: WasmList<GuestPlanStep>,
    controller: Option<WasmStr>,
}

/// A refusal of the call, or the value it goes on with.
type Checked<V> = Result<V, Error>;

fn invalid<V>(why: String) -> wasmtime::Result<Checked<V>> {
    Ok(Err(Error::Invalid(why)))
}

/// Replaces the generated `register-wait`, `create-goal` and `checkpoint-goal` of
/// `ahp:agent/delegation@0.3.0` (added first) with their lazy versions.
pub(crate) fn add_to_linker<T: AgentView>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut inst = linker.instance("ahp:agent/delegation@0.3.0")?;
    inst.func_wrap(
        "register-wait",
        |mut cx: StoreContextMut<'_, T>,
         (sources, mode, goal_id): (WasmList<WasmStr>, WaitMode, Option<WasmStr>)|
         -> wasmtime::Result<(Result<Wait, Error>,)> {
            let keyed = match cx.data_mut().agent().keyed_write(Keyed::RegisterWait) {
                Ok(keyed) => keyed,
                Err(e) => return Ok((Err(e),)),
            };
            let checked = match wait_arguments(&mut cx, &sources, goal_id.as_ref())? {
                Ok(checked) => checked,
                Err(e) => return Ok((Err(e),)),
            };
            let (sources, goal_id) = checked;
            Ok((cx.data_mut().agent().registered_wait(keyed, sources, mode, goal_id),))
        },
    )?;
    inst.func_wrap(
        "create-goal",
        |mut cx: StoreContextMut<'_, T>, (goal,): (GuestNewGoal,)| -> wasmtime::Result<(Result<Goal, Error>,)> {
            let keyed = match cx.data_mut().agent().keyed_write(Keyed::CreateGoal) {
                Ok(keyed) => keyed,
                Err(e) => return Ok((Err(e),)),
            };
            let goal = match new_goal(&mut cx, &goal)? {
                Ok(goal) => goal,
                Err(e) => return Ok((Err(e),)),
            };
            Ok((cx.data_mut().agent().created_goal(keyed, goal),))
        },
    )?;
    inst.func_wrap(
        "checkpoint-goal",
        |mut cx: StoreContextMut<'_, T>,
         (goal_id, expected_revision, plan, note): (WasmStr, u64, WasmList<GuestPlanStep>, WasmStr)|
         -> wasmtime::Result<(Result<Goal, Error>,)> {
            let keyed = match cx.data_mut().agent().keyed_write(Keyed::CheckpointGoal) {
                Ok(keyed) => keyed,
                Err(e) => return Ok((Err(e),)),
            };
            let Some(goal_id) = string_within(&cx, &goal_id, MAX_ID_BYTES)? else {
                return Ok((Err(Error::Invalid(format!("goalId: is over {MAX_ID_BYTES} bytes"))),));
            };
            let Some(note) = string_within(&cx, &note, MAX_CHECKPOINT_NOTE_BYTES)? else {
                return Ok((Err(Error::Invalid(format!(
                    "note: is over {MAX_CHECKPOINT_NOTE_BYTES} bytes"
                ))),));
            };
            let plan = match plan_of(&mut cx, &plan)? {
                Ok(plan) => plan,
                Err(e) => return Ok((Err(e),)),
            };
            Ok((cx
                .data_mut()
                .agent()
                .checkpointed_goal(keyed, goal_id, expected_revision, plan, note),))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `register-wait`'s sources and goal, copied if within their bounds.
fn wait_arguments<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    sources: &WasmList<WasmStr>,
    goal_id: Option<&WasmStr>,
) -> wasmtime::Result<Checked<(Vec<String>, Option<String>)>> {
    if sources.len() > MAX_WAIT_SOURCES {
        return invalid(format!("sources: must name 1 to {MAX_WAIT_SOURCES} tasks"));
    }
    let goal_id = match goal_id {
        None => None,
        Some(g) => match string_within(cx, g, MAX_ID_BYTES)? {
            Some(g) => Some(g),
            None => return invalid(format!("goalId: is over {MAX_ID_BYTES} bytes")),
        },
    };
    match bounded::strings(cx, sources, MAX_ID_BYTES)? {
        Ok(sources) => Ok(Ok((sources, goal_id))),
        Err(i) => invalid(format!("sources[{i}]: is over {MAX_ID_BYTES} bytes")),
    }
}

/// `create-goal`'s goal, copied if within its bounds.
fn new_goal<T: 'static>(cx: &mut StoreContextMut<'_, T>, goal: &GuestNewGoal) -> wasmtime::Result<Checked<NewGoal>> {
    let Some(title) = string_within(cx, &goal.title, MAX_TITLE_BYTES)? else {
        return invalid(format!("title: is over {MAX_TITLE_BYTES} bytes"));
    };
    let Some(completion_intent) = string_within(cx, &goal.completion_intent, MAX_COMPLETION_INTENT_BYTES)? else {
        return invalid(format!("completionIntent: is over {MAX_COMPLETION_INTENT_BYTES} bytes"));
    };
    let controller = match &goal.controller {
        None => None,
        Some(c) => match string_within(cx, c, MAX_ID_BYTES)? {
            Some(c) => Some(c),
            None => return invalid(format!("controller: is over {MAX_ID_BYTES} bytes")),
        },
    };
    Ok(plan_of(cx, &goal.plan)?.map(|plan| NewGoal {
        title,
        completion_intent,
        plan,
        controller,
    }))
}

/// A plan, copied if it has at most [`MAX_PLAN_STEPS`] steps of at most [`MAX_PLAN_STEP_BYTES`].
fn plan_of<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    plan: &WasmList<GuestPlanStep>,
) -> wasmtime::Result<Checked<Vec<PlanStep>>> {
    if plan.len() > MAX_PLAN_STEPS {
        return invalid(format!("plan: must have at most {MAX_PLAN_STEPS} steps"));
    }
    let steps = weighing(cx, |cx| {
        let mut steps = Vec::with_capacity(plan.len());
        for i in 0..plan.len() {
            let step = element(cx, plan, i)?;
            if len(cx, &step.title)? > MAX_PLAN_STEP_BYTES {
                return invalid(format!("plan[{i}].title: is over {MAX_PLAN_STEP_BYTES} bytes"));
            }
            steps.push(step);
        }
        Ok(Ok(steps))
    })?;
    match steps {
        Ok(steps) => steps
            .iter()
            .map(|s| {
                Ok(PlanStep {
                    title: string(cx, &s.title)?,
                    status: s.status,
                })
            })
            .collect::<wasmtime::Result<_>>()
            .map(Ok),
        Err(e) => Ok(Err(e)),
    }
}
