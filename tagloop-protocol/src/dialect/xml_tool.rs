//! Cline / Roo Code style XML: `<tool><param>value</param></tool>`.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::{Map, Value};

use super::DialectCall;
use super::xml::{name_of, push_arg, xml_value};

/// `<tool><param>value</param>…</tool>`: the first element is the tool, its children the
/// arguments (a repeated child becomes a list).
pub(super) fn xml_tool_call(block: &str) -> Result<DialectCall, String> {
    let mut reader = Reader::from_str(block);
    let tool = loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => break name_of(e.name().as_ref()),
            Ok(Event::Empty(e)) => {
                return Ok(DialectCall {
                    tool: name_of(e.name().as_ref()),
                    args: Map::new(),
                });
            }
            Ok(Event::Eof) => return Err("no XML element was found".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    };
    let mut args = Map::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = name_of(e.name().as_ref());
                let end = e.to_end().into_owned();
                let raw = reader
                    .read_text(end.name())
                    .map_err(|e| format!("the value of `{name}` is not closed: {e}"))?;
                push_arg(&mut args, name, Value::String(xml_value(&raw)));
            }
            Ok(Event::Empty(e)) => {
                push_arg(
                    &mut args,
                    name_of(e.name().as_ref()),
                    Value::String(String::new()),
                );
            }
            Ok(Event::End(_)) | Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("the XML of the call is not well formed: {e}")),
        }
    }
    Ok(DialectCall { tool, args })
}
