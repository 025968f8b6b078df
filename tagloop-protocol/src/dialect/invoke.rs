//! The `<function_calls>` dialect: `<invoke name="tool"><parameter name="p">v</parameter></invoke>`.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::{Map, Value};

use super::DialectCall;
use super::xml::{push_arg, xml_value};

/// `<invoke name="tool"><parameter name="p">v</parameter></invoke>` (the first invoke).
pub(super) fn invoke_call(block: &str) -> Result<DialectCall, String> {
    let mut reader = Reader::from_str(block);
    let mut tool: Option<String> = None;
    let mut args = Map::new();
    let attr = |e: &quick_xml::events::BytesStart<'_>, key: &str| -> Option<String> {
        e.attributes()
            .flatten()
            .find(|a| a.key.as_ref() == key)
            .map(|a| {
                let raw = a.value.to_string();
                xml_value(&raw)
            })
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().as_ref() == "invoke" && tool.is_none() => {
                tool = attr(&e, "name");
                if tool.is_none() {
                    return Err("`<invoke>` has no name attribute".into());
                }
            }
            Ok(Event::Start(e)) if e.name().as_ref() == "parameter" && tool.is_some() => {
                let Some(name) = attr(&e, "name") else {
                    return Err("a `<parameter>` has no name attribute".into());
                };
                let end = e.to_end().into_owned();
                let raw = reader
                    .read_text(end.name())
                    .map_err(|e| format!("the value of `{name}` is not closed: {e}"))?;
                push_arg(&mut args, name, Value::String(xml_value(&raw)));
            }
            Ok(Event::End(e)) if e.name().as_ref() == "invoke" => break,
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    }
    match tool {
        Some(tool) => Ok(DialectCall { tool, args }),
        None => Err("`<function_calls>` holds no `<invoke name=…>`".into()),
    }
}
