//! A Responses request's `tools`, `tool_choice` and `text.format` as the chat request's
//! `tools`, `tool_choice` and `response_format`, which the shared reading checks (schemas
//! compiled within the same bounds, names unique, the named tool declared).
//!
//! * a `function` tool (flat: `name`, `description`, `parameters`) is a function tool;
//! * a `custom` (freeform) tool, whose input is one string, is a function tool of one string
//!   argument, [`CUSTOM_ARGUMENT`]; its calls go back as `custom_tool_call` items. The grammar
//!   a custom tool may carry (`format: grammar`) is not applied: its input is any string;
//! * a `namespace` (a named group of client-run tools, as Codex CLI sends its MCP servers' and
//!   its sub-agents' tools) is its tools, each as above under the name [`flat_name`] gives it
//!   (`mcp__docs__search`), since the upstream knows one flat list of names; its calls go back
//!   with the tool's own `name` and the `namespace` beside it, as OpenAI answers them;
//! * any other type (`web_search`, `file_search`, `computer_use_preview`, `code_interpreter`,
//!   `image_generation`, `mcp`, `local_shell`, …) is a tool that OpenAI's servers run, which
//!   serve cannot: it is left out, with a warning in the response and the log, and the request
//!   is answered with the others.

use serde_json::{Value, json};

use super::items::{CUSTOM_ARGUMENT, flat_name};
use crate::serve::ServeError;

fn bad(path: &str, message: impl std::fmt::Display) -> ServeError {
    ServeError::bad_request(format!("{path}: {message}"), path)
}

/// The tools whose calls go out otherwise than as a plain `function_call`, by the names the
/// upstream knows them by.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CallNames {
    /// The custom (freeform) tools: their calls are `custom_tool_call` items.
    pub custom: Vec<String>,
    /// The tools of a namespace, as (flat name, namespace, the tool's own name): their calls
    /// carry the own name and the namespace.
    pub namespaced: Vec<(String, String, String)>,
}

impl CallNames {
    /// The namespace and own name of the tool the upstream knows as `flat`, if it is in one.
    pub(crate) fn namespace_of(&self, flat: &str) -> Option<(&str, &str)> {
        self.namespaced
            .iter()
            .find(|(f, _, _)| f == flat)
            .map(|(_, ns, name)| (ns.as_str(), name.as_str()))
    }
}

/// The tools read.
#[derive(Default)]
pub(crate) struct Tools {
    /// As chat function tools.
    pub chat: Vec<Value>,
    /// As the response echoes them (the kept ones, as given: a namespace once).
    pub echo: Vec<Value>,
    /// For each echoed tool, its index in the request's `tools`.
    pub echo_index: Vec<usize>,
    /// The tools whose calls are not plain function calls.
    pub names: CallNames,
    /// What was left out, in words.
    pub warnings: Vec<String>,
    /// For each chat tool, its index in the request's `tools` (to name it in a refusal).
    pub index: Vec<usize>,
}

/// Read `tools`.
pub(crate) fn read_tools(list: Vec<Value>) -> Result<Tools, ServeError> {
    let mut out = Tools::default();
    for (i, tool) in list.into_iter().enumerate() {
        let path = format!("tools[{i}]");
        match kind_of(&tool) {
            "function" | "custom" => {
                let echo = read_one(&tool, &path, i, None, &mut out)?;
                out.echo.push(echo);
                out.echo_index.push(i);
            }
            "namespace" => {
                let namespace = name_of(&tool, &path)?;
                let members = tool.get("tools").and_then(Value::as_array);
                let members = members.ok_or_else(|| bad(&format!("{path}.tools"), "must be an array"))?;
                for (j, member) in members.iter().enumerate() {
                    let path = format!("{path}.tools[{j}]");
                    match kind_of(member) {
                        "function" | "custom" => {
                            read_one(member, &path, i, Some(&namespace), &mut out)?;
                        }
                        other => out.warnings.push(format!(
                            "{path}: a tool of type `{other}` in a namespace is not served; it was left out"
                        )),
                    }
                }
                out.echo.push(tool);
                out.echo_index.push(i);
            }
            "" => return Err(bad(&format!("{path}.type"), "a tool needs a type")),
            other => out.warnings.push(format!(
                "{path}: the built-in tool `{other}` is run by OpenAI's servers, not by this endpoint; it was left out"
            )),
        }
    }
    Ok(out)
}

fn kind_of(tool: &Value) -> &str {
    tool.get("type").and_then(Value::as_str).unwrap_or_default()
}

fn name_of(tool: &Value, path: &str) -> Result<String, ServeError> {
    tool.get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| bad(&format!("{path}.name"), "a tool needs a name"))
}

