//! The keeper: says every few seconds that the worker is alive, so the tasks it holds are never
//! claimed from it, and stops the tasks another worker has already finished.

use std::time::Duration;

use super::shared::Shared;

/// Every `every`, until aborted: say the worker is alive, keep its tasks from being claimed, and
/// stop the ones another worker has finished.
pub(super) async fn keep_alive(shared: Shared, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let pairs: Vec<(String, String)> = shared
            .held
            .lock()
            .await
            .iter()
            .map(|(e, h)| (e.clone(), h.key.clone()))
            .collect();
        match shared.queue.keep_alive(&shared.name, &pairs).await {
            Ok(settled) => {
                let mut held = shared.held.lock().await;
                for entry in settled {
                    if let Some(h) = held.get_mut(&entry)
                        && let Some(abort) = h.abort.take()
                    {
                        tracing::info!("task {}: finished by another worker; stopped here", h.key);
                        abort.abort();
                        held.remove(&entry);
                    }
                }
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
}
