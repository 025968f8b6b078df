//! Scripts for the scripted model, built from a list of turns: the one way the tests write them.

use std::path::Path;
use std::sync::Arc;

use tagloop::llm::{Script, ScriptedModel};

/// The text of a script that replays `turns` in order (a comment line, then one separator per
/// turn).
pub fn text(turns: &[&str]) -> String {
    let mut text = String::from("test script\n");
    for t in turns {
        text.push_str("=== turn ===\n");
        text.push_str(t);
        text.push('\n');
    }
    text
}

/// A scripted model replaying `turns`, starting at turn `skip`.
pub fn model_from(turns: &[&str], skip: usize) -> Arc<ScriptedModel> {
    let script = Script::parse(&text(turns)).expect("a script built from turns parses");
    Arc::new(ScriptedModel::starting_at(Arc::new(script), skip))
}

/// A scripted model replaying `turns`.
pub fn model(turns: &[&str]) -> Arc<ScriptedModel> {
    model_from(turns, 0)
}

/// Write the script to `path` and return the `--model` value that replays it.
pub fn file(path: &Path, turns: &[&str]) -> String {
    std::fs::write(path, text(turns)).expect("the script file is written");
    format!("scripted:{}", path.display())
}
