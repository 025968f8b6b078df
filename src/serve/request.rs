//! Reading a `POST /v1/chat/completions` body into what the core needs ([`Ask`]), checking every
//! field on the way: the body's types are `body.rs`'s serde types, and each refusal is a
//! [`ServeError::BadRequest`] whose `param` names the field in OpenAI's form
//! (`messages[2].tool_call_id`, `tools[0].function.parameters`).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::ServeError;
use super::body::{self, Content, Message, ResponseFormat, Role, ToolChoice, read_body};
use super::json_budget::{CountError, MAX_OBJECTS, MAX_VALUES, count_values};
use crate::policy::{Choice, Entry, PastCall, ToolSpec, View};
use crate::protocol::ToolShape;

/// Most tool calls one answer may hold (`parallel_tool_calls`): the grammar and the reader allow
/// 1..=this many `<action>` blocks in a turn.
pub const MAX_PARALLEL_CALLS: usize = 8;
/// Most tools one request may declare (each becomes prompt text and grammar rules).
const MAX_TOOLS: usize = 128;
/// Most messages one request may hold.
const MAX_MESSAGES: usize = 4096;

/// A request with tools (or `response_format`), checked.
pub(crate) struct Ask {
    pub model: Option<String>,
    /// The client's system (and developer) messages, joined: the role's instructions.
    pub instructions: String,
    pub conversation: Vec<Entry>,
    pub tools: Vec<ToolSpec>,
    pub choice: Choice,
    pub parallel: bool,
    pub output_schema: Option<Value>,
    /// `output_schema` compiled once, off the async threads (with [`Ask::read`]).
    pub output_validator: Option<Arc<jsonschema::Validator>>,
    pub stream: bool,
    pub include_usage: bool,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub seed: Option<i64>,
}

fn bad(message: impl Into<String>, param: impl Into<String>) -> ServeError {
    ServeError::bad_request(message, param)
}

/// Whether a request body asks for what the core does (tools, or a JSON Schema answer): the
/// others pass through to the upstream unchanged.
pub(crate) fn wants_core(body: &Value) -> bool {
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let schema = body
        .get("response_format")
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        == Some("json_schema");
    tools || schema
}

/// Parse the body's bytes as JSON (malformed JSON is a 400 without a `param`). Its values are
/// counted first: a body of more than [`MAX_VALUES`] is a 400 before any `Value` is built, since
/// a `Value` takes many times the text's size (`json_budget.rs`).
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, ServeError> {
    let too_many = match count_values(bytes, MAX_VALUES, MAX_OBJECTS) {
        Err(CountError::TooMany) => Some(format!("{MAX_VALUES} JSON values")),
        Err(CountError::TooManyObjects) => Some(format!("{MAX_OBJECTS} JSON objects")),
        _ => None,
    };
    if let Some(what) = too_many {
        return Err(ServeError::BadRequest {
            message: format!("the request body holds more than {what}"),
            param: None,
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ServeError::BadRequest {
        message: format!("the request body is not valid JSON: {e}"),
        param: None,
    })?;
    if !value.is_object() {
        return Err(ServeError::BadRequest {
            message: "the request body must be a JSON object".into(),
            param: None,
        });
    }
    Ok(value)
}

impl Ask {
    /// The tools the model may call under this request's `tool_choice` (only the named one
    /// when a function is named), as the grammars take them.
    pub(crate) fn offered_tools(&self) -> Vec<ToolShape<'_>> {
        self.tools
            .iter()
            .filter(|t| match &self.choice {
                Choice::Named(n) => &t.name == n,
                _ => true,
            })
            .map(|t| ToolShape {
                name: &t.name,
                parameters: &t.parameters,
            })
            .collect()
    }

    /// Check a request body and read it: its fields' types first ([`read_body`], which names
    /// a field of the wrong type), then what types cannot say.
    pub(crate) fn read(body: &Value) -> Result<Ask, ServeError> {
        Self::from_body(read_body(body)?)
    }

    /// [`Ask::read`] of a body the caller gives up: its strings are moved, not copied (the
    /// Responses face's continuation, whose conversation can be long).
    pub(crate) fn read_owned(body: Value) -> Result<Ask, ServeError> {
        Self::from_body(read_body(body)?)
    }

    fn from_body(b: body::Body) -> Result<Ask, ServeError> {
        if b.n.is_some_and(|n| n != 1) {
            return Err(bad("only n = 1 is supported", "n"));
        }
        let tools = b.tools.unwrap_or_default();
        check_schema_costs(&tools, b.response_format.as_ref())?;
        let tools = read_tools(tools)?;
        let choice = read_choice(b.tool_choice, &tools)?;
        let (output_schema, output_validator) = read_response_format(b.response_format)?.unzip();
        let (instructions, conversation) = read_messages(b.messages)?;
        Ok(Ask {
            model: b.model,
            instructions,
            conversation,
            tools,
            choice,
            parallel: b.parallel_tool_calls.unwrap_or(true),
            output_schema,
            output_validator,
            stream: b.stream.unwrap_or(false),
            include_usage: b
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false),
            temperature: b.temperature,
            max_tokens: b.max_completion_tokens.or(b.max_tokens),
            seed: b.seed,
        })
    }

    /// The tool declared under `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// What the decision room's rules see of this request (`crate::policy`).
    pub(crate) fn view(&self) -> View<'_> {
        View::new(
            &self.instructions,
            &self.conversation,
            &self.tools,
            self.choice.clone(),
        )
    }
}

