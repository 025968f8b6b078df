//! Notices during a run: what the user should see while it goes on (see [`crate::llm::Notice`]),
//! as [`Event::Notice`] records, never as log lines in the middle of the streamed turn.
//!
//! A model client reports its notices (a retry, a refused grammar or `stop`) while the turn runs,
//! through the sink [`Recorder::notice_sink`] builds: each is shown to the caller at once, and
//! kept to be written to the transcript when the turn is over (the transcript is not written
//! during a model call). The loop's own notices (a turn cut because it repeated itself, a
//! transcript that could not be written) go through [`Recorder::notice`].

use std::fmt::Display;
use std::sync::{Arc, Mutex};

use tracing::warn;

use crate::llm::{NOTICE_LOG_TARGET, Notice, NoticeKind, NoticeSink};

use super::events::Event;
use super::record::Recorder;
use crate::shown::Outside;

/// The notices a client reported during one turn, waiting for the transcript. Bounded by the
/// client: one per retry (at most its retry limit) and one per refused field.
pub(super) type KeptNotices = Arc<Mutex<Vec<Notice>>>;

impl Recorder {
    /// A sink for one turn's notices, and where it keeps them for [`Recorder::record_notices`].
    pub(super) fn notice_sink(&self) -> (NoticeSink, KeptNotices) {
        let kept: KeptNotices = Arc::default();
        let events = self.sink().cloned();
        let keep = kept.clone();
        let sink = NoticeSink::new(move |n: &Notice| {
            if let Some(events) = &events {
                events(&event(n));
            }
            if let Ok(mut k) = keep.lock() {
                k.push(n.clone());
            }
        });
        (sink, kept)
    }

    /// Write the notices `kept` during a turn to the transcript (the caller has seen them).
    pub(super) fn record_notices(&mut self, kept: &KeptNotices) {
        let notices = match kept.lock() {
            Ok(mut k) => std::mem::take(&mut *k),
            Err(_) => return,
        };
        for n in &notices {
            self.record(&event(n));
        }
    }

    /// Show `notice` to the caller and write it to the transcript.
    pub(super) fn notice(&mut self, notice: Notice) {
        self.emit(event(&notice));
    }

    /// The transcript could not be written: say so once (logs and caller), and stop writing it.
    pub(super) fn transcript_lost(&mut self, e: &dyn Display) {
        warn!(target: NOTICE_LOG_TARGET, error = %Outside(&e), "the transcript could not be written; the run goes on without it");
        self.transcript_failed = true;
        if let Some(events) = self.sink() {
            events(&event(&Notice::new(
                NoticeKind::TranscriptFailed,
                format!("the transcript could not be written ({e}); the run goes on without it"),
            )));
        }
    }
}

/// The event of a notice.
fn event(n: &Notice) -> Event {
    Event::Notice {
        kind: n.kind.as_str().to_owned(),
        message: n.message.clone(),
    }
}
