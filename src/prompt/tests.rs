use serde_json::json;

use super::*;

fn docs() -> Vec<ToolDoc> {
    let read = json!({"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace root."},
        "start_line": {"type": "integer", "description": "First line to read (1-based)."}}});
    let list = json!({"type": "object", "properties": {
        "path": {"type": "string", "description": "Folder to list."}}});
    vec![
        ToolDoc::new(
            "read_file",
            "Read a text file and return its content. Give start_line to read part of it.",
            &read,
        ),
        ToolDoc::new("list_dir", "List a folder. Folders end with `/`.", &list),
    ]
}

fn input(tools: &[ToolDoc]) -> SystemInput<'_> {
    SystemInput {
        role_name: "a helpful agent",
        instructions: "",
        output_schema: None,
        tools,
        max_steps: 6,
        environment: &[],
        thought: true,
        observation_header: true,
    }
}

#[test]
fn the_compact_system_prompt_keeps_the_protocol_one_example_and_every_tool_in_a_line() {
    let t = Templates::builtin();
    let tools = docs();
    let full = t.system(&input(&tools)).unwrap();
    let short = t.system_compact(&input(&tools)).unwrap();
    assert!(
        short.len() * 4 < full.len() * 3,
        "{} vs {} bytes:\n{short}",
        short.len(),
        full.len()
    );
    // The protocol and the first tool-use example stay; the other examples and the long-string
    // rules go.
    for kept in [
        "<thought>",
        "<action>tool_name(",
        "<final_answer>",
        "# Example 1",
    ] {
        assert!(short.contains(kept), "{kept}:\n{short}");
    }
    assert!(full.contains("# Example 2") && !short.contains("# Example 2"));
    assert!(full.contains("triple quotes") && !short.contains("triple quotes"));
    // Each tool on one line: its parameters with their types, its first sentence.
    assert!(
        short.contains(
            "- read_file(path: string, start_line?: integer): Read a text file and return its content.\n"
        ),
        "{short}"
    );
    assert!(
        short.contains("- list_dir(path?: string): List a folder.\n"),
        "{short}"
    );
    assert!(!short.contains("Give start_line"), "{short}");
    // The step budget is stated in both.
    assert!(short.contains("at most 6 steps") && full.contains("at most 6 steps"));
}

#[test]
fn a_replaced_template_that_ignores_compact_renders_the_same_either_way() {
    let t = Templates::from_sources(
        "You are {{ role_name }}.".into(),
        QUESTION_TEMPLATE.into(),
        COMPLETION_TEMPLATE.into(),
    )
    .unwrap();
    let tools = docs();
    assert_eq!(
        t.system(&input(&tools)).unwrap(),
        t.system_compact(&input(&tools)).unwrap()
    );
}

#[test]
fn the_worked_example_shows_the_header_only_when_the_run_sends_it() {
    let t = Templates::builtin();
    let tools = docs();
    let header = "read_file(path=\"recipes/tea.ini\") returned 2 lines:";
    let on = t.system(&input(&tools)).unwrap();
    assert!(on.contains(header));
    let off = SystemInput {
        observation_header: false,
        ..input(&tools)
    };
    for text in [t.system(&off).unwrap(), t.system_compact(&off).unwrap()] {
        assert!(!text.contains(header), "{text}");
        // No example's header either (the second example's file differs from the first's).
        assert!(!text.contains(") returned "), "{text}");
        // The tool's own text stays: the example still teaches reading a result.
        assert!(text.contains("morning = assam\nevening = chamomile"));
    }
    let base = t.completion(&off, "", "Who?").unwrap();
    assert!(!base.contains("returned 2 lines"));
    assert!(base.contains("cat: Lina\nplants: Tom"));
}
