//! The answer's text passed on while the upstream is still writing it.
//!
//! The core reads a turn only once it is whole; this watcher reads the turn *so far* with the
//! same reader (`tagloop_protocol::read_turn_with`) as the deltas arrive, and decides when
//! what it has seen can no longer be taken back:
//!
//! * **Only an answer is passed on early**, and only when no correction can replace it: the
//!   request has no `response_format` (a schema answer must validate whole first) and its
//!   `tool_choice` allows an answer (`auto` or `none`; under `required` or a named function an
//!   answer is always corrected). An answer whose `<final_answer>` opened and holds text is
//!   then accepted by the core whatever follows (a plain answer is refused only when empty), so
//!   the watcher *commits* the turn: the thought goes out at once, then the answer's text as it
//!   grows.
//! * **Thoughts of a turn that is not committed are held**: the turn may still become a call
//!   that does not validate, and the client must see nothing of a turn that is corrected.
//! * **Tool calls are never passed on here**: a call is usable only once its arguments
//!   validated, and a turn is over when its call is closed (`</action>` is a stop). With
//!   parallel calls the core emits every call once the whole turn validated: the simplest
//!   honest rule, since a later call that fails would have the whole turn corrected.
//!
//! What is sent is always a prefix of what the core reads from the whole turn: the partial
//! reading is trimmed like the whole one, and text that a later byte could still change is held
//! back (an opened `<![CDATA[` section, a `<` with no `>` yet: a tag being written, a trailing
//! run of backticks: the end of a fence around the turn). The core sends the rest once the turn
//! is whole (`answer.rs`).
//!
//! Work is bounded: the turn so far is read again only after at least [`MIN_STEP`] new bytes
//! and at least an eighth of what was read last time, so a turn of `n` bytes costs about `9n`
//! bytes of reading whatever the size of its deltas.

use super::event::ServeEvent;
use super::request::Ask;
use crate::agent::Role;
use crate::policy::Choice;
use crate::protocol::{self, TurnKind};

/// The fewest new bytes before the turn so far is read again.
const MIN_STEP: usize = 32;

/// Whether an answer to `ask` may be passed on before its turn is whole.
pub(crate) fn answer_may_stream(ask: &Ask, role: &Role) -> bool {
    role.output_schema().is_none() && matches!(ask.choice, Choice::Auto | Choice::None)
}

/// What was committed and sent of one turn.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// The reasoning sent (the turn's `<think>` text and thoughts, composed as `read.rs` does).
    pub reasoning: String,
    /// The answer text sent.
    pub content: String,
}

/// Watches one upstream turn as it streams.
pub(crate) struct Live<'a> {
    /// Whether this request's answers may stream at all.
    enabled: bool,
    names: &'a [&'a str],
    /// The turn as the reader sees it, from the generated text (`<thought>` put before it in
    /// completions mode): the core's own `History::turn_text`.
    view: &'a (dyn Fn(&str) -> String + Send + Sync),
    /// The generated text so far.
    text: String,
    /// `text.len()` at the last reading.
    read_at: usize,
    /// Bytes read so far over every reading (the work, bounded by about `9n`).
    read_total: usize,
    /// Set once the turn is committed.
    sent: Option<Sent>,
}

impl<'a> Live<'a> {
    /// A watcher for one turn; `view` makes the text the core reads of the generated text.
    pub(crate) fn new(
        enabled: bool,
        names: &'a [&'a str],
        view: &'a (dyn Fn(&str) -> String + Send + Sync),
    ) -> Live<'a> {
        Live {
            enabled,
            names,
            view,
            text: String::new(),
            read_at: 0,
            read_total: 0,
            sent: None,
        }
    }

    /// What was committed and sent, when the turn was committed.
    pub(crate) fn sent(&self) -> Option<&Sent> {
        self.sent.as_ref()
    }

    /// Take in one delta of generated text; emit what became certain.
    pub(crate) fn push(&mut self, delta: &str, emit: &mut (dyn FnMut(ServeEvent) + Send)) {
        if !self.enabled || delta.is_empty() {
            return;
        }
        self.text.push_str(delta);
        let grown = self.text.len() - self.read_at;
        if grown < MIN_STEP.max(self.read_at / 8) {
            return;
        }
        self.read_at = self.text.len();
        self.read_total += self.read_at;
        let turn = protocol::read_turn_with(&(self.view)(&self.text), self.names);
        if turn.kind != TurnKind::Final {
            return;
        }
        let answer = turn.final_text.as_deref().unwrap_or_default();
        let safe = certain(answer);
        if self.sent.is_none() {
            if safe.trim().is_empty() {
                return;
            }
            let reasoning = match (turn.reasoning, turn.thought) {
                (Some(r), Some(t)) => format!("{r}\n\n{t}"),
                (r, t) => r.or(t).unwrap_or_default(),
            };
            if !reasoning.is_empty() {
                emit(ServeEvent::Reasoning(reasoning.clone()));
            }
            self.sent = Some(Sent {
                reasoning,
                content: String::new(),
            });
        }
        if let Some(sent) = &mut self.sent
            && let Some(more) = safe.strip_prefix(sent.content.as_str())
            && !more.is_empty()
        {
            emit(ServeEvent::Content(more.to_string()));
            sent.content.push_str(more);
        }
    }
}

