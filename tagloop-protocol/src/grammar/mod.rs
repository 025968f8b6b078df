//! Grammar-guided turns: the grammar of one turn, for servers that constrain sampling to it.
//!
//! llama.cpp (`grammar`), vLLM (`structured_outputs.grammar`) and SGLang (`ebnf`) can restrict
//! what a model samples to a grammar. Given the tools and the role's schema, [`turn_grammar`]
//! writes the grammar of one well-formed turn: an optional `<think>` block, a thought,
//! then exactly one action over the real tool signatures or one final answer (JSON following
//! the schema when the role has one). Every string it accepts reads as an action that binds to
//! its tool, or as a final answer that validates (docs/protocol.md §1.7); the tests check that
//! by sampling the grammar and running the reader on what comes out.
//!
//! * `expr.rs`: the grammar as data ([`Grammar`], `Expr`) and its GBNF text.
//! * `gbnf.rs`: [`parse_gbnf`], the check every grammar passes before it is sent.
//! * `values.rs`: strings that cannot spell a protocol tag, numbers, any JSON value.
//! * `paths.rs`: [`PATH_ANNOTATION`], [`PathKind`] and [`KnownPaths`] (path-valued parameters).
//! * `budget.rs`: the size bounds of the schemas' rules.
//! * `schema.rs`: JSON Schema as grammar, each sub-schema one rule, within a size budget.
//! * `members.rs`: an object's members (a call's arguments) in that budget, linear in number.
//! * `shape.rs`: [`TurnShape`], what one turn may hold (the grammar's variants).
//! * `turn.rs`: [`turn_grammar`] and [`decision_grammar`] (the part a lazy grammar constrains).
//! * `native.rs`: [`native_grammar`], a turn in a model's own `<tool_call>` JSON format.
//! * `lark.rs`: [`Grammar::to_lark`], the same grammar in llguidance's Lark syntax.
//!
//! Parameters annotated [`PATH_ANNOTATION`] name paths: given the workspace's [`KnownPaths`]
//! ([`turn_grammar_with`]), the values of one that names a path that exists are the alternation
//! of those paths; every other path is one line.

mod budget;
#[cfg(test)]
mod construct_tests;
mod expr;
mod gbnf;
mod lark;
#[cfg(test)]
mod lark_tests;
mod members;
mod native;
#[cfg(test)]
mod path_tests;
mod paths;
mod schema;
#[cfg(test)]
mod schema_tests;
mod shape;
#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
mod turn;
mod values;

pub use expr::{Grammar, Simplified};
pub use gbnf::{GbnfError, parse_gbnf};
pub use native::{NativeShape, native_grammar};
pub use paths::{KnownPaths, PATH_ANNOTATION, PathKind};
pub use shape::{ThoughtShape, ToolShape, TurnShape};
pub use turn::{
    LAZY_TRIGGERS, decision_grammar, decision_grammar_with, turn_grammar, turn_grammar_with,
};
