//! Computing one delivery's result, as `batch` computes a task's.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use tagloop::agent::Status;
use tagloop::queue::{Delivery, Queue};

use super::super::batch::{parse_task, run_one};
use super::super::setup::Setup;
use super::shared::Tally;
use super::storer::Computed;

/// What every task of this worker runs with.
#[derive(Clone)]
pub(super) struct Runner {
    pub setup: Arc<Setup>,
    pub session_dir: Option<PathBuf>,
    /// The run's settings, recorded in each session.
    pub meta: Value,
    pub max_deliveries: u64,
    pub queue: Arc<Queue>,
    pub tally: Arc<Tally>,
}

/// An error outcome in `batch`'s shape, for a task the worker cannot run.
pub(super) fn error_line(id: &Value, error: String) -> Value {
    json!({"id": id, "status": "error", "final": null, "steps": 0, "llm_calls": 0, "tools_used": [],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "session": null, "error": error})
}

impl Runner {
    /// Compute one delivery's result. `None` when there is nothing to store: the task already
    /// has a result (its entry is settled here).
    pub async fn run(self, d: Delivery) -> Option<Computed> {
        if matches!(self.queue.has_result(&d.key).await, Ok(true)) {
            // Finished by another worker whose acknowledgement was lost: settle the entry only.
            return Some(Computed {
                entry: d.entry,
                key: d.key,
                line: Value::Null,
                ok: true,
            });
        }
        let (ok, line) = match d.task {
            // Not a task (another client wrote it): its own error result, so the entry is
            // settled and the worker goes on to the next.
            Err(bad) => (
                false,
                error_line(&Value::String(d.key.clone()), format!("{bad}")),
            ),
            Ok(task) => {
                let id = task
                    .get("id")
                    .cloned()
                    .unwrap_or(Value::String(d.key.clone()));
                if d.deliveries > self.max_deliveries {
                    let e = format!(
                        "given to workers {} times without a result (each stopped or died while \
                         running it); not tried again (--max-deliveries {})",
                        d.deliveries, self.max_deliveries
                    );
                    (false, error_line(&id, e))
                } else {
                    self.compute(task, &id).await
                }
            }
        };
        self.tally.ran.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.tally.not_ok.fetch_add(1, Ordering::Relaxed);
        }
        Some(Computed {
            entry: d.entry,
            key: d.key,
            line,
            ok,
        })
    }

    /// Run the task: `(ok, result line)`.
    async fn compute(&self, task: Value, id: &Value) -> (bool, Value) {
        let task = match parse_task(task, None) {
            Err(e) => return (false, error_line(id, format!("bad task: {e:#}"))),
            Ok(task) => task,
        };
        // A panic in one task (a bug) becomes that task's error result: otherwise its entry
        // would stay held and `--until-empty` would never see the queue settle.
        let run = std::panic::AssertUnwindSafe(run_one(
            &self.setup,
            task,
            self.session_dir.as_deref(),
            self.meta.clone(),
        ));
        match futures::FutureExt::catch_unwind(run).await {
            Ok(Ok((status, _, line))) => (status == Status::Ok, line),
            Ok(Err(e)) => (false, error_line(id, format!("{e:#}"))),
            Err(_) => (
                false,
                error_line(id, "tagloop panicked while running this task".into()),
            ),
        }
    }
}
