//! The `tagloop parse --json` object (docs/protocol.md §2.1).

use super::action::{ActionError, Arg, Call, Signature, parse_action_with};
use super::dialect::Dialect;
use super::turn::{Turn, TurnKind, read_turn_with};

/// The action of a [`ParseReport`]: the tool and its arguments in the order written.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReportAction {
    /// The tool name as written in the action (`.` and `-` kept: `fs.read_file`); it is not checked
    /// against the tools given.
    pub tool: String,
    /// The arguments, each `{"name": …, "value": …}`.
    pub args: Vec<Arg>,
}

/// The error of a [`ParseReport`]: what was expected, and where in the action text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReportError {
    /// What was expected, in words a model can act on.
    pub message: String,
    /// Byte offset into the action text.
    pub offset: usize,
}

/// The `kind` of a [`ParseReport`]: what the turn decided (serialised `action`, `final`, `none`,
/// `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportKind {
    /// An action block that parsed; the report's `action` holds the call.
    Action,
    /// A final answer; the report's `final` holds its trimmed text.
    Final,
    /// Neither.
    None,
    /// An action block whose text does not parse.
    Error,
}

impl ReportKind {
    /// The kind as the JSON report spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Action => "action",
            ReportKind::Final => "final",
            ReportKind::None => "none",
            ReportKind::Error => "error",
        }
    }
}

impl std::fmt::Display for ReportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind compares equal to its JSON spelling (`r.kind == "action"`).
impl PartialEq<&str> for ReportKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The JSON object `tagloop parse --json` prints; the fields serialize in the order of docs/protocol.md §2.1.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParseReport {
    /// What the turn decided, or `error` for an action that does not parse.
    pub kind: ReportKind,
    /// The joined thought, if any.
    pub thought: Option<String>,
    /// The call, when kind is `action`.
    pub action: Option<ReportAction>,
    /// The trimmed final answer, when kind is `final`.
    #[serde(rename = "final")]
    pub final_text: Option<String>,
    /// Why the action did not parse, when kind is `error`.
    pub error: Option<ReportError>,
    /// Text after the deciding block, which is ignored.
    pub discarded: Option<String>,
    /// Removed `<think>` text.
    pub reasoning: Option<String>,
    /// Leniencies used (empty when none).
    pub warnings: Vec<String>,
    /// The tool-call dialect the action was written in, when not tagloop's own (`hermes`,
    /// `qwen3_coder`, `function_calls`, `json_in_action`, `xml_tool`).
    pub dialect: Option<Dialect>,
    /// The turn as read (not serialized; for callers that want spans).
    #[serde(skip)]
    pub turn: Turn,
    /// The full action error (not serialized; it also says whether a string was left open).
    #[serde(skip)]
    pub action_error: Option<ActionError>,
}

/// Read a turn and parse its action, as `tagloop parse` does. With signatures, the earliest
/// reading of the action that binds to its tool's signature wins (docs/protocol.md §1.2).
///
/// ```
/// use tagloop_protocol::parse_report;
///
/// let r = parse_report("<thought>t</thought><action>search(q=\"x\", 3)</action>", &[]);
/// assert_eq!(
///     serde_json::to_string(&r).unwrap(),
///     r#"{"kind":"action","thought":"t","action":{"tool":"search","args":[{"name":"q","value":"x"},{"name":null,"value":3}]},"final":null,"error":null,"discarded":null,"reasoning":null,"warnings":[],"dialect":null}"#
/// );
/// let r = parse_report("<action>search(q=</action>", &[]);
/// assert_eq!(r.kind, "error");
/// assert_eq!(r.error.unwrap().offset, 9);
/// ```
pub fn parse_report(text: &str, signatures: &[Signature]) -> ParseReport {
    let names: Vec<&str> = signatures.iter().map(|s| s.name.as_str()).collect();
    let turn = read_turn_with(text, &names);
    let mut report = ParseReport {
        kind: ReportKind::None,
        thought: turn.thought.clone(),
        action: None,
        final_text: None,
        error: None,
        discarded: turn.discarded.clone(),
        reasoning: turn.reasoning.clone(),
        warnings: turn.warnings.clone(),
        dialect: turn.dialect,
        turn: Turn::default(),
        action_error: None,
    };
    match turn.kind {
        TurnKind::None => {}
        TurnKind::Final => {
            report.kind = ReportKind::Final;
            report.final_text.clone_from(&turn.final_text);
        }
        TurnKind::Action if turn.dialect_error.is_some() => {
            report.kind = ReportKind::Error;
            report.error = Some(ReportError {
                message: turn.dialect_error.clone().unwrap_or_default(),
                offset: 0,
            });
        }
        TurnKind::Action => {
            let body = turn.action.as_deref().unwrap_or_default();
            let accept = |c: &Call| signatures.iter().all(|s| s.accepts(c));
            match parse_action_with(body, &accept) {
                Ok(call) => {
                    report.kind = ReportKind::Action;
                    report.warnings.extend(call.warnings);
                    report.action = Some(ReportAction {
                        tool: call.tool,
                        args: call.args,
                    });
                }
                Err(e) => {
                    report.kind = ReportKind::Error;
                    report.error = Some(ReportError {
                        message: e.message.clone(),
                        offset: e.offset,
                    });
                    report.action_error = Some(e);
                }
            }
        }
    }
    report.turn = turn;
    report
}
