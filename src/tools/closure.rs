//! Tools built from an async closure and a typed argument struct.

use std::marker::PhantomData;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Tool, ToolError};

/// A tool made by [`tool_fn`].
pub struct FnTool<A, F> {
    name: String,
    description: String,
    parameters: Value,
    f: F,
    _args: PhantomData<fn(A)>,
}

/// Build a tool from a name, a description and an async function of a typed argument struct;
/// the parameter schema comes from the struct (`schemars`), in field order.
///
/// ```
/// use tagloop::tools::{Tool, tool_fn};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
/// let add = tool_fn("add", "Add two integers.", |x: Add| async move { Ok((x.a + x.b).to_string()) });
/// assert_eq!(add.name(), "add");
/// assert_eq!(add.parameters()["required"], serde_json::json!(["a", "b"]));
/// ```
pub fn tool_fn<A, F, Fut>(name: &str, description: &str, f: F) -> FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, ToolError>> + Send + 'static,
{
    let mut parameters = schemars::schema_for!(A).to_value();
    if let Some(obj) = parameters.as_object_mut() {
        // The model sees the schema in the prompt; these keys are noise there.
        obj.remove("$schema");
        obj.remove("title");
    }
    FnTool {
        name: name.to_string(),
        description: description.to_string(),
        parameters,
        f,
        _args: PhantomData,
    }
}

impl<A, F, Fut> Tool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, ToolError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn call(&self, args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>> {
        let parsed: Result<A, _> = serde_json::from_value(Value::Object(args));
        match parsed {
            Ok(a) => Box::pin((self.f)(a)),
            Err(e) => {
                Box::pin(async move { Err(ToolError::Failed(format!("bad arguments: {e}"))) })
            }
        }
    }
}
