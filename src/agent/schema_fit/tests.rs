//! Unit tests of XML answers and coercions.

use super::*;
use serde_json::json;

fn person() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string"}, "count": {"type": "integer"},
        "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}}},
        "required": ["name", "count"]})
}

#[test]
fn xml_elements_fill_the_schema() {
    let v = xml_answer(
        "<name>Ana &amp; Bo</name>\n<count>2</count><ok>true</ok><tags>x</tags><tags><![CDATA[<y>]]></tags>\
         <address><city>Lyon</city><zip>69001</zip></address>",
        &person(),
    );
    assert_eq!(
        v,
        Some(
            json!({"name": "Ana & Bo", "count": 2, "ok": true, "tags": ["x", "<y>"],
                    "address": {"city": "Lyon", "zip": 69001}})
        )
    );
    // One wrapper element around the fields, and a list wrapped in its own element.
    let v = xml_answer(
        "<person><name>Ana</name><count>x</count><tags><t>a</t><t>b</t></tags></person>",
        &person(),
    );
    assert_eq!(
        v,
        Some(json!({"name": "Ana", "count": "x", "tags": ["a", "b"]}))
    );
    // Missing fields are not invented; text that is not XML is not read.
    assert_eq!(
        xml_answer("<name>Ana</name>", &person()),
        Some(json!({"name": "Ana"}))
    );
    assert_eq!(xml_answer("Ana, 2", &person()), None);
    assert_eq!(xml_answer("<name>Ana</nam>", &person()), None);
    let list = json!({"type": "array", "items": {"type": "number"}});
    assert_eq!(
        xml_answer("<n>1</n><n>2.5</n>", &list),
        Some(json!([1, 2.5]))
    );
}

/// Any object of the schema's shape, written as XML elements (escaped, some values in
/// CDATA, with or without a wrapper element), reads back as itself.
mod props {
    use super::*;
    use proptest::prelude::*;

    fn escape(s: &str) -> String {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    }

    proptest! {
        #[test]
        fn xml_answers_read_back_as_the_object(
            name in "[a-zA-Z &<>\"'é]{1,12}",
            count in any::<i32>(),
            ok in any::<bool>(),
            tags in proptest::collection::vec("[a-z<&]{1,6}", 0..4),
            city in proptest::option::of("[A-Za-z ]{1,8}"),
            wrapper in any::<bool>(),
            cdata in any::<bool>(),
        ) {
            let text = |s: &str| if cdata && !s.contains("]]>") { format!("<![CDATA[{s}]]>") } else { escape(s) };
            let mut xml = format!("<name>{}</name><count>{count}</count><ok>{ok}</ok>", text(&name));
            for t in &tags {
                xml.push_str(&format!("<tags>{}</tags>", text(t)));
            }
            if let Some(c) = &city {
                xml.push_str(&format!("<address><city>{}</city></address>", text(c)));
            }
            if wrapper {
                xml = format!("<person>\n{xml}\n</person>");
            }
            let mut want = json!({"name": name.trim(), "count": count, "ok": ok});
            if !tags.is_empty() {
                want["tags"] = json!(tags);
            }
            if let Some(c) = &city {
                want["address"] = json!({"city": c.trim()});
            }
            prop_assert_eq!(xml_answer(&xml, &person()), Some(want), "{}", xml);
        }
    }
}

#[test]
fn coercions_are_applied_and_reported() {
    let mut notes = Vec::new();
    let v = coerce(
        json!({"name": "Ana", "count": "3", "ok": "false", "tags": "solo", "address": {"zip": "7"}}),
        &person(),
        "",
        &mut notes,
    );
    assert_eq!(
        v,
        json!({"name": "Ana", "count": 3, "ok": false, "tags": ["solo"], "address": {"zip": 7}})
    );
    assert_eq!(notes.len(), 4, "{notes:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("/count: the string \"3\""))
    );
    // Nothing to do: nothing reported; a string that is not a number stays.
    let mut notes = Vec::new();
    let v = coerce(
        json!({"name": "1", "count": "many"}),
        &person(),
        "",
        &mut notes,
    );
    assert_eq!(v, json!({"name": "1", "count": "many"}));
    assert!(notes.is_empty());
}