fn read_tools(list: Vec<body::Tool>) -> Result<Vec<ToolSpec>, ServeError> {
    if list.len() > MAX_TOOLS {
        return Err(bad(format!("at most {MAX_TOOLS} tools"), "tools"));
    }
    let mut out: Vec<ToolSpec> = Vec::with_capacity(list.len());
    for (i, t) in list.into_iter().enumerate() {
        let p = |f: &str| format!("tools[{i}].{f}");
        if t.kind.as_deref() != Some("function") {
            return Err(bad(
                "only tools of type \"function\" are supported",
                p("type"),
            ));
        }
        let f = t
            .function
            .ok_or_else(|| bad("a function tool needs a `function` object", p("function")))?;
        let name = f
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| bad("a tool needs a name", p("function.name")))?;
        if out.iter().any(|o| o.name == name) {
            return Err(bad(
                format!("the tool `{name}` is declared twice"),
                p("function.name"),
            ));
        }
        let parameters = match f.parameters {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(v @ Value::Object(_)) => v,
            Some(_) => {
                return Err(bad(
                    "the parameters must be a JSON Schema object",
                    p("function.parameters"),
                ));
            }
        };
        if parameters.get("type").is_some_and(|ty| ty != "object") {
            return Err(bad(
                "the parameters' schema must be of type \"object\"",
                p("function.parameters"),
            ));
        }
        let validator = crate::schema::compile(&parameters)
            .map_err(|e| bad(schema_refusal(&e), p("function.parameters")))?;
        out.push(ToolSpec {
            name,
            description: f.description.unwrap_or_default(),
            parameters,
            validator: Arc::new(validator),
        });
    }
    Ok(out)
}

fn read_choice(choice: Option<ToolChoice>, tools: &[ToolSpec]) -> Result<Choice, ServeError> {
    let choice = match choice {
        None => return Ok(Choice::Auto),
        Some(ToolChoice::Mode(s)) => match s.as_str() {
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            "none" => Choice::None,
            other => {
                return Err(bad(
                    format!(
                        "unknown tool_choice `{other}`: expected auto, required, none or a function"
                    ),
                    "tool_choice",
                ));
            }
        },
        Some(ToolChoice::Function { function }) => {
            let name = function.name;
            if !tools.iter().any(|t| t.name == name) {
                return Err(bad(
                    format!("tool_choice names `{name}`, which is not among the tools"),
                    "tool_choice.function.name",
                ));
            }
            Choice::Named(name)
        }
    };
    if tools.is_empty() && matches!(choice, Choice::Required) {
        return Err(bad("tool_choice `required` needs tools", "tool_choice"));
    }
    Ok(choice)
}

