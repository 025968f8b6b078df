//! Binding a call's arguments to a tool's parameters (SPEC §1.3).

use serde_json::{Map, Value};

use super::action::Arg;

/// Why arguments did not bind; the message is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A placeholder until the binding helper lands.
    #[error("{0}")]
    Invalid(String),
}

/// Bind arguments to a parameter schema (a JSON Schema object with `properties` and `required`).
pub fn bind(args: &[Arg], schema: &Value) -> Result<Map<String, Value>, BindError> {
    let _ = (args, schema);
    todo!("protocol helper")
}
