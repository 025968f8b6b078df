//! Turn grammars that know the workspace's paths (issue 24 item 2): built-in path parameters
//! limited to the paths that exist below the cap, one bounded line above it and for the paths a
//! tool creates (issue 31 item 5), a tool that opts in through
//! the `x-tagloop-path` schema annotation (as an MCP server's tool does) honoured, and every
//! such grammar still read back by the GBNF checker.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tagloop::agent::{AgentConfig, Role, preview_grammar};
use tagloop::protocol::parse_gbnf;
use tagloop::tools::{
    MAX_LISTED_PATHS, Registry, Tool, ToolError, ToolkitOptions, Workspace, list_paths, toolkit,
};

fn workspace(files: &[&str]) -> (tempfile::TempDir, Arc<Workspace>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for f in files {
        let p = dir.path().join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, "x").expect("write");
    }
    let ws = Arc::new(Workspace::new(dir.path()).expect("workspace"));
    (dir, ws)
}

fn grammar(tools: &Registry) -> String {
    let text = preview_grammar(tools, &Role::default(), &AgentConfig::default(), false);
    parse_gbnf(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    text
}

fn rule<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ::= ")))
}

#[test]
fn a_small_workspace_limits_path_parameters_to_its_paths() {
    let (_d, ws) = workspace(&["notes/april.md", "say \"hi\".txt", "日本.md"]);
    let opts = ToolkitOptions {
        allow_write: true,
        ..ToolkitOptions::default()
    };
    let text = grammar(&toolkit(ws, opts));
    let files = rule(&text, "path-file").expect("a file list");
    assert_eq!(
        files,
        r#""\"notes/april.md\"" | "\"say \\\"hi\\\".txt\"" | "\"日本.md\"""#
    );
    assert_eq!(rule(&text, "path-dir"), Some(r#""\".\"" | "\"notes\"""#));
    assert!(rule(&text, "path-any").is_some());
    // read_file, edit_file take files; list_dir folders; the paths a tool creates are any one
    // bounded line, not limited to the paths that exist.
    let call = |tool: &str| rule(&text, &format!("call-{tool}")).unwrap_or_default();
    assert!(call("read-file").contains("\"path=\" path-file"), "{text}");
    assert!(call("edit-file").contains("\"path=\" path-file"), "{text}");
    assert!(call("list-dir").contains("\"path=\" path-dir"), "{text}");
    assert!(
        call("search-files").contains("\"path=\" path-any"),
        "{text}"
    );
    assert!(call("delete-path").contains("\"path=\" path-any"), "{text}");
    assert!(call("move-path").contains("\"from=\" path-any"), "{text}");
    let new_path = "(path-string | path-triple)";
    assert!(
        call("move-path").contains(&format!("\"to=\" {new_path}")),
        "{text}"
    );
    for creates in ["write-file", "make-dir", "append-file"] {
        assert!(
            call(creates).contains(&format!("\"path=\" {new_path}")),
            "{text}"
        );
    }
    // One line, with no counted bound (llama.cpp expands `x{1,N}` into N rules).
    assert!(rule(&text, "path-body").is_some_and(|r| r.ends_with("]+") && !r.contains('{')));
    assert!(rule(&text, "path-triple").is_some_and(|r| r.contains("path-body")));
}

#[test]
fn a_workspace_over_the_cap_leaves_path_parameters_one_bounded_line() {
    let names: Vec<String> = (0..=MAX_LISTED_PATHS)
        .map(|i| format!("f{i}.txt"))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (_d, ws) = workspace(&refs);
    assert!(list_paths(&ws).is_none());
    let text = grammar(&toolkit(ws, ToolkitOptions::default()));
    assert!(rule(&text, "path-file").is_none(), "{text}");
    let read = rule(&text, "call-read-file").unwrap_or_default();
    assert!(
        read.contains("\"path=\" (path-string | path-triple)"),
        "{text}"
    );
}

/// A tool declared as an MCP server declares it: its schema carries the annotation, and it
/// relies on the trait's default `path_parameters`.
struct Annotated(Value);

impl Tool for Annotated {
    fn name(&self) -> &str {
        "srv.open"
    }
    fn description(&self) -> &str {
        "open a folder"
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn call(&self, _args: Map<String, Value>) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async { Ok(String::new()) })
    }
}

#[test]
fn an_annotated_tool_opts_in() {
    let (_d, ws) = workspace(&["notes/april.md"]);
    let mut tools = toolkit(ws, ToolkitOptions::default());
    let schema = json!({"type": "object", "properties": {
        "folder": {"type": "string", "x-tagloop-path": "dir"},
        "name": {"type": "string"}}, "required": ["folder", "name"]});
    let tool = Annotated(schema);
    assert_eq!(tool.path_parameters().len(), 1);
    tools.add(Arc::new(tool));
    let text = grammar(&tools);
    let open = rule(&text, "call-srv-open").unwrap_or_default();
    assert!(open.contains("\"folder=\" path-dir"), "{text}");
    assert!(
        open.contains("\"name=\" (string | triple-string)"),
        "{text}"
    );
}