/// One `function` or `custom` tool (of `namespace`, if in one) as a chat function tool, added
/// to `out`; returns it as the response echoes it.
fn read_one(
    tool: &Value,
    path: &str,
    index: usize,
    namespace: Option<&str>,
    out: &mut Tools,
) -> Result<Value, ServeError> {
    let own = name_of(tool, path)?;
    let name = match namespace {
        Some(ns) => {
            let flat = flat_name(ns, &own);
            out.names
                .namespaced
                .push((flat.clone(), ns.to_string(), own));
            flat
        }
        None => own,
    };
    let description = tool.get("description").cloned().unwrap_or(json!(""));
    let (parameters, echo) = if kind_of(tool) == "custom" {
        out.names.custom.push(name.clone());
        let parameters = json!({"type": "object",
            "properties": {CUSTOM_ARGUMENT: {"type": "string",
                "description": "The tool's whole input, as free text."}},
            "required": [CUSTOM_ARGUMENT], "additionalProperties": false});
        (parameters, tool.clone())
    } else {
        let parameters = tool.get("parameters").cloned().unwrap_or(Value::Null);
        (parameters, echo_function(tool))
    };
    out.chat.push(json!({"type": "function", "function": {
        "name": name, "description": description, "parameters": parameters}}));
    out.index.push(index);
    Ok(echo)
}

/// A function tool as the response lists it: every field there, `null` where not given.
fn echo_function(tool: &Value) -> Value {
    let field = |k: &str| tool.get(k).cloned().unwrap_or(Value::Null);
    json!({"type": "function", "name": field("name"), "description": field("description"),
           "parameters": field("parameters"), "strict": field("strict")})
}

/// `tool_choice` as the chat request's, and as the response echoes it. A choice of a built-in
/// tool, left out, is `auto` with a warning; so is `required` when every tool was left out.
pub(crate) fn read_choice(
    choice: Option<Value>,
    tools: &mut Tools,
) -> Result<(Value, Value), ServeError> {
    let Some(choice) = choice.filter(|c| !c.is_null()) else {
        return Ok((Value::Null, json!("auto")));
    };
    if let Some(mode) = choice.as_str() {
        if mode == "required" && tools.chat.is_empty() && !tools.warnings.is_empty() {
            tools
                .warnings
                .push("tool_choice: `required` with no tool left is `auto`".into());
            return Ok((json!("auto"), json!("auto")));
        }
        return Ok((json!(mode), choice));
    }
    let kind = choice
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = choice.get("name").and_then(Value::as_str);
    match (kind, name) {
        ("function" | "custom", Some(own)) => {
            let name = match choice.get("namespace").and_then(Value::as_str) {
                Some(ns) => flat_name(ns, own),
                None => own.to_string(),
            };
            Ok((
                json!({"type": "function", "function": {"name": name}}),
                json!({"type": "function", "name": own}),
            ))
        }
        ("function" | "custom", None) => Err(bad("tool_choice.name", "is required")),
        ("allowed_tools", _) => allowed(&choice, tools),
        ("", _) => Err(bad(
            "tool_choice",
            "must be a mode or an object with a type",
        )),
        (other, _) => {
            tools.warnings.push(format!(
                "tool_choice: the built-in tool `{other}` is not run by this endpoint; `auto` was used"
            ));
            Ok((json!("auto"), json!("auto")))
        }
    }
}

/// `allowed_tools`: only the listed tools are offered, under its `mode`.
fn allowed(choice: &Value, tools: &mut Tools) -> Result<(Value, Value), ServeError> {
    let names: Vec<String> = choice
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("tool_choice.tools", "must be an array"))?
        .iter()
        .filter_map(|t| {
            let name = t.get("name").and_then(Value::as_str)?;
            Some(match t.get("namespace").and_then(Value::as_str) {
                Some(ns) => flat_name(ns, name),
                None => name.to_string(),
            })
        })
        .collect();
    let keep: Vec<bool> = tools
        .chat
        .iter()
        .map(|t| names.iter().any(|n| t["function"]["name"] == n.as_str()))
        .collect();
    let mut kept = keep.iter().copied();
    tools.chat.retain(|_| kept.next().unwrap_or(false));
    let mut kept = keep.iter().copied();
    tools.index.retain(|_| kept.next().unwrap_or(false));
    // A tool echoed (a namespace: once for all of its tools) stays while any of its tools does.
    let echoed: Vec<bool> = tools
        .echo_index
        .iter()
        .map(|i| tools.index.contains(i))
        .collect();
    let mut kept = echoed.iter().copied();
    tools.echo.retain(|_| kept.next().unwrap_or(false));
    let mut kept = echoed.iter().copied();
    tools.echo_index.retain(|_| kept.next().unwrap_or(false));
    let mode = choice.get("mode").and_then(Value::as_str).unwrap_or("auto");
    Ok((json!(mode), choice.clone()))
}

