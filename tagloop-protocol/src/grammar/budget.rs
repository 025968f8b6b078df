//! The size bounds of the schemas' rules (`schema.rs` builds within them): how many bytes of
//! GBNF one schema and one grammar may take, how long a rule name gets, and the running count
//! the builder keeps.

use std::collections::HashMap;

/// Most bytes of GBNF the rules of one schema may take. Realistic schemas (a role's output,
/// an MCP tool's input: a few KiB of JSON) need a few KiB; this leaves a factor of thirty.
pub(super) const SCHEMA_BUDGET: usize = 128 * 1024;

/// Most bytes of GBNF the rules of all the schemas of one grammar may take (a registry of many
/// tools): what a server parses, and a request carries, on every turn.
pub(super) const GRAMMAR_BUDGET: usize = 512 * 1024;

/// Longest a rule name gets before its numeric suffix (names come from the schema's keys).
pub(super) const NAME_MAX: usize = 48;

/// The size budget of the schemas' rules, and where in which schema the builder is.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// GBNF bytes of schema rules defined in this grammar so far, and in the current schema.
    pub(super) used_total: usize,
    pub(super) used_schema: usize,
    /// JSON Pointer segments (escaped) from the current schema's root to where the builder is.
    pub(super) path: Vec<String>,
    /// The first part of the current schema that was simplified, and how many were.
    pub(super) first_simplified: Option<String>,
    pub(super) simplified: usize,
    /// The next numeric suffix to try for each rule-name base: finding a free name stays
    /// constant-time when many keys sanitise to the same name.
    pub(super) suffixes: HashMap<String, u32>,
}
