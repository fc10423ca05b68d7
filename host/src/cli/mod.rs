//! The command line: argument parsing and dispatch to one file per command group.

mod agent;
mod agent_new;
mod auth;
mod component;
mod conversation;
mod data_dir;
mod demo;
mod goal;
mod host;
pub(crate) mod log;
mod policy;
mod principal;
mod reap;
mod run;
mod serve;
mod table;
mod task;
mod terminal;
mod token;
mod transfer;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub(crate) use data_dir::DataDir;

/// ahp moves running AI agent sessions between hosts and keeps them running, metered and
/// contained, in WebAssembly sandboxes.
#[derive(Debug, Parser)]
#[command(name = "ahp", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Directory holding the database, the compiled-component cache, the vault and the
    /// transfer-token key file [default: $AHP_DATA_DIR, else the platform data directory,
    /// e.g. ~/.local/share/ahp].
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// A PostgreSQL database several hosts share (`postgres://user@host/db`); default
    /// `$AHP_DATABASE_URL`, else the SQLite file in the data directory.
    #[arg(long, global = true, value_name = "URL")]
    database: Option<String>,

    /// This host's id among the hosts of a shared database (letters, digits, '.', '_', '-');
    /// default `$AHP_HOST_ID`, else this machine's host name.
    #[arg(long, global = true, value_name = "ID")]
    host_id: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one transfer's whole life on a fresh database and print each step.
    Demo(demo::DemoArgs),
    /// Register guest components.
    #[command(subcommand)]
    Component(component::ComponentCommand),
    /// Mint transfer tokens (never available over MCP).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Manage the API keys of the HTTP transport.
    #[command(subcommand)]
    Principal(principal::PrincipalCommand),
    /// The OAuth issuers whose access tokens the HTTP transport accepts.
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// The operator's credential and egress policy.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Inspect and end transfers.
    #[command(subcommand)]
    Transfer(transfer::TransferCommand),
    /// Inspect the conversation domain's agents (as the operator).
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Inspect conversations and their transcripts (as the operator).
    #[command(subcommand)]
    Conversation(conversation::ConversationCommand),
    /// The hosts of the database (several share a PostgreSQL one).
    #[command(subcommand)]
    Host(host::HostCommand),
    /// Inspect agent tasks and their attempts (as the operator).
    #[command(subcommand)]
    Task(task::TaskCommand),
    /// Inspect goals, their plans and their tasks (as the operator).
    #[command(subcommand)]
    Goal(goal::GoalCommand),
    /// Run one agent locally with no server: activate it from a snapshot, then one turn per
    /// message, on a throwaway data directory.
    Run(run::RunArgs),
    /// Run both reapers once and print what they changed (for cron).
    Reap(reap::ReapArgs),
    /// Serve the MCP transfer and conversation tools (and run the reapers on an interval).
    Serve(serve::ServeArgs),
}

impl Cli {
    /// Whether the command's log goes to stderr (all but the demo, which sends it to a file).
    pub(crate) fn logs_to_stderr(&self) -> bool {
        !matches!(self.command, Command::Demo(_))
    }
}

/// Runs the parsed command.
pub(crate) fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo(args) => demo::run(cli.data_dir, args),
        Command::Agent(agent::AgentCommand::New(args)) => agent_new::run(args),
        Command::Run(args) => run::run(cli.data_dir, args),
        command => {
            let database = data_dir::Database::resolve(cli.database, cli.host_id)?;
            let dir = DataDir::resolve(cli.data_dir, database)?;
            match command {
                Command::Token(c) => token::run(&dir, c),
                Command::Component(c) => component::run(&dir, c),
                Command::Principal(c) => principal::run(&dir, c),
                Command::Auth(c) => auth::run(&dir, c),
                Command::Transfer(c) => transfer::run(&dir, c),
                Command::Policy(c) => policy::run(&dir, c),
                Command::Agent(c) => agent::run(&dir, c),
                Command::Conversation(c) => conversation::run(&dir, c),
                Command::Host(c) => host::run(&dir, c),
                Command::Task(c) => task::run(&dir, c),
                Command::Goal(c) => goal::run(&dir, c),
                Command::Reap(args) => reap::run(&dir, args),
                Command::Serve(args) => serve::run(&dir, args),
                Command::Demo(_) | Command::Run(_) => unreachable!("handled above"),
            }
        }
    }
}

/// Parses a human duration such as `5m`, `90s` or `1h 30m`.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 90s, 5m, 1h)"))
}
