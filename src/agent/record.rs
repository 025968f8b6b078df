//! What a run tells: every event goes to the caller's sink and, staged, to the transcript, which
//! is written before every wait and at the run's end; a correction is an event too.

use super::correction::Correction;
use super::events::Event;
use super::run::Run;

impl Run<'_> {
    /// Tell the caller and the transcript about a correction; the text for the model.
    pub(super) fn correct(&mut self, correction: Correction) -> String {
        let message = correction.message();
        self.emit(Event::Correction {
            kind: correction.kind().to_string(),
            message: message.clone(),
        });
        message
    }

    /// Give an event to the caller and write it to the transcript.
    pub(super) fn emit(&mut self, event: Event) {
        if let Some(sink) = &self.options.events {
            sink(&event);
        }
        self.record(&event);
    }

    /// Stage `event` in the transcript only (the caller has already been shown it).
    pub(super) fn record(&mut self, event: &Event) {
        // Records are staged and written before every wait (a model call here, a tool call
        // that does not finish at once in `run_tool`) and at the run's end, so nothing staged
        // ever waits (see `Transcript::stage`). A step's end needs no write of its own: the next
        // step's `TurnStarted` follows it without a wait, as `Finished` follows `Final`.
        let boundary = matches!(event, Event::TurnStarted { .. } | Event::Finished { .. });
        if let Some(t) = self.options.transcript.as_mut()
            && !self.transcript_failed
            && let Err(e) = t
                .stage(event)
                .and_then(|()| if boundary { t.flush() } else { Ok(()) })
        {
            self.transcript_lost(&e);
        }
    }

    /// Write the staged transcript records now (before a wait).
    pub(super) fn flush_transcript(&mut self) {
        if let Some(t) = self.options.transcript.as_mut()
            && !self.transcript_failed
            && let Err(e) = t.flush()
        {
            self.transcript_lost(&e);
        }
    }
}
