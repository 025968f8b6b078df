//! What one turn may hold ([`TurnShape`]): every variant of the turn grammar — an ordinary
//! step, an answer only, a call required, one named tool, up to N calls in one turn — is a
//! shape, and [`turn_grammar`](super::turn_grammar) writes each of them itself, in GBNF and Lark
//! alike. Nobody rewrites the grammar's text.

use serde_json::Value;

/// A tool as the grammar sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolShape<'a> {
    /// The tool name, written into the grammar as `name(`; a tool whose name tagloop's action
    /// syntax cannot read back as a call is left out of the grammar.
    pub name: &'a str,
    /// Its parameters as a JSON Schema object.
    pub parameters: &'a Value,
}

/// How the turn's thought is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThoughtShape<'a> {
    /// The model's own (one line, optional, see [`turn_grammar`](super::turn_grammar)).
    #[default]
    Free,
    /// The thought begins with this text, word for word (the runtime's), and the model goes on
    /// with it as with a thought of its own, for one word at least. Asked again after its call was declined, a small
    /// model at temperature 0 writes the thought it wrote before the call, a thought premised
    /// on using a tool, and its answer follows that thought instead of the question; led into
    /// the thought by other words, it reasons about the question. One line, without `<`: a
    /// text that has either is left out (the thought is then the model's own).
    Begun(&'a str),
    /// No thought at all: the turn begins at its decision (`<action>` or `<final_answer>`,
    /// whatever else the shape allows), after a `<think>` block where
    /// [`TurnShape::think`] allows one. For turns whose decision the runtime checks by other
    /// means (`tagloop serve --thought none`, whose guess decides whether a call is wanted):
    /// a small model's thought there is mostly the prompt's example copied, and costs its
    /// tokens before every call. Where the prompt already opened the thought
    /// ([`TurnShape::opened_thought`]) it cannot be skipped: the turn closes it at once, empty
    /// (its closing tag optional, as in a thought of the model's), then decides.
    None,
}

/// What one turn may hold.
///
/// Build it with [`TurnShape::new`] and the setters, naming only what differs from an ordinary
/// step (an action over every tool or a final answer, one call, a thought first):
///
/// ```
/// use serde_json::json;
/// use tagloop_protocol::{ToolShape, TurnShape};
///
/// let params = json!({"type": "object"});
/// let tools = vec![ToolShape { name: "add", parameters: &params }, ToolShape { name: "sub", parameters: &params }];
/// // OpenAI's `tool_choice: {"type": "function", "function": {"name": "sub"}}`, parallel calls allowed.
/// let shape = TurnShape::new(tools).named("sub").max_calls(8);
/// assert_eq!(shape.tools.len(), 1);
/// assert!(shape.call_required);
/// ```
#[derive(Debug, Clone)]
pub struct TurnShape<'a> {
    /// The tools the model may call (none: only a final answer is possible).
    pub tools: Vec<ToolShape<'a>>,
    /// The role's output schema: the final answer is JSON that follows it.
    pub output_schema: Option<&'a Value>,
    /// Only a final answer may come (the last turn of a run out of steps, a turn after calls
    /// that were declined). Wins over [`TurnShape::call_required`].
    pub final_only: bool,
    /// The prompt already opened the thought (completions): the turn starts inside it.
    pub opened_thought: bool,
    /// A `<think>…</think>` block may lead the turn.
    pub think: bool,
    /// A call must come: the decision is an action, never a final answer (OpenAI's
    /// `tool_choice: "required"`, or a named function). When no tool can be called the turn
    /// answers all the same: a grammar that matches nothing is no grammar.
    pub call_required: bool,
    /// Most `<action>` blocks one turn may hold (0 and 1 both mean one, as in a run). Above one,
    /// a turn holds 1 to N blocks one after another, separated by at most two blanks, every
    /// block but the last closed with `</action>` (the last one's closing tag stays optional,
    /// as a stop string may take it).
    pub max_calls: usize,
    /// How the thought is written (the model's own unless set).
    pub thought: ThoughtShape<'a>,
}

impl Default for TurnShape<'_> {
    fn default() -> Self {
        TurnShape {
            tools: Vec::new(),
            output_schema: None,
            final_only: false,
            opened_thought: false,
            think: false,
            call_required: false,
            max_calls: 1,
            thought: ThoughtShape::Free,
        }
    }
}

impl<'a> TurnShape<'a> {
    /// An ordinary step over `tools`: one action or a final answer, the thought not opened.
    pub fn new(tools: Vec<ToolShape<'a>>) -> Self {
        TurnShape {
            tools,
            ..TurnShape::default()
        }
    }

    /// The final answer follows `schema` (JSON), when there is one.
    pub fn output_schema(mut self, schema: Option<&'a Value>) -> Self {
        self.output_schema = schema;
        self
    }

    /// Only a final answer may come (see [`TurnShape::final_only`](#structfield.final_only)).
    pub fn final_only(mut self, yes: bool) -> Self {
        self.final_only = yes;
        self
    }

    /// The prompt opened the thought already (completions).
    pub fn opened_thought(mut self, yes: bool) -> Self {
        self.opened_thought = yes;
        self
    }

    /// A `<think>` block may lead the turn.
    pub fn think(mut self, yes: bool) -> Self {
        self.think = yes;
        self
    }

    /// A call must come (see [`TurnShape::call_required`](#structfield.call_required)).
    pub fn call_required(mut self, yes: bool) -> Self {
        self.call_required = yes;
        self
    }

    /// Up to `n` calls in one turn (see [`TurnShape::max_calls`](#structfield.max_calls)).
    pub fn max_calls(mut self, n: usize) -> Self {
        self.max_calls = n;
        self
    }

    /// How the thought is written (see [`ThoughtShape`]).
    pub fn thought(mut self, thought: ThoughtShape<'a>) -> Self {
        self.thought = thought;
        self
    }

    /// The tool `name` alone, and a call of it required: OpenAI's named `tool_choice`. A name
    /// that is not among the tools leaves none, and the turn can then only answer.
    pub fn named(mut self, name: &str) -> Self {
        self.tools.retain(|t| t.name == name);
        self.call_required = true;
        self
    }
}
