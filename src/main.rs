use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gpuledger::cli::Cli::parse();
    gpuledger::commands::init_logging(&cli);
    match gpuledger::commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`| head`) is not a failure.
            if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {}", gpuledger::commands::one_line(&e));
            gpuledger::exit::exit_code(gpuledger::commands::exit_code_for(&e))
        }
    }
}
