//! `ahp task list|show`: agent tasks and their attempts, read as the operator.
//!
//! The operator is trusted with the whole database, so a listing spans every principal unless
//! `--principal` names one (an API key's name, as `ahp principal list` shows it; its tasks are
//! those its keys' callers own). Nothing shows a principal digest or an idempotency key.

use ahp_store::Store;
use ahp_store::conversation::{Acting, Caller};
use ahp_store::delegation::{AgentTask, TaskAttempt, TaskQuery, TaskState};
use clap::Subcommand;

use super::{DataDir, table};

/// Most tasks one listing prints (the store's page bound).
const MAX_LIST: u16 = 200;

#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// List tasks by id.
    List {
        /// Only the tasks of this principal (an API key's name).
        #[arg(long, value_name = "NAME")]
        principal: Option<String>,
        /// Only tasks in this state: open, running, succeeded, failed or cancelled.
        #[arg(long, value_parser = parse_state)]
        state: Option<TaskState>,
        /// Start after this task id (the last one of the previous page).
        #[arg(long)]
        after: Option<String>,
        /// At most this many (1 to 200).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_LIST)))]
        limit: u16,
    },
    /// Show one task: who created it for whom, its instructions, result and every attempt.
    Show {
        /// The task (tsk_…).
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A `--state` value, or a message naming the states there are.
pub(crate) fn parse_state(s: &str) -> Result<TaskState, String> {
    s.parse().map_err(|_| {
        let known: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown task state {s:?} (one of {})", known.join(", "))
    })
}

/// The communication caller of the API key principal named `name`, for the operator's reads.
pub(crate) fn principal_caller(store: &mut Store, name: &str) -> anyhow::Result<Caller> {
    let p = store
        .list_principals()?
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| anyhow::anyhow!("no principal named {name:?} (see `ahp principal list`)"))?;
    Ok(ahp_host::ops::identity::api_key_owner(&p).caller()?)
}

/// Who made a task or goal: an agent, or the owner as a human.
pub(crate) fn by(agent: Option<&String>) -> String {
    agent.map_or_else(|| "owner".to_owned(), Clone::clone)
}

/// Tasks as a table.
pub(crate) fn tasks_table(tasks: &[AgentTask]) -> String {
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.state.to_string(),
                t.assignee_agent_id.clone(),
                by(t.creator_agent_id.as_ref()),
                t.goal_id.clone().unwrap_or_else(|| "-".into()),
                t.attempt_count.to_string(),
                t.title.clone(),
            ]
        })
        .collect();
    table::render(
        &["id", "state", "assignee", "creator", "goal", "attempts", "title"],
        &rows,
    )
}

fn attempts_table(attempts: &[TaskAttempt]) -> String {
    let rows: Vec<Vec<String>> = attempts
        .iter()
        .map(|a| {
            vec![
                a.number.to_string(),
                a.id.clone(),
                a.state.to_string(),
                a.endpoint_id.clone(),
                a.generation.to_string(),
                a.wake_id.clone(),
                a.started_at.to_string(),
                a.finished_at.map_or("-".into(), |t| t.to_string()),
            ]
        })
        .collect();
    table::render(
        &[
            "#",
            "attempt",
            "state",
            "endpoint",
            "generation",
            "wake",
            "started",
            "finished",
        ],
        &rows,
    )
}

pub(crate) fn run(dir: &DataDir, command: TaskCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        TaskCommand::List {
            principal,
            state,
            after,
            limit,
        } => {
            let query = TaskQuery {
                state,
                after,
                ..TaskQuery::default()
            };
            let tasks = match principal {
                Some(name) => {
                    let caller = principal_caller(&mut store, &name)?;
                    store.list_agent_tasks(&caller, &Acting::Human, &query, limit.into())?
                }
                None => store.operator_tasks_matching(&query, limit.into())?,
            };
            print!("{}", tasks_table(&tasks));
        }
        TaskCommand::Show { id, json } => {
            let task = store.operator_task(&id)?;
            let attempts = store.operator_task_attempts(&id)?;
            if json {
                let value = serde_json::json!({ "task": task, "attempts": attempts });
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("task        {}", task.id);
                println!("title       {}", task.title);
                println!("state       {}", task.state);
                println!("assignee    {}", task.assignee_agent_id);
                println!("creator     {}", by(task.creator_agent_id.as_ref()));
                println!("goal        {}", task.goal_id.as_deref().unwrap_or("-"));
                println!("created     {}", task.created_at);
                if let Some(t) = task.terminal_at {
                    println!("finished    {t}");
                }
                println!("instructions");
                for line in task.instructions.lines() {
                    println!("    {line}");
                }
                if let Some(result) = &task.result {
                    println!("result");
                    for line in result.lines() {
                        println!("    {line}");
                    }
                }
                println!();
                if attempts.is_empty() {
                    println!("attempts: none");
                } else {
                    print!("{}", attempts_table(&attempts));
                }
            }
        }
    }
    Ok(())
}
