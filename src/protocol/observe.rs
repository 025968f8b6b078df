//! Rendering tool output as an observation (SPEC §1.4).

use std::borrow::Cow;

/// Replace `<` with `&lt;` where it starts a protocol tag, so tool output cannot forge one.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    let _ = text;
    todo!("protocol helper")
}

/// Cut `text` to at most `limit` bytes (on a character boundary) with a visible marker saying how much was cut.
pub fn truncate(text: &str, limit: usize) -> Cow<'_, str> {
    let _ = (text, limit);
    todo!("protocol helper")
}

/// Render `<observation>…</observation>` around neutralised, truncated text.
pub fn render_observation(body: &str, limit: usize) -> String {
    let _ = (body, limit);
    todo!("protocol helper")
}
