//! `ahp goal list|show`: goals, their plans and their tasks, read as the operator.
//!
//! Like `ahp task`, a listing spans every principal unless `--principal` names one; nothing
//! shows a principal digest or an idempotency key.

use ahp_store::conversation::Acting;
use ahp_store::delegation::{Goal, StepStatus, TaskQuery};
use clap::Subcommand;

use super::task::{by, principal_caller, tasks_table};
use super::{DataDir, table};

/// Most goals one listing prints, and most tasks `show` prints (the store's page bound).
const MAX_LIST: u16 = 200;

#[derive(Debug, Subcommand)]
pub(crate) enum GoalCommand {
    /// List goals by id.
    List {
        /// Only the goals of this principal (an API key's name).
        #[arg(long, value_name = "NAME")]
        principal: Option<String>,
        /// Start after this goal id (the last one of the previous page).
        #[arg(long)]
        after: Option<String>,
        /// At most this many (1 to 200).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_LIST)))]
        limit: u16,
    },
    /// Show one goal: its intent, plan, revision, last note and its tasks.
    Show {
        /// The goal (goal_…).
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `done/total` plan steps (skipped steps count as done).
fn progress(g: &Goal) -> String {
    let done = g
        .plan
        .iter()
        .filter(|s| matches!(s.status, StepStatus::Done | StepStatus::Skipped))
        .count();
    format!("{done}/{}", g.plan.len())
}

pub(crate) fn run(dir: &DataDir, command: GoalCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        GoalCommand::List {
            principal,
            after,
            limit,
        } => {
            let goals = match principal {
                Some(name) => {
                    let caller = principal_caller(&store, &name)?;
                    store.list_goals(&caller, &Acting::Human, after.as_deref(), limit.into())?
                }
                None => store.operator_goals(after.as_deref(), limit.into())?,
            };
            let rows: Vec<Vec<String>> = goals
                .iter()
                .map(|g| {
                    vec![
                        g.id.clone(),
                        g.state.to_string(),
                        g.revision.to_string(),
                        g.controller_agent_id.clone().unwrap_or_else(|| "-".into()),
                        progress(g),
                        g.title.clone(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(&["id", "state", "revision", "controller", "steps", "title"], &rows)
            );
        }
        GoalCommand::Show { id, json } => {
            let goal = store.operator_goal(&id)?;
            let query = TaskQuery {
                goal: Some(id.clone()),
                ..TaskQuery::default()
            };
            let tasks = store.operator_tasks_matching(&query, MAX_LIST.into())?;
            if json {
                let value = serde_json::json!({ "goal": goal, "tasks": tasks });
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("goal        {}", goal.id);
                println!("title       {}", goal.title);
                println!("state       {}", goal.state);
                println!("revision    {}", goal.revision);
                println!("creator     {}", by(goal.creator_agent_id.as_ref()));
                println!("controller  {}", goal.controller_agent_id.as_deref().unwrap_or("-"));
                println!("created     {}", goal.created_at);
                if let Some(t) = goal.closed_at {
                    println!("closed      {t}");
                }
                println!("intent");
                for line in goal.completion_intent.lines() {
                    println!("    {line}");
                }
                println!("plan ({})", progress(&goal));
                for (i, step) in goal.plan.iter().enumerate() {
                    println!("    {}. [{}] {}", i + 1, step.status, step.title);
                }
                if !goal.note.is_empty() {
                    println!("note");
                    for line in goal.note.lines() {
                        println!("    {line}");
                    }
                }
                println!();
                if tasks.is_empty() {
                    println!("tasks: none");
                } else {
                    print!("{}", tasks_table(&tasks));
                }
            }
        }
    }
    Ok(())
}
