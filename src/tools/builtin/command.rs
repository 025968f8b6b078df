//! `run_command` (offered only with `allow_shell`): `sh -c` in the workspace root, with a time
//! limit that kills the whole process tree, and the output capped.

use super::{Args, Ctx, Reply, ask, opt_pos_int, req_str};

use std::sync::Arc;
use std::time::Duration;

use crate::tools::ToolError;
use crate::tools::shell::run_shell;

/// `run_command(command, timeout_s?)`.
pub(super) async fn run_command(ctx: Arc<Ctx>, args: Args) -> Reply {
    let command = req_str(&args, "command")?;
    if command.trim().is_empty() {
        return Err(ToolError::Failed("the command is empty".to_string()));
    }
    let timeout = match opt_pos_int(&args, "timeout_s")? {
        Some(s) => Duration::from_secs(s).min(ctx.limits.command_max_timeout),
        None => ctx.limits.command_timeout,
    };
    ask(
        &ctx,
        format!(
            "run_command: sh -c {command:?}\n  in {} (timeout {} s)",
            ctx.ws.root().display(),
            timeout.as_secs()
        ),
    )
    .await?;
    let out = run_shell(
        &command,
        ctx.ws.root(),
        timeout,
        ctx.limits.command_output_max_bytes,
        &ctx.child_env,
    )
    .await?;
    if out.timed_out {
        Err(ToolError::Failed(format!(
            "timed out after {} s; the command and every process it started were killed. Output so far:\n{}",
            timeout.as_secs(),
            out.render()
        )))
    } else {
        Ok(out.render())
    }
}
