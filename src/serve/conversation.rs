//! The client's messages as tagloop's protocol: the system messages become the role's
//! instructions inside tagloop's system prompt (or the completions document), the first user
//! message the `<question>`, assistant `tool_calls` `<action>` blocks, `tool` messages one
//! `<observation>` (several results of one turn share it, each labelled with its tool), and an
//! assistant's text answer a `<final_answer>`. The result is the history an agent run would
//! have at this point, so the upstream continues it exactly as it continues a run.

use serde_json::{Map, Value};

use super::ServeError;
use super::request::Ask;
use super::thought::ThoughtMode;
use crate::agent::Role;
use crate::agent::history::History;
use crate::llm::Api;
use crate::policy::{Entry, PastCall};
use crate::prompt::{SystemInput, Templates, ToolDoc};
use crate::protocol::{self, render_observation};

/// Most bytes of one tool result shown to the model (the rest is cut with a visible marker, as
/// in a run).
pub(crate) const RESULT_LIMIT: usize = 16 * 1024;
/// The step budget the system prompt states (the client, not tagloop, decides when to stop; the
/// prompt needs a number).
const STATED_STEPS: u32 = 10;
/// Said to the model when a turn may hold several calls.
const PARALLEL_NOTE: &str = "When the task needs several independent tool calls, write one <action> block per call in one turn, one after another, then stop. Never write the same call twice.";

/// `tagloop serve`'s system prompt: the run's, without its one-call-per-turn rule (see the
/// template's header).
const SYSTEM_TEMPLATE: &str = include_str!("../../prompts/serve_system.j2");
/// `tagloop serve`'s completions document: every task lists its tools, and the worked tasks
/// show both a call and a direct answer with one made-up tool (see the template's header).
const COMPLETION_TEMPLATE: &str = include_str!("../../prompts/serve_completion.j2");

/// The templates serve renders requests with: its own system and completion templates, the
/// run's question template. `tagloop run` keeps the built-in ones unchanged.
pub(crate) fn templates() -> Result<Templates, ServeError> {
    Templates::from_sources(
        SYSTEM_TEMPLATE.into(),
        crate::prompt::QUESTION_TEMPLATE.into(),
        COMPLETION_TEMPLATE.into(),
    )
    .map_err(|e| ServeError::Config(format!("serve's templates: {e}")))
}

/// The role the request implies: the client's instructions, and its `response_format` schema.
pub(crate) fn role(ask: &Ask) -> Result<Role, ServeError> {
    let mut instructions = ask.instructions.trim().to_string();
    if ask.parallel && allows_calls(ask) {
        if !instructions.is_empty() {
            instructions.push_str("\n\n");
        }
        instructions.push_str(PARALLEL_NOTE);
    }
    let role = Role::new("a helpful assistant", instructions);
    match (&ask.output_schema, &ask.output_validator) {
        (Some(schema), Some(validator)) => {
            Ok(role.with_compiled_output_schema(schema.clone(), validator.clone()))
        }
        (Some(schema), None) => role.with_output_schema(schema.clone()).map_err(|e| {
            ServeError::bad_request(e.to_string(), "response_format.json_schema.schema")
        }),
        (None, _) => Ok(role),
    }
}

/// Whether `tool_choice` leaves room for a call.
pub(crate) fn allows_calls(ask: &Ask) -> bool {
    !matches!(ask.choice, crate::policy::Choice::None) && !ask.tools.is_empty()
}

/// The history the upstream continues. Under [`ThoughtMode::None`] the prompt teaches no
/// thought, and a past turn shows one only where the client sent its reasoning.
pub(crate) fn history(
    ask: &Ask,
    role: &Role,
    (api, thought): (Api, ThoughtMode),
    templates: &Templates,
) -> Result<History, ServeError> {
    let docs: Vec<ToolDoc> = ask
        .tools
        .iter()
        .map(|t| ToolDoc::new(&t.name, &t.description, &t.parameters))
        .collect();
    let input = SystemInput {
        role_name: role.name(),
        instructions: role.instructions(),
        output_schema: role.output_schema(),
        tools: &docs,
        max_steps: STATED_STEPS,
        environment: &[],
        thought: thought.taught(),
        // Serve's own templates show a result without a header (its observations are the
        // client's); they do not read the variable.
        observation_header: false,
    };
    let template = |e: crate::prompt::PromptError| ServeError::Config(e.to_string());
    let system = templates.system(&input).map_err(template)?;
    let taught = thought.taught();
    let mut entries = ask.conversation.iter();
    let first = match entries.next() {
        Some(Entry::Question(q)) => q,
        _ => {
            return Err(ServeError::bad_request(
                "the first message after the system messages must be a user message",
                "messages",
            ));
        }
    };
    let question = templates.question(first, &[]).map_err(template)?;
    let mut h = History::start(api, templates, &input, &system, &question).map_err(template)?;
    for entry in entries {
        match entry {
            Entry::Question(q) => h.push_user(&templates.question(q, &[]).map_err(template)?),
            Entry::Answer { reasoning, text } => {
                let said = reasoning
                    .clone()
                    .or(taught.then(|| "I can answer now.".into()));
                let mut turn = past_thought(said);
                turn.push_str(&format!("<final_answer>{text}</final_answer>"));
                h.push_turn(&turn);
            }
            Entry::Calls { reasoning, calls } => {
                let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
                let said = reasoning
                    .clone()
                    .or(taught.then(|| format!("I call {}.", names.join(", "))));
                let mut turn = past_thought(said);
                for (i, c) in calls.iter().enumerate() {
                    if i > 0 {
                        turn.push('\n');
                    }
                    turn.push_str("<action>");
                    turn.push_str(&render_call(c));
                    turn.push_str("</action>");
                }
                h.push_turn(&turn);
            }
            Entry::Results(results) => h.push_user(&observation(results)),
        }
    }
    Ok(h)
}

