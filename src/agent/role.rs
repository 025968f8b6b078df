//! Roles: a name, instructions, and an optional JSON Schema for the final answer.
//!
//! A role file is JSON or TOML (chosen by the extension; anything else is tried as JSON, then TOML):
//!
//! ```toml
//! name = "planner"
//! instructions = "Break the task into at most five steps."
//!
//! [output_schema]
//! type = "object"
//! required = ["steps"]
//! properties.steps = { type = "array", items = { type = "string" } }
//! ```
//!
//! The schema is compiled once, when the role is made; an invalid schema is an error then, not
//! during a run.

use super::role_errors::{json_detail, toml_detail};
use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Errors while making a role.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RoleError {
    /// The role file could not be read.
    #[error("cannot read role file {path}: {source}")]
    Read {
        /// The role file's path, as given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The role file is neither valid JSON nor valid TOML of the right shape.
    #[error(
        "role file {path} is not a valid role ({detail}); it needs `name`, `instructions` and optionally `output_schema`"
    )]
    Format {
        /// The role file's path, as given.
        path: String,
        /// The parser's message.
        detail: String,
    },
    /// The output schema is not a valid JSON Schema.
    #[error("the output schema of role `{role}` is not a valid JSON Schema: {detail}")]
    Schema {
        /// The role's name.
        role: String,
        /// The validator's message.
        detail: String,
    },
}

/// The on-disk shape of a role.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    name: String,
    #[serde(default)]
    instructions: String,
    #[serde(default)]
    output_schema: Option<Value>,
}

/// A role: what the agent is, and what its final answer must look like.
#[derive(Clone)]
pub struct Role {
    name: String,
    instructions: String,
    schema: Option<(Value, Arc<jsonschema::Validator>)>,
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Role")
            .field("name", &self.name)
            .field("instructions", &self.instructions)
            .field("output_schema", &self.schema.as_ref().map(|(s, _)| s))
            .finish()
    }
}

impl Default for Role {
    fn default() -> Self {
        Role::new("a helpful assistant", "")
    }
}

impl Role {
    /// A role whose final answer is free text.
    pub fn new(name: impl Into<String>, instructions: impl Into<String>) -> Self {
        Role {
            name: name.into(),
            instructions: instructions.into(),
            schema: None,
        }
    }

    /// Require the final answer to be JSON that validates against `schema`.
    pub fn with_output_schema(mut self, schema: Value) -> Result<Self, RoleError> {
        let validator = crate::schema::compile(&schema).map_err(|e| RoleError::Schema {
            role: self.name.clone(),
            detail: e.to_string(),
        })?;
        self.schema = Some((schema, Arc::new(validator)));
        Ok(self)
    }

    /// [`Role::with_output_schema`] with the schema already compiled (by
    /// [`crate::schema::compile`], e.g. off the async threads).
    pub(crate) fn with_compiled_output_schema(
        mut self,
        schema: Value,
        validator: Arc<jsonschema::Validator>,
    ) -> Self {
        self.schema = Some((schema, validator));
        self
    }

    /// A role whose output schema is derived from a Rust type.
    ///
    /// ```
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Plan { steps: Vec<String> }
    /// let role = tagloop::agent::Role::for_type::<Plan>("planner", "Plan the work.").unwrap();
    /// assert!(role.output_schema().is_some());
    /// ```
    pub fn for_type<T: JsonSchema>(
        name: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Result<Self, RoleError> {
        let mut schema = schemars::schema_for!(T).to_value();
        if let Some(obj) = schema.as_object_mut() {
            obj.remove("title");
        }
        Role::new(name, instructions).with_output_schema(schema)
    }

    /// Load a role from a JSON or TOML file.
    pub fn load(path: &Path) -> Result<Self, RoleError> {
        let text = std::fs::read_to_string(path).map_err(|source| RoleError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let is_toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        // The parsers' messages are turned into a place and a reason without the file's text:
        // a mistyped path can reach a file of secrets (`.env`), and an error must not print it.
        let parsed: Result<RoleFile, String> = if is_toml {
            toml::from_str(&text).map_err(|e| toml_detail(&e, &text))
        } else {
            serde_json::from_str(&text)
                .map_err(|e| json_detail(&e))
                .or_else(|json_err| toml::from_str(&text).map_err(|_| json_err))
        };
        let file = parsed.map_err(|detail| RoleError::Format {
            path: path.display().to_string(),
            detail,
        })?;
        let role = Role::new(file.name, file.instructions);
        match file.output_schema {
            Some(schema) => role.with_output_schema(schema),
            None => Ok(role),
        }
    }

    /// Load a role that is only an output schema (`--output-schema FILE`).
    pub fn load_schema(path: &Path) -> Result<Self, RoleError> {
        Role::default().with_output_schema(Role::read_schema(path)?)
    }

    /// Read a JSON Schema file (for `--output-schema`, alone or over a role's own schema).
    pub fn read_schema(path: &Path) -> Result<Value, RoleError> {
        let text = std::fs::read_to_string(path).map_err(|source| RoleError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| RoleError::Format {
            path: path.display().to_string(),
            detail: json_detail(&e),
        })
    }

    /// A role written inline as JSON (`{"name", "instructions", "output_schema"}`, as in batch
    /// and eval suites): every field is optional, other fields are ignored.
    pub fn from_inline(obj: &Value) -> Result<Self, RoleError> {
        let text = |key: &str| obj.get(key).and_then(Value::as_str);
        let role = Role::new(
            text("name").unwrap_or("a helpful assistant"),
            text("instructions").unwrap_or(""),
        );
        match obj.get("output_schema") {
            Some(schema) => role.with_output_schema(schema.clone()),
            None => Ok(role),
        }
    }

    /// The role's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The role's instructions.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// The output schema, if the final answer must be JSON.
    pub fn output_schema(&self) -> Option<&Value> {
        self.schema.as_ref().map(|(s, _)| s)
    }

    pub(crate) fn validator(&self) -> Option<&jsonschema::Validator> {
        self.schema.as_ref().map(|(_, v)| v.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loads_json_and_toml_roles() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("r.json");
        std::fs::write(&j, r#"{"name":"critic","instructions":"Be brief.","output_schema":{"type":"object","required":["ok"]}}"#).unwrap();
        let role = Role::load(&j).unwrap();
        assert_eq!(role.name(), "critic");
        assert_eq!(role.output_schema().unwrap()["required"], json!(["ok"]));

        let t = dir.path().join("r.toml");
        std::fs::write(
            &t,
            "name = \"p\"\ninstructions = \"x\"\n[output_schema]\ntype = \"string\"\n",
        )
        .unwrap();
        let role = Role::load(&t).unwrap();
        assert_eq!(role.output_schema(), Some(&json!({"type": "string"})));
    }

    #[test]
    fn rejects_bad_files_and_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, r#"{"nme":"x"}"#).unwrap();
        let err = Role::load(&p).unwrap_err().to_string();
        assert!(err.contains("not a valid role"), "{err}");
        let err = Role::new("x", "")
            .with_output_schema(json!({"type": 12}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid JSON Schema"), "{err}");
        assert!(matches!(
            Role::load(&dir.path().join("missing.json")),
            Err(RoleError::Read { .. })
        ));
    }
}
