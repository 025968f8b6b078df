//! Child processes: what they inherit, and how long they may live.
//!
//! Everything tagloop starts (a `run_command` shell, an MCP server) runs code tagloop does not
//! control, so two rules hold for every child:
//!
//! 1. **No key tagloop knows of reaches a child.** [`ChildEnv`] builds a child's environment from
//!    tagloop's own minus `OPENAI_API_KEY`, `OPENAI_ADMIN_KEY`, `TAGLOOP_QUEUE` (a queue address
//!    may hold a password), every `TAGLOOP_*` variable whose
//!    name says it is a secret (`KEY`, `TOKEN`, `SECRET`, `PASSWORD`), every variable the caller
//!    names (a provider's `api_key_env`), and every variable whose *value* contains a secret the
//!    caller hands over (the key in use, from wherever it came). Only what the user passes
//!    explicitly ([`ChildEnv::set`]) is added back afterwards.
//! 2. **No child outlives what started it.** On Linux, [`harden_process`] makes tagloop the
//!    *child subreaper* of its descendants (`PR_SET_CHILD_SUBREAPER`): a process that leaves its
//!    session (`setsid`) or whose parent exits is re-parented to tagloop instead of to init, so it
//!    can still be found. Every child tagloop spawns carries a job marker in its environment
//!    (`TAGLOOP_JOB`) so an orphan re-parented to tagloop can be traced back to the command that
//!    started it. [`kill_tree`] stops a whole tree first (`SIGSTOP`, so nothing forks or gets
//!    re-parented while it is collected) and then kills it. [`kill_all_descendants`] does that for
//!    everything tagloop still has, at exit or on a signal, and each direct child gets
//!    `PR_SET_PDEATHSIG(SIGKILL)`, so even a `SIGKILL`ed tagloop takes its direct children along
//!    (their own descendants then survive: the kernel offers nothing better without cgroups).
//!    Orphans that exit are reaped ([`reap_orphans`]); tagloop never calls `waitpid(-1)`, so the
//!    exit statuses of the children tokio waits for are never stolen. Both walks of `/proc` are
//!    skipped when tagloop has no child at all (`waitid(P_ALL, WNOHANG | WNOWAIT)` says
//!    `ECHILD` and reaps nothing): a run or batch that starts no command reads no other
//!    process's `/proc/PID/stat`.
//!
//! [`harden_process`] also sets `PR_SET_DUMPABLE` to 0: `/proc/<tagloop>/environ`, `mem`, `maps`
//! and `fd/` become owned by root and unreadable for same-user processes that are not root,
//! and same-user `ptrace` is refused. Root (or `CAP_SYS_PTRACE`) can still read them, and
//! `/proc/<pid>/cmdline` stays readable by every local user (a key given with `--api-key` is
//! visible there; the environment or `.env` is the safe way to pass one).
//!
//! Elsewhere than Linux the process functions do nothing but what POSIX allows (process groups,
//! as before); the environment rules hold everywhere.

mod env;
mod tree;

pub use env::ChildEnv;
pub use tree::{Job, forget, harden_process, kill_all_descendants, kill_tree, spawn_orphan_reaper};
