//! The conversation as the model sees it, kept in both shapes: chat messages, and (for
//! `/completions`) one growing text that is only ever appended to.

use serde_json::Value;

use crate::llm::{Message, Prompt, Role, Usage};
use crate::prompt::{PromptError, SystemInput, Templates};

use super::Api;

/// The opened block the completions text ends in; the model's turn continues it.
pub(crate) const OPEN_THOUGHT: &str = "<thought>";

/// The history of one run.
#[derive(Debug, Clone)]
pub(crate) struct History {
    api: Api,
    messages: Vec<Message>,
    /// Completions mode only: the whole text so far.
    text: String,
}

impl History {
    /// No messages yet (a run that could not start keeps this).
    pub(crate) fn empty(api: Api) -> Self {
        History {
            api,
            messages: Vec::new(),
            text: String::new(),
        }
    }

    /// Start with the system prompt and the first user message.
    pub(crate) fn start(
        api: Api,
        templates: &Templates,
        input: &SystemInput<'_>,
        system: &str,
        question: &str,
    ) -> Result<Self, PromptError> {
        let text = match api {
            Api::Chat => String::new(),
            Api::Completions => templates.completion(input, system, question)?,
        };
        Ok(History {
            api,
            messages: vec![
                Message::new(Role::System, system),
                Message::new(Role::User, question),
            ],
            text,
        })
    }

    /// Rebuild from restored messages (system, question, then turns and observations).
    pub(crate) fn restore(
        api: Api,
        templates: &Templates,
        input: &SystemInput<'_>,
        messages: Vec<Message>,
    ) -> Result<Self, PromptError> {
        let mut it = messages.into_iter();
        let system = it.next().map(|m| m.content).unwrap_or_default();
        let question = it.next().map(|m| m.content).unwrap_or_default();
        let mut h = History::start(api, templates, input, &system, &question)?;
        for m in it {
            match m.role {
                Role::Assistant => h.push_turn(&m.content),
                _ => h.push_user(&m.content),
            }
        }
        Ok(h)
    }

    /// The messages so far.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The prompt for the next turn.
    pub(crate) fn prompt(&self) -> Prompt {
        match self.api {
            Api::Chat => Prompt::Chat(self.messages.clone()),
            Api::Completions => Prompt::Text(self.text.clone()),
        }
    }

    /// The prompt for continuing a turn the model has already written `partial` of.
    pub(crate) fn prompt_with_partial(&self, partial: &str) -> Prompt {
        match self.api {
            Api::Chat => {
                let mut m = self.messages.clone();
                m.push(Message::new(Role::Assistant, partial));
                Prompt::Chat(m)
            }
            Api::Completions => Prompt::Text(format!("{}{partial}", self.text)),
        }
    }

    /// The text the turn reader should see for what the model generated: in completions mode the
    /// prompt ended in an opened `<thought>`, which belongs to the turn.
    pub(crate) fn turn_text(&self, generated: &str) -> String {
        match self.api {
            Api::Completions if !starts_with_tag(generated) => format!("{OPEN_THOUGHT}{generated}"),
            _ => generated.to_string(),
        }
    }

    /// Append the model's turn (as [`History::turn_text`] gave it, cut to what the history keeps).
    pub(crate) fn push_turn(&mut self, kept: &str) {
        if self.api == Api::Completions {
            self.text
                .push_str(kept.strip_prefix(OPEN_THOUGHT).unwrap_or(kept));
        }
        self.messages.push(Message::new(Role::Assistant, kept));
    }

    /// Append what the runtime says (an observation, or a follow-up question when continuing).
    pub(crate) fn push_user(&mut self, content: &str) {
        if self.api == Api::Completions {
            self.text.push('\n');
            self.text.push_str(content);
            self.text.push('\n');
            self.text.push_str(OPEN_THOUGHT);
        }
        let past_question = self.messages.len() > 2;
        match self.messages.last_mut() {
            // Two user messages in a row (a follow-up after an observation) share one message.
            Some(last) if last.role == Role::User && past_question => {
                last.content.push_str("\n\n");
                last.content.push_str(content);
            }
            _ => self.messages.push(Message::new(Role::User, content)),
        }
    }
}

fn starts_with_tag(s: &str) -> bool {
    let t = s.trim_start().as_bytes();
    let starts =
        |tag: &str| t.len() >= tag.len() && t[..tag.len()].eq_ignore_ascii_case(tag.as_bytes());
    starts("<thought") || starts("<think") || starts("<action") || starts("<final_answer")
}

