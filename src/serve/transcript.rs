//! The transcript of an answered request (`--session-dir`): one JSON file per request, written
//! whether it was answered or ended in an error.
//!
//! `turns` holds every turn the upstream wrote for the answer, each once, with the correction a
//! refused one got or the note of what became of it (declined, re-asked, continued); the turn
//! whose reading was answered comes last. A re-ask for the tool the question's words name
//! (`policy/choose.rs`) that gave no usable call is recorded too, before the turn whose call stood.
//! `requests` counts every upstream request made (repairs, the guess and a re-ask included;
//! `usage` in the answer sums them); `decisions` holds each judgement of a turn's calls
//! (`policy/judgement.rs`); `fitted`, what context fitting left out (`fit.rs`).

use serde_json::json;

use super::ServeError;
use super::core::Trace;
use super::response::AnswerMeta;
use crate::secret::Redactor;
use crate::shown::Outside;

/// One JSON file per answered request in `dir`: the upstream's turns, the corrections, the
/// number of upstream requests made (the guess and a re-ask included), the answer. Holds no key: the request's headers are not in it, and the upstream key (which an
/// upstream may write into its turns) is redacted. A failure to write is logged.
pub(crate) async fn write_transcript(
    dir: &std::path::Path,
    meta: &AnswerMeta,
    answer: &serde_json::Value,
    trace: &Trace,
    error: Option<&ServeError>,
    redactor: &Redactor,
) {
    let turns: Vec<_> = trace
        .turns
        .iter()
        .map(|(text, correction)| json!({"turn": text, "correction": correction}))
        .collect();
    let mut record = json!({
        "id": meta.id,
        "created": meta.created,
        "model": meta.model,
        "turns": turns,
        "requests": trace.requests,
        "answer": answer,
        "error": error.map(|e| e.to_string()),
    });
    if !trace.fitted.is_empty() {
        record["fitted"] = json!(trace.fitted);
    }
    if !trace.decisions.is_empty() {
        record["decisions"] = json!(trace.decisions);
    }
    redactor.redact_json(&mut record);
    let path = dir.join(format!("{}.json", meta.id));
    let write = async {
        tokio::fs::create_dir_all(dir).await?;
        tokio::fs::write(&path, record.to_string()).await
    };
    if let Err(e) = write.await {
        tracing::warn!(path = %Outside(path.display()), error = %Outside(&e), "cannot write the serve transcript");
    }
}
