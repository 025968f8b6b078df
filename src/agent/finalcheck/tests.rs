//! Unit tests of final-answer checking.

use super::*;
use serde_json::json;

fn city_role() -> Role {
    Role::new("r", "")
        .with_output_schema(json!({
            "type": "object",
            "required": ["city", "population"],
            "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
            "additionalProperties": false
        }))
        .unwrap()
}

#[test]
fn empty_answers_are_refused() {
    assert!(matches!(check("  \n ", &Role::default()), Verdict::Refused(m) if m.contains("empty")));
}

#[test]
fn text_roles_accept_text() {
    assert_eq!(
        check("Paris", &Role::default()),
        Verdict::Accepted {
            value: json!("Paris"),
            warnings: vec![]
        }
    );
}

#[test]
fn schema_roles_parse_fenced_json_and_validate() {
    let v = check(
        "```json\n{\"city\": \"Paris\", \"population\": 3}\n```",
        &city_role(),
    );
    let Verdict::Accepted { value, warnings } = v else {
        panic!("{v:?}")
    };
    assert_eq!(value, json!({"city": "Paris", "population": 3}));
    assert_eq!(warnings.len(), 1);
}

#[test]
fn lenient_json_is_a_warning() {
    let v = check("{'city': 'Paris', 'population': 3,}", &city_role());
    let Verdict::Accepted { value, warnings } = v else {
        panic!("{v:?}")
    };
    assert_eq!(value, json!({"city": "Paris", "population": 3}));
    assert!(warnings[0].contains("leniently"));
}

#[test]
fn schema_errors_name_the_path() {
    let Verdict::Refused(msg) = check(
        r#"{"city": "Paris", "population": -1, "x": 1}"#,
        &city_role(),
    ) else {
        panic!()
    };
    assert!(
        msg.contains("/population: -1 is less than the minimum of 0"),
        "{msg}"
    );
    assert!(msg.contains("(root): Additional properties"), "{msg}");
    let Verdict::Refused(msg) = check(r#"{"city": "Paris"}"#, &city_role()) else {
        panic!()
    };
    assert!(
        msg.contains("\"population\" is a required property"),
        "{msg}"
    );
}

#[test]
fn trailing_prose_is_not_json() {
    let Verdict::Refused(msg) = check(
        r#"{"city": "Paris", "population": 2102650} Hope this helps!"#,
        &city_role(),
    ) else {
        panic!()
    };
    assert!(msg.contains("not valid JSON"), "{msg}");
}

#[test]
fn loosen_keeps_inner_quotes() {
    assert_eq!(
        loosen_json(r#"{'a': 'say "hi"', 'b': [1,2,],}"#),
        r#"{"a": "say \"hi\"", "b": [1,2]}"#
    );
    assert_eq!(
        loosen_json("{'k': None, 'ok': True}"),
        r#"{"k": null, "ok": true}"#
    );
}