/// A past turn's thought and the newline after it, or nothing where there is none.
fn past_thought(said: Option<String>) -> String {
    match said {
        Some(t) => format!("<thought>{}</thought>\n", protocol::neutralise(&t)),
        None => String::new(),
    }
}

/// One observation for the results of one turn's calls: a lone result as it is, several each
/// under the name of the tool that made it (in the order the client sent them).
fn observation(results: &[(String, String)]) -> String {
    if let [(_, text)] = results {
        return render_observation(text, RESULT_LIMIT);
    }
    let body: Vec<String> = results
        .iter()
        .map(|(name, text)| {
            format!(
                "Result of {name}:\n{}",
                protocol::truncate(text, RESULT_LIMIT)
            )
        })
        .collect();
    render_observation(&body.join("\n\n"), RESULT_LIMIT * results.len().max(1))
}

/// Whether `s` can be written as an argument name (`name=value`).
fn is_arg_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// A past call in tagloop's action syntax: `name(key=value, …)` with JSON values (the action
/// grammar reads JSON strings, numbers, literals, arrays and objects as they are); a call with
/// an argument name that is not an identifier is written as one object, which binding spreads.
pub(crate) fn render_call(call: &PastCall) -> String {
    render_args(&call.name, &call.arguments)
}

fn render_args(name: &str, args: &Map<String, Value>) -> String {
    if !args.keys().all(|k| is_arg_name(k)) {
        return format!("{name}({})", Value::Object(args.clone()));
    }
    let parts: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_past_call_reads_back_as_the_same_arguments() {
        let args: Map<String, Value> =
            serde_json::from_str(r#"{"city": "Paris \"x\"\n", "days": 3, "tags": ["a"]}"#).unwrap();
        let text = render_args("weather", &args);
        let call = protocol::parse_action(&text).unwrap();
        let schema = serde_json::json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array"}}});
        assert_eq!(protocol::bind(&call.args, &schema).unwrap(), args);
    }

    #[test]
    fn serve_templates_compile() {
        templates().unwrap();
    }

    fn input(thought: bool) -> SystemInput<'static> {
        SystemInput {
            role_name: "a helpful assistant",
            instructions: "Answer briefly.",
            output_schema: None,
            tools: &[],
            max_steps: STATED_STEPS,
            environment: &[],
            thought,
            observation_header: true,
        }
    }

    /// `text` without its `<thought>` lines, the line that teaches the thought said without it.
    fn without_thoughts(text: &str, taught: &str, untaught: &str) -> String {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("<thought>"))
            .collect();
        lines.join("\n").replace(taught, untaught)
    }

    #[test]
    fn without_a_thought_the_prompts_are_the_same_but_for_their_thoughts() {
        let t = templates().unwrap();
        let [free, none] = [true, false].map(|on| t.system(&input(on)).unwrap());
        assert!(free.contains("<thought>"), "{free}");
        assert!(!none.contains("<thought>"), "{none}");
        let taught =
            "Write your reasoning for this step in a <thought> block, then exactly one of:";
        let expected = without_thoughts(&free, taught, "Write exactly one of:");
        assert_eq!(none.trim_end(), expected.trim_end());
        // The completions document opens no thought either: the turn starts at its decision.
        let question = "<question>\nWeather in Paris?\n</question>";
        let [free, none] = [true, false].map(|on| t.completion(&input(on), "", question).unwrap());
        assert!(free.ends_with("</question>\n<thought>"), "{free}");
        assert!(none.ends_with("</question>\n"), "{none}");
        assert!(!none.contains("<thought>"), "{none}");
        let taught = "Each turn is one short <thought>, then either";
        let expected = without_thoughts(&free, taught, "Each turn is either");
        assert_eq!(none.trim_end(), expected.trim_end());
    }

    #[test]
    fn odd_argument_names_go_as_one_object() {
        let args: Map<String, Value> = serde_json::from_str(r#"{"a-b": 1}"#).unwrap();
        assert_eq!(render_args("t", &args), r#"t({"a-b":1})"#);
    }
}
