//! A Responses request's `tools`, `tool_choice` and `text.format` as the chat request's
//! `tools`, `tool_choice` and `response_format`, which the shared reading checks (schemas
//! compiled within the same bounds, names unique, the named tool declared).
//!
//! * a `function` tool (flat: `name`, `description`, `parameters`) is a function tool;
//! * a `custom` (freeform) tool, whose input is one string, is a function tool of one string
//!   argument, [`CUSTOM_ARGUMENT`]; its calls go back as `custom_tool_call` items. The grammar
//!   a custom tool may carry (`format: grammar`) is not applied: its input is any string;
//! * any other type (`web_search`, `file_search`, `computer_use_preview`, `code_interpreter`,
//!   `image_generation`, `mcp`, `local_shell`, …) is a tool that OpenAI's servers run, which
//!   serve cannot: it is left out, with a warning in the response and the log, and the request
//!   is answered with the others.

use serde_json::{Value, json};

use super::items::CUSTOM_ARGUMENT;
use crate::serve::ServeError;

fn bad(path: &str, message: impl std::fmt::Display) -> ServeError {
    ServeError::bad_request(format!("{path}: {message}"), path)
}

/// The tools read.
#[derive(Default)]
pub(crate) struct Tools {
    /// As chat function tools.
    pub chat: Vec<Value>,
    /// As the response echoes them (the kept ones, as given).
    pub echo: Vec<Value>,
    /// The names of the custom (freeform) tools.
    pub custom: Vec<String>,
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
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
        let name = || -> Result<String, ServeError> {
            tool.get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.trim().is_empty())
                .map(str::to_string)
                .ok_or_else(|| bad(&format!("{path}.name"), "a tool needs a name"))
        };
        let description = tool.get("description").cloned().unwrap_or(json!(""));
        match kind {
            "function" => {
                let parameters = tool.get("parameters").cloned().unwrap_or(Value::Null);
                out.chat.push(json!({"type": "function", "function": {
                    "name": name()?, "description": description, "parameters": parameters}}));
                out.echo.push(echo_function(&tool));
                out.index.push(i);
            }
            "custom" => {
                let name = name()?;
                let parameters = json!({"type": "object",
                    "properties": {CUSTOM_ARGUMENT: {"type": "string",
                        "description": "The tool's whole input, as free text."}},
                    "required": [CUSTOM_ARGUMENT], "additionalProperties": false});
                out.chat.push(json!({"type": "function", "function": {
                    "name": name, "description": description, "parameters": parameters}}));
                out.custom.push(name);
                out.echo.push(tool);
                out.index.push(i);
            }
            "" => return Err(bad(&format!("{path}.type"), "a tool needs a type")),
            other => out.warnings.push(format!(
                "{path}: the built-in tool `{other}` is run by OpenAI's servers, not by this endpoint; it was left out"
            )),
        }
    }
    Ok(out)
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
        ("function" | "custom", Some(name)) => Ok((
            json!({"type": "function", "function": {"name": name}}),
            json!({"type": "function", "name": name}),
        )),
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
    let names: Vec<&str> = choice
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("tool_choice.tools", "must be an array"))?
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    let keep: Vec<bool> = tools
        .chat
        .iter()
        .map(|t| names.contains(&t["function"]["name"].as_str().unwrap_or_default()))
        .collect();
    let mut kept = keep.iter().copied();
    tools.chat.retain(|_| kept.next().unwrap_or(false));
    let mut kept = keep.iter().copied();
    tools.echo.retain(|_| kept.next().unwrap_or(false));
    let mut kept = keep.iter().copied();
    tools.index.retain(|_| kept.next().unwrap_or(false));
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
        assert_eq!(tools.custom, vec!["apply_patch".to_string()]);
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
}
