//! The `iodump` binary: parses the command line into a typed configuration, dispatches to the
//! library crates, and maps errors to one line on stderr and an exit code (0 success, 1
//! failure or damaged input, 2 usage).

mod cli;
mod info;
mod record;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Info(args) => info::run(&args),
        cli::Command::Synth(args) => cli::run_synth(&args),
        cli::Command::Record(args) => record::run(&args),
        cli::Command::Export(args) => cli::run_export(&args),
        cli::Command::Convert(args) => cli::run_convert(&args),
        cli::Command::Analyze(args) => cli::run_analyze(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: the error and its causes.
            let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("iodump: error: {}", msg.join(": "));
            ExitCode::from(1)
        }
    }
}