/// One cost of a request's schemas: how a schema is counted, the request's limit, what is counted.
type Cost = (fn(&Value) -> usize, usize, &'static str);

/// What compiling a request's schemas may cost, counted before any is compiled, over every
/// tool's parameters and `response_format` together: at most [`crate::schema::MAX_PATTERNS`]
/// regular expressions and [`crate::schema::MAX_SCHEMA_NODES`] subschemas for the request
/// (issue 44 item 2: 128 tools of 760 properties each cost +176 MiB to compile).
fn check_schema_costs(
    tools: &[body::Tool],
    format: Option<&ResponseFormat>,
) -> Result<(), ServeError> {
    let costs: [Cost; 2] = [
        (
            crate::schema::count_patterns,
            crate::schema::MAX_PATTERNS,
            "regular expressions (`pattern`, `patternProperties`)",
        ),
        (
            crate::schema::count_nodes,
            crate::schema::MAX_SCHEMA_NODES,
            "subschemas (JSON objects)",
        ),
    ];
    for (count, limit, what) in costs {
        let in_tools: usize = tools
            .iter()
            .filter_map(|t| t.function.as_ref()?.parameters.as_ref())
            .map(count)
            .sum();
        let in_format = format
            .and_then(|f| f.json_schema.as_ref()?.schema.as_ref())
            .map_or(0, count);
        let found = in_tools + in_format;
        if found <= limit {
            continue;
        }
        let param = if in_tools > 0 {
            "tools"
        } else {
            "response_format.json_schema.schema"
        };
        return Err(bad(
            format!(
                "the request's schemas hold {found} {what}; at most {limit} are compiled per request"
            ),
            param,
        ));
    }
    Ok(())
}

/// A schema's refusal in words: the validator's message, or the bound it went past.
fn schema_refusal(e: &crate::schema::SchemaError) -> String {
    match e {
        crate::schema::SchemaError::Invalid(_) => format!("not a valid JSON Schema: {e}"),
        _ => e.to_string(),
    }
}

/// A compiled schema and the schema itself.
type Compiled = (Value, Arc<jsonschema::Validator>);

fn read_response_format(format: Option<ResponseFormat>) -> Result<Option<Compiled>, ServeError> {
    let Some(format) = format else {
        return Ok(None);
    };
    match format.kind.as_deref() {
        Some("text") => Ok(None),
        Some("json_schema") => {
            let schema = format
                .json_schema
                .and_then(|j| j.schema)
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    bad(
                        "json_schema needs a `schema` object",
                        "response_format.json_schema.schema",
                    )
                })?;
            let validator = crate::schema::compile(&schema)
                .map_err(|e| bad(schema_refusal(&e), "response_format.json_schema.schema"))?;
            Ok(Some((schema, Arc::new(validator))))
        }
        Some("json_object") => {
            let schema = serde_json::json!({"type": "object"});
            let validator = crate::schema::compile(&schema)
                .map_err(|e| bad(schema_refusal(&e), "response_format"))?;
            Ok(Some((schema, Arc::new(validator))))
        }
        _ => Err(bad(
            "expected type text, json_object or json_schema",
            "response_format.type",
        )),
    }
}

/// The text of a message's `content`: a string, or text parts joined.
fn content_text(content: Option<Content>, param: &str) -> Result<String, ServeError> {
    match content {
        None => Ok(String::new()),
        Some(Content::Text(s)) => Ok(s),
        Some(Content::Parts(parts)) => {
            let mut out = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match part.text {
                    Some(t) => out.push_str(&t),
                    None => {
                        return Err(bad(
                            "only text content parts are supported",
                            format!("{param}[{j}]"),
                        ));
                    }
                }
            }
            Ok(out)
        }
    }
}

