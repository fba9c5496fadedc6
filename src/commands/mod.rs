//! Command handlers: the edge where library errors become `anyhow` errors with context.

mod context;
mod failure;
mod lake_cmds;
mod query;
mod reports;
mod simulate;

pub use failure::{exit_code_for, one_line};
use lake_cmds::{check_cmd, collect_cmd, rollup_cmd};
use query::{query, serve, tables};
use reports::{plan_cmd, report_cmd, run_cmd};
use simulate::{demo, simulate};

use context::*;

pub fn init_logging(cli: &Cli) {
    let default = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            0 => "gpuledger=info",
            1 => "gpuledger=debug",
            _ => "debug",
        }
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        // A log line that cannot be written (stderr a closed pipe) is dropped; tracing's own
        // report of it would panic on the same pipe (exit 101).
        .log_internal_errors(false)
        .try_init();
}

pub fn run(cli: Cli) -> Result<()> {
    // The shell completions and the man page need neither the config nor the lake.
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "gpuledger", &mut std::io::stdout());
            return Ok(());
        }
        Command::Manpage => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
            return Ok(());
        }
        _ => {}
    }
    let ctx = resolve(&cli)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Serve(_)) {
        // Workers beyond the cores DataFusion keeps busy: logins, cancels and statement time
        // limits are answered while queries run.
        runtime.worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()) + 2);
    }
    let runtime = runtime.enable_all().build().context("starting the async runtime")?;
    if let Command::Serve(args) = cli.command {
        let served = runtime.block_on(serve(&ctx, args));
        // A statement's work that outlived the drain (a plan between two yields) is not waited
        // for: a SIGTERMed server exits within seconds.
        runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        return served;
    }
    match cli.command {
        Command::Demo(args) => runtime.block_on(demo(&ctx, args)),
        Command::Simulate(args) => simulate(&ctx, &args).map(|_| ()),
        Command::Collect(args) => runtime.block_on(collect_cmd(&ctx, args)),
        Command::Report(args) => runtime.block_on(report_cmd(&ctx, args)),
        Command::Run(args) => runtime.block_on(run_cmd(&ctx, args)),
        Command::Plan(args) => runtime.block_on(plan_cmd(&ctx, args)),
        Command::Query(args) => runtime.block_on(query(&ctx, args)),
        Command::Tables => runtime.block_on(tables(&ctx)),
        Command::Serve(_) => unreachable!("served above"),
        Command::Check => runtime.block_on(check_cmd(&ctx)),
        Command::Rollup(args) => rollup_cmd(&ctx, &args),
        Command::Completions { .. } | Command::Manpage => unreachable!("answered before the config is loaded"),
    }
}