/// `text.format` as the chat request's `response_format`, and as the response echoes it.
pub(crate) fn read_format(text: Option<&Value>) -> Result<(Value, Value), ServeError> {
    let plain = json!({"type": "text"});
    let Some(format) = text.and_then(|t| t.get("format")).filter(|f| !f.is_null()) else {
        return Ok((Value::Null, plain));
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok((Value::Null, plain)),
        Some("json_object") => Ok((json!({"type": "json_object"}), format.clone())),
        Some("json_schema") => {
            let field = |k: &str| format.get(k).cloned().unwrap_or(Value::Null);
            let name = format
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("answer");
            let schema = field("schema");
            let chat = json!({"type": "json_schema", "json_schema": {
                "name": name, "schema": schema, "strict": field("strict")}});
            let echo = json!({"type": "json_schema", "name": name,
                "description": field("description"), "schema": schema,
                "strict": format.get("strict").and_then(Value::as_bool).unwrap_or(false)});
            Ok((chat, echo))
        }
        _ => Err(bad(
            "text.format.type",
            "expected text, json_object or json_schema",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_tools_are_left_out_with_a_warning_and_custom_ones_kept() {
        let list = vec![
            json!({"type": "function", "name": "shell", "parameters": {"type": "object"}}),
            json!({"type": "custom", "name": "apply_patch", "description": "Patch files.",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}),
            json!({"type": "web_search"}),
            json!({"type": "local_shell"}),
        ];
        let mut tools = read_tools(list).unwrap();
        assert_eq!(tools.chat.len(), 2);
        assert_eq!(tools.names.custom, vec!["apply_patch".to_string()]);
        assert_eq!(tools.warnings.len(), 2);
        assert!(tools.warnings[0].contains("web_search"));
        let (chat, _) =
            read_choice(Some(json!({"type": "web_search_preview"})), &mut tools).unwrap();
        assert_eq!(chat, json!("auto"));
        let (chat, echo) = read_choice(
            Some(json!({"type": "custom", "name": "apply_patch"})),
            &mut tools,
        )
        .unwrap();
        assert_eq!(chat["function"]["name"], "apply_patch");
        assert_eq!(echo["name"], "apply_patch");
    }

    #[test]
    fn a_namespace_is_its_tools_under_flat_names() {
        // As Codex CLI sends its sub-agent and MCP tools.
        let list = vec![
            json!({"type": "function", "name": "exec_command", "parameters": {"type": "object"}}),
            json!({"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
                   "tools": [
                {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
                {"type": "custom", "name": "note"},
                {"type": "web_search"}]}),
            json!({"type": "namespace", "name": "mcp__docs__", "tools": [
                {"type": "function", "name": "search", "parameters": {"type": "object"}}]}),
        ];
        let mut tools = read_tools(list).unwrap();
        let names: Vec<&str> = tools
            .chat
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "exec_command",
                "multi_agent_v1__spawn_agent",
                "multi_agent_v1__note",
                "mcp__docs__search"
            ]
        );
        assert_eq!(tools.names.custom, ["multi_agent_v1__note"]);
        assert_eq!(
            tools.names.namespace_of("multi_agent_v1__spawn_agent"),
            Some(("multi_agent_v1", "spawn_agent"))
        );
        assert_eq!(tools.index, [0, 1, 1, 2]);
        assert_eq!(tools.echo.len(), 3);
        assert_eq!(tools.echo[1]["type"], "namespace");
        assert_eq!(tools.warnings.len(), 1, "{:?}", tools.warnings);
        assert!(tools.warnings[0].starts_with("tools[1].tools[2]"));
        // A choice of a namespace's tool names it with its namespace; `allowed_tools` keeps a
        // namespace while one of its tools is allowed.
        let (chat, _) = read_choice(
            Some(json!({"type": "function", "name": "search", "namespace": "mcp__docs__"})),
            &mut tools,
        )
        .unwrap();
        assert_eq!(chat["function"]["name"], "mcp__docs__search");
        let allowed = json!({"type": "allowed_tools", "mode": "auto", "tools": [
            {"type": "function", "name": "spawn_agent", "namespace": "multi_agent_v1"}]});
        read_choice(Some(allowed), &mut tools).unwrap();
        assert_eq!(tools.chat.len(), 1);
        assert_eq!(tools.echo.len(), 1);
        assert_eq!(tools.echo[0]["name"], "multi_agent_v1");
    }
}
