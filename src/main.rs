use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = gpuledger::cli::Cli::parse();
    gpuledger::commands::init_logging(&cli);
    match gpuledger::commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`| head`) is not a failure.
            if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) {
                return ExitCode::SUCCESS;
            }
            // stderr may be a closed pipe too: the exit code still says what happened (eprintln
            // would panic, exit 101).
            let _ = writeln!(std::io::stderr(), "error: {}", gpuledger::commands::one_line(&e));
            gpuledger::exit::exit_code(gpuledger::commands::exit_code_for(&e))
        }
    }
}

/// glibc's malloc gives each thread that allocates its own arena, up to 8 per core, and keeps
/// what is freed in each: a month close of 10,000 GPUs held 1.9 GiB of memory for ~0.8 GiB in
/// use (`docs/scale.md`). Two arenas hold it to 1.3 GiB at the same speed. `MALLOC_ARENA_MAX`
/// in the environment still decides where it is set.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; called first thing, before any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
