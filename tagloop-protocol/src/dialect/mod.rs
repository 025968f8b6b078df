//! Other tool-call dialects, read as actions (docs/protocol.md §1.8).
//!
//! Models trained on other formats fall back on them. When a turn has no action in tagloop's own
//! syntax, the reader also accepts, in this order of preference:
//!
//! | dialect | written as |
//! |---|---|
//! | `hermes` | `<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>` (`parameters` too; arguments may be a JSON string) |
//! | `qwen3_coder` | `<tool_call><function=read_file><parameter=path>a.txt</parameter></function></tool_call>` |
//! | `function_calls` | `<function_calls><invoke name="read_file"><parameter name="path">a.txt</parameter></invoke></function_calls>`; inside `<action>`, the `<invoke …>` alone |
//! | `json_in_action` | `<action>{"name": "read_file", "arguments": {"path": "a.txt"}}</action>` (`tool`/`action`, `args`/`action_input`) |
//! | `xml_tool` | `<read_file><path>a.txt</path></read_file>`, inside `<action>` or bare when the element names a known tool |
//!
//! The call is rendered in tagloop's own syntax (`read_file(path="a.txt")`) so that the loop
//! parses and binds it like any other; JSON values keep their types, XML values are strings
//! (binding coerces them by the tool's schema). XML blocks, once isolated here, are read with
//! quick-xml: `&amp;` is `&`, CDATA is unwrapped. A block that is recognised but cannot be read
//! (bad JSON, an unclosed element) is an error the model is told about.
//!
//! * `call.rs`: [`DialectCall`] and its rendering in tagloop's syntax.
//! * `json.rs`: the JSON readers (`hermes`, `json_in_action`).
//! * `qwen3.rs`: `<function=…>` in `<tool_call>` (`qwen3_coder`).
//! * `xml.rs`: what the XML readers share (values, repeated arguments).
//! * `xml_tool.rs`: `<tool><param>…</param></tool>` (`xml_tool`).
//! * `invoke.rs`: `<invoke name=…>` (`function_calls`).
//! * `find.rs`: finding a dialect block in a turn or an `<action>` body.

mod call;
mod find;
mod invoke;
mod json;
mod qwen3;
mod xml;
mod xml_tool;

pub(crate) use call::DialectCall;
pub(crate) use find::{find_known, read_action_body};

/// A tool-call format other than tagloop's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// Hermes / Qwen2.5: JSON in `<tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<function=…>` and `<parameter=…>` in `<tool_call>`.
    Qwen3Coder,
    /// `<function_calls><invoke name=…>`.
    FunctionCalls,
    /// JSON inside tagloop's own `<action>`.
    JsonInAction,
    /// Cline / Roo Code style XML: `<tool><param>…</param></tool>`.
    XmlTool,
}

impl Dialect {
    /// The name reports use (`hermes`, `qwen3_coder`, …).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Hermes => "hermes",
            Dialect::Qwen3Coder => "qwen3_coder",
            Dialect::FunctionCalls => "function_calls",
            Dialect::JsonInAction => "json_in_action",
            Dialect::XmlTool => "xml_tool",
        }
    }
}

/// What a dialect block gave: a call, or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DialectRead {
    /// The dialect the block is written in.
    pub dialect: Dialect,
    /// The call, or the reason it could not be read (written for the model).
    pub call: Result<DialectCall, String>,
    /// Byte range of the block in the text it was found in.
    pub start: usize,
    /// One past the block's end (its closing tag, or the end of the text when it has none).
    pub end: usize,
}
