//! The `iodump` binary: parses the command line into a typed configuration, dispatches to the
//! library crates, and maps errors to one line on stderr and an exit code (0 success, 1
//! failure or damaged input, 2 usage).

mod args;
mod cli;
#[cfg(feature = "analyze")]
mod diff;
mod info;
#[cfg(feature = "analyze")]
mod offline;
mod original;
mod record;
mod replay;
mod serving;
mod signals;
mod top;
mod top_view;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The original iodump's command line (`iodump -p sda …`, no subcommand).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if original::is_original(&args) {
        return report(original::run(&args));
    }
    let cli = cli::Cli::parse();
    if !matches!(
        cli.command,
        cli::Command::Record(_) | cli::Command::Top(_) | cli::Command::Replay(_)
    ) {
        // What only reads and prints ends quietly when its reader has gone (`iodump info
        // DIR | head`), as Unix tools do; a recorder or replayer goes on to close its trace.
        // SAFETY: signal(2) with SIG_DFL changes only this process's disposition, before
        // any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        cli::Command::Info(args) => info::run(&args),
        cli::Command::Synth(args) => cli::run_synth(&args),
        cli::Command::Record(args) => record::run(&args),
        cli::Command::Top(args) => top::run(&args),
        cli::Command::Replay(args) => replay::run(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Export(args) => offline::run_export(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Convert(args) => offline::run_convert(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Analyze(args) => offline::run_analyze(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Report(args) => offline::run_report(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Plot(args) => offline::run_plot(&args),
        #[cfg(feature = "analyze")]
        cli::Command::Diff(args) => diff::run(&args),
    };
    report(result)
}

/// The exit code of a command's result; an error is one line on stderr.
fn report(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: the error and its causes (a cause its error already shows is left
            // out: `opening x: No such file or directory` once, not twice).
            eprintln!("iodump: error: {}", one_line(&e));
            ExitCode::from(if args::is_usage(&e) { 2 } else { 1 })
        }
    }
}

/// An error and its causes on one line ([`iodump_record::error::one_line`]).
fn one_line(e: &anyhow::Error) -> String {
    iodump_record::error::one_line(e.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_one_line_with_long_causes_cut() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = anyhow::Error::new(io).context("opening x: No such file or directory");
        assert_eq!(one_line(&e), "opening x: No such file or directory");
        let log = format!(
            "verifier log: {}R1 invalid mem access",
            "0: r1 = 0\n".repeat(500)
        );
        let e = anyhow::anyhow!(log).context("loading the BPF object");
        let line = one_line(&e);
        assert!(
            line.starts_with("loading the BPF object: verifier log … "),
            "{line}"
        );
        assert!(line.ends_with("R1 invalid mem access"), "{line}");
        assert!(line.len() < 700 && !line.contains('\n'), "{line}");
    }
}
