//! What a run tells: every event goes to the caller's sink and, staged, to the transcript, which
//! is written before every wait and at the run's end. The
//! [`Recorder`] owns both ends and whether the transcript still works; the notices a turn
//! brings are its business too (`notices.rs`).

use crate::session::Transcript;

use super::events::{Event, EventSink};

/// Where a run's events go: the caller's sink and the transcript.
pub(crate) struct Recorder {
    /// Where events go as they happen.
    events: Option<EventSink>,
    /// Where the transcript is written.
    transcript: Option<Transcript>,
    /// The transcript could not be written: the run goes on without it.
    pub(super) transcript_failed: bool,
}

impl Recorder {
    /// Tell `events` and write `transcript` (either may be absent).
    pub(crate) fn new(events: Option<EventSink>, transcript: Option<Transcript>) -> Self {
        Recorder {
            events,
            transcript,
            transcript_failed: false,
        }
    }

    /// The caller's sink alone, for what the transcript does not keep (streamed text, restored
    /// messages it already has).
    pub(crate) fn sink(&self) -> Option<&EventSink> {
        self.events.as_ref()
    }

    /// Give an event to the caller and write it to the transcript.
    pub(crate) fn emit(&mut self, event: Event) {
        if let Some(sink) = &self.events {
            sink(&event);
        }
        self.record(&event);
    }

    /// Stage `event` in the transcript only (the caller has already been shown it).
    pub(crate) fn record(&mut self, event: &Event) {
        // Records are staged and written before every wait (a model call here, a tool call
        // that does not finish at once in `run_tool`) and at the run's end, so nothing staged
        // ever waits (see `Transcript::stage`). A step's end needs no write of its own: the next
        // step's `TurnStarted` follows it without a wait, as `Finished` follows `Final`.
        let boundary = matches!(event, Event::TurnStarted { .. } | Event::Finished { .. });
        if let Some(t) = self.transcript.as_mut()
            && !self.transcript_failed
            && let Err(e) = t
                .stage(event)
                .and_then(|()| if boundary { t.flush() } else { Ok(()) })
        {
            self.transcript_lost(&e);
        }
    }

    /// Write the staged transcript records now (before a wait).
    pub(crate) fn flush(&mut self) {
        if let Some(t) = self.transcript.as_mut()
            && !self.transcript_failed
            && let Err(e) = t.flush()
        {
            self.transcript_lost(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A transcript that cannot be written is said once, to the caller, and the run's events
    /// still reach the caller after it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_transcript_that_fails_is_said_once_and_the_events_go_on() {
        let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
        let keep = seen.clone();
        let sink: EventSink = Arc::new(move |e: &Event| keep.lock().unwrap().push(e.clone()));
        // Every write to /dev/full fails (no space left on the device).
        let transcript = Transcript::open_append(Path::new("/dev/full")).unwrap();
        let mut recorder = Recorder::new(Some(sink), Some(transcript));
        let turn = Event::TurnStarted {
            step: 1,
            final_only: false,
        };
        recorder.emit(turn.clone());
        recorder.emit(turn.clone());
        recorder.flush();
        let kinds: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Event::TurnStarted { .. } => "turn_started".to_string(),
                Event::Notice { kind, .. } => kind.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds, ["turn_started", "transcript_failed", "turn_started"]);
        assert!(recorder.transcript_failed);
    }
}
