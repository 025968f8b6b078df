//! The `tagloop` commands (in progress).

pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
