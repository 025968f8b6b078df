//! A request answered in the model's own format: the conversation rendered by its template,
//! the turn asked of `/completions` under the native grammar, read and validated as a protocol
//! turn is, corrected upstream at most `repairs` times.
//!
//! Reading: each `<tool_call>` block is handed to the protocol's reader as the JSON call it
//! holds (`<action>{"name": …, "arguments": …}</action>`, the `json_in_action` dialect), so
//! that binding, schema validation, dropped repeats and `tool_choice` are the protocol's own
//! (`read.rs`); a turn without a block is the answer, checked as a final answer is. A refused
//! turn stays in the conversation as the model wrote it, followed by the correction as a user
//! message.

use std::sync::Arc;

use serde_json::{Value, json};

use super::markers::Markers;
use super::{NativeFormat, tools_json};
use crate::llm::{Finish, LazyGrammar, Prompt, TurnGrammar, TurnRequest};
use crate::policy::{Choice, Entry};
use crate::protocol::truncate;
use crate::protocol::{NativeShape, TurnKind, native_grammar, parse_gbnf, read_turn_with};
use crate::serve::ServeError;
use crate::serve::answer::{answer as protocol_answer, client_reason, emit_answer};
use crate::serve::conversation::{self, RESULT_LIMIT};
use crate::serve::core::{Core, Trace};
use crate::serve::event::ServeEvent;
use crate::serve::read::{Read, Refusal, read};
use crate::serve::request::{Ask, MAX_PARALLEL_CALLS};
use crate::serve::thought::ThoughtMode;
use crate::shown::Outside;

