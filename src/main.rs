//! The `tagloop` command line; everything lives in `cli`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