/// The part of a partly written answer that no later byte can change in the whole reading.
fn certain(answer: &str) -> &str {
    // A CDATA section is unwrapped only when it is the whole answer: unknown until the end.
    const CDATA: &str = "<![CDATA[";
    if answer.starts_with(CDATA) || CDATA.starts_with(answer) {
        return "";
    }
    let mut end = answer.len();
    // A `<` not yet followed by `>`: maybe a `<think>` the reader will take out.
    if let Some(lt) = answer.rfind('<')
        && !answer[lt..].contains('>')
    {
        end = lt;
    }
    // Backticks at the end: maybe the closing fence of a fenced turn, which the reader drops.
    answer[..end].trim_end_matches('`').trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_back_text_is_what_a_later_byte_could_change() {
        assert_eq!(certain("Paris is"), "Paris is");
        assert_eq!(certain("Paris <thi"), "Paris");
        assert_eq!(certain("a <b> c"), "a <b> c");
        assert_eq!(certain("done\n``"), "done");
        assert_eq!(certain("<![CDA"), "");
        assert_eq!(certain("<![CDATA[x"), "");
    }

    /// Feed `turn` in `step`-byte deltas; the events sent and the bytes read.
    fn feed_counting(turn: &str, step: usize) -> (Vec<ServeEvent>, usize) {
        let names = ["get_weather"];
        let view = |g: &str| g.to_string();
        let mut live = Live::new(true, &names, &view);
        let mut events = Vec::new();
        let mut i = 0;
        while i < turn.len() {
            let mut j = (i + step).min(turn.len());
            while !turn.is_char_boundary(j) {
                j += 1;
            }
            live.push(&turn[i..j], &mut |e| events.push(e));
            i = j;
        }
        (events, live.read_total)
    }

    fn feed(turn: &str, step: usize) -> Vec<ServeEvent> {
        feed_counting(turn, step).0
    }

    #[test]
    fn a_long_answer_in_tiny_deltas_is_read_a_bounded_number_of_times() {
        let answer = "word ".repeat(40_000);
        let turn = format!("<thought>Long.</thought><final_answer>{answer}");
        let (events, read) = feed_counting(&turn, 2);
        // Every reading at least an eighth longer than the last: about 9 times the turn in
        // all, where one reading per delta would be 100 000 readings of up to 200 kB.
        assert!(
            read <= 10 * turn.len(),
            "{read} bytes read for {}",
            turn.len()
        );
        let content: usize = events
            .iter()
            .map(|e| match e {
                ServeEvent::Content(c) => c.len(),
                _ => 0,
            })
            .sum();
        assert!(content > answer.len() * 8 / 10, "{content}");
    }

    #[test]
    fn an_answer_streams_after_its_thought_and_a_call_sends_nothing() {
        let answer = "The capital of France is Paris, a city on the Seine, and it has been the capital for a long time.";
        let turn = format!("<thought>Known.</thought><final_answer>{answer}");
        let events = feed(&turn, 3);
        assert_eq!(events[0], ServeEvent::Reasoning("Known.".into()));
        let content: String = events[1..]
            .iter()
            .map(|e| match e {
                ServeEvent::Content(c) => c.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(events.len() > 2, "sent in several pieces: {events:?}");
        assert!(
            answer.starts_with(&content) && !content.is_empty(),
            "{content}"
        );

        let call = r#"<thought>I look it up, and then I answer the question about the weather.</thought><action>get_weather(city="Paris")"#;
        assert_eq!(feed(call, 3), vec![]);
    }
}