/// The turn budget when the client sets none (as the protocol's).
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Answer `ask` in `native`'s format; a conversation its template cannot render is answered
/// in the protocol instead (or refused, when the format was asked for by name).
pub(crate) async fn answer(
    core: &Core<'_>,
    native: &NativeFormat,
    ask: &Ask,
    emit: &mut (dyn FnMut(ServeEvent) + Send),
    trace: &mut Trace,
) -> Result<(), ServeError> {
    let markers = native.template.markers();
    let tools: Vec<Value> = tools_json(ask).iter().map(|t| markers.value(t)).collect();
    let mut messages = messages(ask, markers);
    if let Err(e) = native.template.render(&messages, &tools) {
        if native.forced {
            return Err(ServeError::Upstream {
                reason: format!("the model's own tool format cannot be used: {e}"),
            });
        }
        tracing::warn!(error = %Outside(&e), "the chat template failed on this conversation: answered in the protocol");
        return protocol_answer(core, ask, emit, trace).await;
    }
    let role = conversation::role(ask)?;
    let model = native.model.as_ref();
    use crate::llm::Model;
    model.prepare().await;
    let wants_grammar = model.wants_grammar();
    let mut request = TurnRequest {
        temperature: ask.temperature,
        max_tokens: Some(ask.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        seed: ask.seed,
        grammar: wants_grammar.then(|| grammar(ask, false)).flatten(),
        // The degeneration guard is the `repeat` policy here too: switched off, it is off in
        // either format.
        keep_repetitions: !core.policies.on(crate::policy::Policy::Repeat),
        ..TurnRequest::default()
    };
    let may_fall_back = ask.choice == Choice::Auto && conversation::allows_calls(ask);
    let mut answer_only = false;
    let mut left = core.repairs + 1;
    let mut refused_before: Option<String> = None;
    let mut last_reason = String::new();
    while left > 0 {
        left -= 1;
        let prompt =
            native
                .template
                .render(&messages, &tools)
                .map_err(|e| ServeError::Upstream {
                    reason: format!("the model's own tool format cannot be used: {e}"),
                })?;
        request.prompt = Prompt::Text(prompt);
        trace.requests += 1;
        let result = model.turn(&request, &mut |_| {}).await.map_err(|e| {
            tracing::warn!(error = %Outside(&e), "the upstream failed");
            ServeError::Upstream {
                reason: client_reason(&e),
            }
        })?;
        trace.usage.add(result.usage);
        let text = result.text;
        match read_native(
            &text,
            &result.finish,
            ask,
            &role,
            answer_only,
            core.policies,
        ) {
            Ok(read) => {
                trace.turns.push((text, None));
                emit_answer(read, result.reasoning, trace.usage, emit);
                return Ok(());
            }
            Err(refusal) => {
                let message = core.redactor.redact_string(refusal.message);
                tracing::debug!(reason = %Outside(&message), "the upstream's native turn is corrected");
                let again = refused_before.as_deref() == Some(text.as_str());
                if may_fall_back && !answer_only && (refusal.answer_next || again || left == 0) {
                    answer_only = true;
                    left = left.max(1);
                    if wants_grammar {
                        request.grammar = grammar(ask, true);
                    }
                }
                trace.turns.push((text.clone(), Some(message.clone())));
                messages.push(json!({"role": "assistant", "content": text}));
                messages.push(json!({"role": "user", "content": message}));
                refused_before = Some(text);
                last_reason = message;
            }
        }
    }
    Err(ServeError::Upstream {
        reason: format!(
            "the upstream gave no usable turn in {} requests; the last was refused: {last_reason}",
            trace.requests
        ),
    })
}

/// The grammar of a native turn for `ask`; `None` when it does not read back.
fn grammar(ask: &Ask, answer_only: bool) -> Option<Arc<TurnGrammar>> {
    let tools = ask.offered_tools();
    let calls = !answer_only && conversation::allows_calls(ask);
    let shape = NativeShape {
        tools,
        max_calls: match (calls, ask.parallel) {
            (false, _) => 0,
            (true, true) => MAX_PARALLEL_CALLS,
            (true, false) => 1,
        },
        answer: !calls || ask.choice == Choice::Auto,
        output_schema: ask.output_schema.as_ref(),
    };
    let gbnf = native_grammar(&shape).to_gbnf();
    if let Err(e) = parse_gbnf(&gbnf) {
        tracing::warn!(error = %Outside(&e), "the native grammar failed its own check; the turn is not constrained");
        return None;
    }
    // Where the turn may call or answer, llama.cpp constrains it lazily from `<tool_call>` on,
    // as its own tool calling does: `<tool_call>` is one special token in the models that use
    // it, which a whole-turn grammar of the text `<tool_call>` masks (asked so, the Qwen 0.5B
    // could not open a block and explained its calls in prose instead).
    let lazy = (shape.max_calls > 0 && shape.answer)
        .then(|| {
            let calls = native_grammar(&NativeShape {
                answer: false,
                ..shape.clone()
            })
            .to_gbnf();
            parse_gbnf(&calls).is_ok().then(|| LazyGrammar {
                gbnf: calls,
                triggers: vec!["<tool_call>".into()],
            })
        })
        .flatten();
    Some(Arc::new(TurnGrammar {
        gbnf,
        lark: None,
        lazy,
    }))
}

/// The conversation as the template's messages (OpenAI's shapes, arguments as objects). Every
/// text in it is the client's: the template's `markers` are neutralised in all of them, and a
/// tool's result is cut as the protocol format cuts it (`RESULT_LIMIT`, head and tail kept).
pub(super) fn messages(ask: &Ask, markers: &Markers) -> Vec<Value> {
    let mut out = Vec::with_capacity(ask.conversation.len() + 1);
    if !ask.instructions.trim().is_empty() {
        out.push(json!({"role": "system", "content": markers.text(&ask.instructions)}));
    }
    let mut n = 0usize;
    for entry in &ask.conversation {
        match entry {
            Entry::Question(q) => out.push(json!({"role": "user", "content": markers.text(q)})),
            Entry::Answer { text, .. } => {
                out.push(json!({"role": "assistant", "content": markers.text(text)}))
            }
            Entry::Calls { calls, .. } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        n += 1;
                        let arguments = markers.value(&Value::Object(c.arguments.clone()));
                        json!({"id": format!("call_{n}"), "type": "function",
                               "function": {"name": markers.text(&c.name), "arguments": arguments}})
                    })
                    .collect();
                out.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
            }
            Entry::Results(results) => {
                for (name, content) in results {
                    let content = truncate(content, RESULT_LIMIT);
                    out.push(json!({"role": "tool", "name": markers.text(name),
                                    "content": markers.text(&content)}));
                }
            }
        }
    }
    out
}