/// A past call's arguments: JSON text of an object (empty text: none), or an object.
fn call_arguments(
    arguments: Option<Value>,
    param: String,
) -> Result<Map<String, Value>, ServeError> {
    let refuse = || bad("arguments must be a JSON object's text", param.clone());
    match arguments {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str(&s) {
            Ok(Value::Object(o)) => Ok(o),
            _ => Err(refuse()),
        },
        Some(Value::Object(o)) => Ok(o),
        Some(_) => Err(refuse()),
    }
}

fn read_messages(messages: Option<Vec<Message>>) -> Result<(String, Vec<Entry>), ServeError> {
    let list = messages
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("`messages` must be a non-empty array", "messages"))?;
    if list.len() > MAX_MESSAGES {
        return Err(bad(format!("at most {MAX_MESSAGES} messages"), "messages"));
    }
    let count = list.len();
    let mut instructions: Vec<String> = Vec::new();
    let mut conversation: Vec<Entry> = Vec::new();
    // Call ids of the assistant messages so far, to the tool that made each call.
    let mut ids: HashMap<String, String> = HashMap::new();
    for (i, m) in list.into_iter().enumerate() {
        let p = |f: &str| format!("messages[{i}].{f}");
        let role = m
            .role
            .ok_or_else(|| bad("a message needs a role", p("role")))?;
        let text = content_text(m.content, &p("content"))?;
        match role {
            Role::System | Role::Developer => instructions.push(text),
            Role::User => conversation.push(Entry::Question(text)),
            Role::Assistant => {
                let reasoning = m.reasoning_content.filter(|r| !r.trim().is_empty());
                match m.tool_calls.filter(|c| !c.is_empty()) {
                    Some(calls) => {
                        let mut past = Vec::with_capacity(calls.len());
                        for (j, c) in calls.into_iter().enumerate() {
                            let cp = |f: &str| format!("messages[{i}].tool_calls[{j}].{f}");
                            let id =
                                c.id.ok_or_else(|| bad("a tool call needs an id", cp("id")))?;
                            let (name, arguments) = match c.function {
                                Some(body::CalledFunction {
                                    name: Some(name),
                                    arguments,
                                }) => (name, arguments),
                                _ => {
                                    return Err(bad(
                                        "a tool call needs a name",
                                        cp("function.name"),
                                    ));
                                }
                            };
                            let arguments = call_arguments(arguments, cp("function.arguments"))?;
                            ids.insert(id, name.clone());
                            past.push(PastCall { name, arguments });
                        }
                        conversation.push(Entry::Calls {
                            reasoning,
                            calls: past,
                        });
                    }
                    None => conversation.push(Entry::Answer { reasoning, text }),
                }
            }
            Role::Tool => {
                let id = m
                    .tool_call_id
                    .ok_or_else(|| bad("a tool message needs a tool_call_id", p("tool_call_id")))?;
                let name = ids.get(&id).ok_or_else(|| {
                    bad(
                        format!("tool_call_id `{id}` matches no earlier assistant tool call"),
                        p("tool_call_id"),
                    )
                })?;
                let result = (name.clone(), text);
                match conversation.last_mut() {
                    Some(Entry::Results(r)) => r.push(result),
                    _ => conversation.push(Entry::Results(vec![result])),
                }
            }
        }
    }
    if !matches!(conversation.first(), Some(Entry::Question(_))) {
        return Err(bad(
            "the first message after the system messages must be a user message",
            "messages",
        ));
    }
    if matches!(
        conversation.last(),
        Some(Entry::Answer { .. } | Entry::Calls { .. })
    ) {
        return Err(bad(
            "the last message must be a user or tool message",
            format!("messages[{}]", count - 1),
        ));
    }
    Ok((instructions.join("\n\n"), conversation))
}