/// What a run restores from a transcript to go on from its last complete step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    /// The messages up to the last complete step.
    pub messages: Vec<crate::llm::Message>,
    /// Steps taken.
    pub steps: u32,
    /// Model requests counted in the outcome.
    pub llm_calls: u32,
    /// Every model request made, continuations included (a scripted model resumes from here).
    pub requests: u32,
    /// Tools used.
    pub tools_used: Vec<String>,
    /// Usage so far.
    pub usage: Usage,
    /// How the last run in the transcript ended, if it did (`ok`, `max_steps`, …).
    pub finished: Option<String>,
    /// A new user message to add before going on.
    pub message: Option<String>,
    /// The task of the session.
    pub task: String,
    /// The `meta` of the first `run_started` record (the CLI options of the original run).
    pub meta: Value,
}

impl Resume {
    /// Restore from transcript records: messages up to the last `step_completed` or `finished`
    /// record; anything after it (a step cut off by a kill) is dropped and done again.
    pub fn from_records(records: &[Value]) -> Result<Resume, String> {
        let mut resume = Resume::default();
        let mut pending: Vec<Message> = Vec::new();
        let mut requests_pending = 0u32;
        let mut started = false;
        for r in records {
            match r.get("type").and_then(Value::as_str) {
                Some("run_started") if !started => {
                    resume.task = r
                        .get("task")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    resume.meta = r.get("meta").cloned().unwrap_or(Value::Null);
                    started = true;
                }
                Some("run_started") => {
                    // A later run (`continue`) goes on from the last commit: what an earlier run
                    // left uncommitted (a step cut off by a kill) was done again, not kept. The
                    // first two messages (system prompt, task) stay if nothing was committed yet.
                    if resume.messages.is_empty() {
                        pending.truncate(2);
                    } else {
                        pending.clear();
                    }
                    requests_pending = 0;
                    if let Some(meta) = r.get("meta").filter(|m| !m.is_null()) {
                        resume.meta = meta.clone();
                    }
                }
                Some("message") => {
                    let m: Message =
                        serde_json::from_value(r.get("message").cloned().unwrap_or(Value::Null))
                            .map_err(|e| format!("a message record is malformed: {e}"))?;
                    pending.push(m);
                }
                Some("turn_finished") => requests_pending += 1,
                Some("step_completed") => {
                    resume.messages.append(&mut pending);
                    resume.steps = r.get("steps").and_then(Value::as_u64).unwrap_or(0) as u32;
                    resume.llm_calls =
                        r.get("llm_calls").and_then(Value::as_u64).unwrap_or(0) as u32;
                    resume.tools_used =
                        serde_json::from_value(r.get("tools_used").cloned().unwrap_or_default())
                            .unwrap_or_default();
                    resume.usage =
                        serde_json::from_value(r.get("usage").cloned().unwrap_or_default())
                            .unwrap_or_default();
                    resume.requests += requests_pending;
                    requests_pending = 0;
                    resume.finished = None;
                }
                Some("finished") => {
                    resume.messages.append(&mut pending);
                    resume.requests += requests_pending;
                    requests_pending = 0;
                    let o = r.get("outcome").cloned().unwrap_or_default();
                    resume.steps = o
                        .get("steps")
                        .and_then(Value::as_u64)
                        .unwrap_or(resume.steps as u64) as u32;
                    resume.llm_calls =
                        o.get("llm_calls")
                            .and_then(Value::as_u64)
                            .unwrap_or(resume.llm_calls as u64) as u32;
                    if let Ok(t) =
                        serde_json::from_value(o.get("tools_used").cloned().unwrap_or_default())
                    {
                        resume.tools_used = t;
                    }
                    if let Ok(u) =
                        serde_json::from_value(o.get("usage").cloned().unwrap_or_default())
                    {
                        resume.usage = u;
                    }
                    resume.finished = o.get("status").and_then(Value::as_str).map(str::to_string);
                }
                _ => {}
            }
        }
        if !started {
            return Err("the transcript has no run_started record".into());
        }
        if resume.messages.len() < 2 {
            // Killed before the first step completed: start over from the system prompt and task.
            resume.messages = pending.into_iter().take(2).collect();
        }
        if resume.messages.len() < 2 {
            return Err("the transcript ends before the task was recorded".into());
        }
        Ok(resume)
    }
}