/// Read a native turn: its `<tool_call>` blocks as calls, or the whole text as the answer.
pub(super) fn read_native(
    text: &str,
    finish: &Finish,
    ask: &Ask,
    role: &crate::agent::Role,
    answer_only: bool,
    policies: crate::policy::Policies,
) -> Result<Read, Refusal> {
    let as_protocol = match text.find("<tool_call>") {
        Some(first) => {
            let mut out = String::new();
            let before = text[..first].trim();
            if !before.is_empty() {
                out.push_str(&format!("<thought>{before}</thought>\n"));
            }
            let mut rest = &text[first..];
            while let Some(open) = rest.find("<tool_call>") {
                let body = &rest[open + "<tool_call>".len()..];
                match body.find("</tool_call>") {
                    Some(close) => {
                        out.push_str(&format!("<action>{}</action>\n", body[..close].trim()));
                        rest = &body[close + "</tool_call>".len()..];
                    }
                    None => {
                        out.push_str(&format!("<action>{}", body.trim()));
                        break;
                    }
                }
            }
            out
        }
        // A call written bare or in a fence (a server that took no grammar): the dialect
        // reader knows the shape.
        None => match dialect_call(text, ask) {
            Some(action) => format!("<action>{action}</action>"),
            None => {
                if let Some(name) = undeclared_call(text, ask) {
                    return Err(undeclared(&name, text, ask));
                }
                if *finish == Finish::Length {
                    format!("<final_answer>{}", text.trim())
                } else {
                    format!("<final_answer>{}</final_answer>", text.trim())
                }
            }
        },
    };
    // Corrections worded as before (`--thought` is the protocol format's). The native format
    // sends a call as the model wrote it (no `unsaid-optional`), so `answered-call` compares it
    // as written.
    read(
        &as_protocol,
        finish,
        ask,
        role,
        answer_only,
        ThoughtMode::Free,
        policies.without(crate::policy::Policy::UnsaidOptional),
    )
    .map_err(|refusal| Refusal {
        kept: text.to_owned(),
        ..refusal
    })
}

/// The call a text without `<tool_call>` holds as bare JSON (`{"name": …, "arguments": …}`
/// naming a declared tool), or as such JSON in a code fence anywhere in the text (the Qwen
/// models explain, then write "the JSON object for the function call" in a fence), in the
/// protocol's syntax: the JSON is read as the dialect reader reads it inside an `<action>`.
fn dialect_call(text: &str, ask: &Ask) -> Option<String> {
    let whole = text.trim();
    if whole.starts_with('{') {
        return json_call(whole, ask);
    }
    // The fences' bodies: the text between an opening fence's line and the next fence.
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let (_, body) = after.split_once('\n')?;
        let close = body.find("```")?;
        let json = body[..close].trim();
        if json.starts_with('{')
            && let Some(call) = json_call(json, ask)
        {
            return Some(call);
        }
        rest = &body[close + 3..];
    }
    None
}

/// The name of a function the text calls, as bare JSON or in a fence, that is not one of the
/// declared tools (the 1.5B's `calculate_area_of_triangle` when only a BMI tool was declared):
/// never passed to the client as the text of an answer.
fn undeclared_call(text: &str, ask: &Ask) -> Option<String> {
    let whole = text.trim();
    let mut bodies = vec![whole];
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some((_, body)) = after.split_once('\n') else {
            break;
        };
        let Some(close) = body.find("```") else {
            break;
        };
        bodies.push(body[..close].trim());
        rest = &body[close + 3..];
    }
    bodies.into_iter().find_map(|json| {
        let value: Value = serde_json::from_str(json).ok()?;
        let name = value.get("name")?.as_str()?;
        let arguments = value.get("arguments").or_else(|| value.get("parameters"))?;
        (arguments.is_object() || arguments.is_string())
            .then_some(name)
            .filter(|n| ask.tool(n).is_none())
            .map(str::to_owned)
    })
}

/// The refusal of a turn that calls the undeclared function `name`: under `auto` the model is
/// asked for a text answer next (it wanted a function the client does not have: no declared
/// tool fits); otherwise corrected as a call of an unknown tool.
fn undeclared(name: &str, text: &str, ask: &Ask) -> Refusal {
    let names: Vec<String> = ask.tools.iter().map(|t| t.name.clone()).collect();
    let auto = ask.choice == Choice::Auto;
    let message = if auto {
        format!(
            "There is no function named `{name}`; the only ones are {}. If none of them answers the question, answer it in text.",
            names.join(", ")
        )
    } else {
        crate::agent::correction::Correction::UnknownTool {
            name: name.to_owned(),
            closest: None,
            names,
        }
        .message()
    };
    Refusal {
        message,
        kept: text.to_owned(),
        answer_next: auto,
    }
}

/// `json` read as one call of a declared tool.
fn json_call(json: &str, ask: &Ask) -> Option<String> {
    let names: Vec<&str> = ask.tools.iter().map(|t| t.name.as_str()).collect();
    let turn = read_turn_with(&format!("<action>{json}</action>"), &names);
    let named = |action: &str| names.iter().any(|n| action.starts_with(&format!("{n}(")));
    match (turn.kind, turn.dialect, turn.action) {
        (TurnKind::Action, Some(_), Some(action)) if named(&action) => Some(action),
        _ => None,
    }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
