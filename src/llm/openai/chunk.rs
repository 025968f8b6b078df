//! A fast reader for the usual shape of a streamed chunk, with serde as the fallback.
//!
//! A streamed turn is dozens of chunks like
//! `{"id":"…","object":"chat.completion.chunk","created":1,"model":"…","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}`,
//! and reading each through serde's derived visitors cost about a quarter of a microsecond, most
//! of it matching field names: the largest item of a batch step once the HTTP hand-offs were gone
//! (BENCHMARKS.md, "CPU per step"). [`Template::read`] walks that shape directly, and
//! reads the chunks that differ from the stream's last one only in their text faster still.
//!
//! It reads a strict subset of JSON and gives up (`None`) on anything else: nested values in
//! fields tagloop does not use, a `usage` or `error` object, a key with an escape, a duplicate
//! field, a number where `index` is not a plain unsigned integer, a lone surrogate, invalid
//! JSON of any kind. The caller then asks serde, so the outcome (the chunk, or the error
//! message) is serde's whenever this reader does not answer. When it answers, it answers what
//! serde would: the property test in this module checks both on random and on broken chunks.

use std::borrow::Cow;

use serde_json::Value;

use super::wire::{WireChoice, WireChunk, WireMessage};

/// Read a chunk of the usual shape; `None`: ask serde.
fn read_in<'a>(r: &mut Reader<'a>) -> Option<WireChunk<'a>> {
    let mut chunk = WireChunk::default();
    let mut seen = 0u8;
    if r.open()? {
        loop {
            let key = r.key()?;
            r.eat(b':')?;
            match key {
                "choices" => {
                    once(&mut seen, 1)?;
                    chunk.choices = r.choices()?;
                }
                // `null` in every chunk but the last (OpenAI with `include_usage`); the counts
                // themselves and in-band errors are serde's, once per turn at most.
                "usage" | "error" => {
                    once(&mut seen, if key == "usage" { 2 } else { 4 })?;
                    r.null()?;
                }
                _ => r.skip()?,
            }
            if !r.more()? {
                break;
            }
        }
    }
    r.ws();
    (r.i == r.b.len()).then_some(chunk)
}

/// A chunk as [`Template::read`] gives it.
#[derive(Debug)]
pub(super) enum Chunk<'a> {
    /// A chunk that matched the template: only its text differs from it (choice 0's delta
    /// content; nothing else is set).
    Text(Cow<'a, str>),
    /// A chunk read in full.
    Whole(WireChunk<'a>),
}

/// The chunks of one stream differ, as a rule, only in their text: the last chunk that was
/// nothing but text, split around its content string, reads the next ones that match it
/// byte for byte outside that string.
///
/// Why this is exact: the reader decides from the bytes it has read and the next token only. A
/// chunk made of the same bytes before the content string, one JSON string, and the same bytes
/// after it is read the same way as the template up to the string and after it; only the
/// string's value differs. So the result is the template's reading with the new text.
#[derive(Debug, Default)]
pub(super) struct Template {
    /// The bytes before the content string and after it; empty: no template yet.
    before: Vec<u8>,
    after: Vec<u8>,
}

impl Template {
    /// Read a chunk: by the template when it matches (then only its text is given, as
    /// [`Chunk::Text`]), else in full (learning a new template from a chunk that is only
    /// text); `None`: ask serde.
    pub(super) fn read<'a>(&mut self, data: &'a [u8]) -> Option<Chunk<'a>> {
        if let Some(text) = self.text(data) {
            return Some(Chunk::Text(text));
        }
        let mut r = Reader {
            s: std::str::from_utf8(data).ok()?,
            b: data,
            i: 0,
            content: None,
        };
        let chunk = read_in(&mut r)?;
        self.learn(&chunk, data, r.content);
        Some(Chunk::Whole(chunk))
    }

    /// The text of a chunk that matches the template.
    fn text<'a>(&self, data: &'a [u8]) -> Option<Cow<'a, str>> {
        if self.before.is_empty()
            || data.len() < self.before.len() + self.after.len() + 2
            || !data.starts_with(&self.before)
            || !data.ends_with(&self.after)
        {
            return None;
        }
        let middle = &data[self.before.len()..data.len() - self.after.len()];
        let mut r = Reader {
            s: std::str::from_utf8(middle).ok()?,
            b: middle,
            i: 0,
            content: None,
        };
        if middle[0] != b'"' {
            return None;
        }
        let text = r.string()?;
        (r.i == middle.len()).then_some(text)
    }

    /// [`Template::text`] as the whole chunk it stands for (the tests compare it with serde's).
    #[cfg(test)]
    fn apply<'a>(&self, data: &'a [u8]) -> Option<WireChunk<'a>> {
        Some(WireChunk {
            choices: vec![WireChoice {
                index: 0,
                delta: Some(WireMessage {
                    content: Some(self.text(data)?),
                    ..WireMessage::default()
                }),
                ..WireChoice::default()
            }],
            ..WireChunk::default()
        })
    }

    /// Keep `data` as the template when its reading is one choice, choice 0, with a delta that
    /// holds only text; otherwise keep the old one.
    fn learn(&mut self, chunk: &WireChunk<'_>, data: &[u8], content: Option<(usize, usize)>) {
        let [choice] = chunk.choices.as_slice() else {
            return;
        };
        let only_text = choice.index == 0
            && chunk.usage.is_none()
            && chunk.error.is_none()
            && choice.message.is_none()
            && choice.text.is_none()
            && choice.finish_reason.is_none()
            && choice.reasoning_content.is_none()
            && choice.stop_reason.is_none()
            && choice.delta.as_ref().is_some_and(|d| {
                d.content.is_some() && d.reasoning_content.is_none() && d.reasoning.is_none()
            });
        if let (true, Some((start, end))) = (only_text, content) {
            self.before.clear();
            self.before.extend_from_slice(&data[..start]);
            self.after.clear();
            self.after.extend_from_slice(&data[end..]);
        }
    }
}

/// Mark a field as seen; `None` when it was already (serde refuses duplicate fields).
fn once(seen: &mut u8, bit: u8) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Where the last `content` string read lies (its quotes included).
    content: Option<(usize, usize)>,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// `{`; whether a member follows (`false`: the object was `{}`).
    fn open(&mut self) -> Option<bool> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(false);
        }
        Some(true)
    }

    /// After a member: `,` (another follows) or `}` (the end).
    fn more(&mut self) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            b'}' => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// A key without escapes.
    fn key(&mut self) -> Option<&'a str> {
        match self.string()? {
            Cow::Borrowed(k) => Some(k),
            Cow::Owned(_) => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    /// A string or `null`, as the `text` fields are read.
    fn text(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'n' {
            self.null()?;
            return Some(None);
        }
        self.string().map(Some)
    }

    /// A string, borrowed when it holds no escape.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        let end = start + memchr::memchr2(b'"', b'\\', self.b.get(start..)?)?;
        // Control characters must be escaped in JSON (the fold has no early exit, so it is
        // vectorised).
        if self.b[start..end]
            .iter()
            .fold(false, |bad, &c| bad | (c < 0x20))
        {
            return None;
        }
        self.i = end;
        if self.b[end] == b'"' {
            self.i += 1;
            return Some(Cow::Borrowed(&self.s[start..end]));
        }
        let mut out = String::with_capacity(self.i - start + 16);
        out.push_str(&self.s[start..self.i]);
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    let escape = *self.b.get(self.i + 1)?;
                    self.i += 2;
                    out.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode()?,
                        _ => return None,
                    });
                }
                0..=0x1f => return None,
                _ => {
                    let run = self.i;
                    while let Some(&c) = self.b.get(self.i) {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        self.i += 1;
                    }
                    out.push_str(&self.s[run..self.i]);
                }
            }
        }
    }

    /// The character of a `\u` escape (its `\u` already read), surrogate pairs joined; a lone
    /// surrogate gives `None`.
    fn unicode(&mut self) -> Option<char> {
        let high = self.hex4()?;
        match high {
            0xD800..=0xDBFF => {
                if self.b.get(self.i..self.i + 2)? != b"\\u" {
                    return None;
                }
                self.i += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return None;
                }
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            c => char::from_u32(c),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A plain unsigned integer that fits a `u32` (no sign, fraction or exponent).
    fn index(&mut self) -> Option<u32> {
        self.ws();
        let start = self.i;
        while let Some(b'0'..=b'9') = self.b.get(self.i) {
            self.i += 1;
        }
        let digits = &self.s[start..self.i];
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.b.get(self.i) {
            return None;
        }
        digits.parse().ok()
    }

    /// A JSON number, skipped.
    fn number(&mut self) -> Option<()> {
        self.ws();
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let digits = |r: &mut Self| {
            let start = r.i;
            while let Some(b'0'..=b'9') = r.b.get(r.i) {
                r.i += 1;
            }
            r.i - start
        };
        let start = self.i;
        match digits(self) {
            0 => return None,
            n if n > 1 && self.b[start] == b'0' => return None,
            _ => {}
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        Some(())
    }

    /// A value tagloop does not use: a string, number, `true`, `false` or `null`. Objects and
    /// arrays give `None`.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.null(),
            _ => None,
        }
    }

    fn choices(&mut self) -> Option<Vec<WireChoice<'a>>> {
        self.eat(b'[')?;
        let mut choices = Vec::with_capacity(1);
        if self.peek()? == b']' {
            self.i += 1;
            return Some(choices);
        }
        loop {
            choices.push(self.choice()?);
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(choices);
                }
                _ => return None,
            }
        }
    }

    fn choice(&mut self) -> Option<WireChoice<'a>> {
        let mut choice = WireChoice::default();
        let mut seen = 0u8;
        if !self.open()? {
            return Some(choice);
        }
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            match key {
                "index" => {
                    once(&mut seen, 1)?;
                    choice.index = self.index()?;
                }
                "delta" => {
                    once(&mut seen, 2)?;
                    choice.delta = self.message()?;
                }
                "message" => {
                    once(&mut seen, 4)?;
                    choice.message = self.message()?;
                }
                "text" => {
                    once(&mut seen, 8)?;
                    choice.text = self.text()?;
                }
                "finish_reason" => {
                    once(&mut seen, 16)?;
                    choice.finish_reason = self.text()?;
                }
                "reasoning_content" => {
                    once(&mut seen, 32)?;
                    choice.reasoning_content = self.text()?;
                }
                "stop_reason" => {
                    once(&mut seen, 64)?;
                    choice.stop_reason = self.text()?.map(|s| Value::String(s.into_owned()));
                }
                // `null` on most servers; log probabilities themselves go to serde.
                "logprobs" => self.null()?,
                _ => self.skip()?,
            }
            if !self.more()? {
                return Some(choice);
            }
        }
    }

    fn message(&mut self) -> Option<Option<WireMessage<'a>>> {
        if self.peek()? == b'n' {
            self.null()?;
            return Some(None);
        }
        let mut message = WireMessage::default();
        let mut seen = 0u8;
        if !self.open()? {
            return Some(Some(message));
        }
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            match key {
                "content" => {
                    once(&mut seen, 1)?;
                    self.ws();
                    let start = self.i;
                    message.content = self.text()?;
                    self.content = message.content.is_some().then_some((start, self.i));
                }
                "reasoning_content" => {
                    once(&mut seen, 2)?;
                    message.reasoning_content = self.text()?;
                }
                "reasoning" => {
                    once(&mut seen, 4)?;
                    message.reasoning = self.text()?;
                }
                _ => self.skip()?,
            }
            if !self.more()? {
                return Some(Some(message));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    /// Read one chunk on its own.
    fn read(data: &[u8]) -> Option<WireChunk<'_>> {
        read_in(&mut Reader {
            s: std::str::from_utf8(data).ok()?,
            b: data,
            i: 0,
            content: None,
        })
    }

    /// A chunk read in full, as text (`None` for a template's text or no reading).
    fn whole(c: Option<Chunk<'_>>) -> Option<String> {
        match c? {
            Chunk::Whole(c) => Some(format!("{c:?}")),
            Chunk::Text(_) => None,
        }
    }

    /// What serde reads, as text (a `Cow` prints the same borrowed or owned).
    fn serde(data: &[u8]) -> Result<String, String> {
        serde_json::from_slice::<WireChunk>(data)
            .map(|c| format!("{c:?}"))
            .map_err(|e| e.to_string())
    }

    fn fast(data: &[u8]) -> Option<String> {
        read(data).map(|c| format!("{c:?}"))
    }

    #[test]
    fn the_usual_chunks_are_read_here() {
        for chunk in [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732523,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":" the"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a\"b\n\u00e9\ud83d\ude00"},"finish_reason":"stop","stop_reason":"</action>"}]}"#,
            r#"{"choices":[{"text":" x","index":0,"logprobs":null,"finish_reason":null}],"created":1.5e3}"#,
            r#" { "choices" : [ { "index" : 0 , "delta" : { "reasoning_content" : "hm" } } ] } "#,
            r#"{"choices":[]}"#,
            r#"{}"#,
        ] {
            let got = fast(chunk.as_bytes()).unwrap_or_else(|| panic!("fell back on {chunk}"));
            assert_eq!(Ok(got), serde(chunk.as_bytes()), "{chunk}");
        }
    }

    #[test]
    fn anything_else_is_left_to_serde() {
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"choices":[{"index":0,"logprobs":{"content":[]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"index":0.0}]}"#,
            r#"{"choices":[{"index":0,"index":1}]}"#,
            r#"{"choices":null}"#,
            r#"{"cho\u0069ces":[]}"#,
            r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a	b"}}]}"#,
            r#"{"choices":[{"index":0}]} x"#,
            r#"{"choices":[{"index":0},]}"#,
            r#"{"created":01}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"\\x\"}}]}",
        ] {
            assert_eq!(fast(chunk.as_bytes()), None, "{chunk}");
        }
    }

    /// A JSON string drawn to hit escapes, quotes, multi-byte and astral characters.
    fn any_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("a".to_owned()),
                Just(" the".to_owned()),
                Just("\"".to_owned()),
                Just("\\".to_owned()),
                Just("\n".to_owned()),
                Just("\u{1}".to_owned()),
                Just("é".to_owned()),
                Just("😀".to_owned()),
                Just("</action>".to_owned()),
                "[a-z<>/ ]{0,6}",
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    fn any_scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any_text().prop_map(Value::String),
        ]
    }

    fn any_value() -> impl Strategy<Value = Value> {
        any_scalar().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..3)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn text_or_null() -> impl Strategy<Value = Value> {
        prop_oneof![
            8 => any_text().prop_map(Value::String),
            2 => Just(Value::Null),
            1 => any_value(),
        ]
    }

    /// An object from some of these fields, in a random order, plus unknown ones.
    fn object(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> impl Strategy<Value = Value> {
        let known = fields
            .into_iter()
            .map(|(k, v)| prop::option::of(v.prop_map(move |v| (k.to_owned(), v))))
            .collect::<Vec<_>>();
        let unknown = prop::collection::vec(
            (
                "[a-z_]{1,8}",
                prop_oneof![8 => any_scalar(), 1 => any_value()],
            ),
            0..3,
        );
        (known, unknown, any::<u64>()).prop_map(|(known, unknown, seed)| {
            let mut members: Vec<(String, Value)> = known.into_iter().flatten().collect();
            members.extend(unknown);
            // A deterministic shuffle from the seed.
            let mut s = seed;
            for i in (1..members.len()).rev() {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                members.swap(i, (s >> 33) as usize % (i + 1));
            }
            Value::Object(members.into_iter().collect())
        })
    }

    /// The usual chunk, around any text, beside a random one of any shape.
    fn any_chunk() -> impl Strategy<Value = Value> {
        let usual = (any_text(), prop::option::of("[a-z]{4,6}")).prop_map(|(text, finish)| {
            serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1732523,
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]
            })
        });
        prop_oneof![usual, random_chunk()]
    }

    fn random_chunk() -> impl Strategy<Value = Value> {
        let message = object(vec![
            ("role", Just(Value::from("assistant")).boxed()),
            ("content", text_or_null().boxed()),
            ("reasoning_content", text_or_null().boxed()),
            ("reasoning", text_or_null().boxed()),
        ]);
        let message = prop_oneof![8 => message, 1 => Just(Value::Null)].boxed();
        let index = prop_oneof![
            12 => Just(Value::from(0)),
            1 => (0u64..5).prop_map(Value::from),
            1 => any_value(),
        ];
        let choice = object(vec![
            ("index", index.boxed()),
            ("delta", message.clone()),
            ("message", message),
            ("text", text_or_null().boxed()),
            ("finish_reason", text_or_null().boxed()),
            ("reasoning_content", text_or_null().boxed()),
            ("stop_reason", text_or_null().boxed()),
            (
                "logprobs",
                prop_oneof![8 => Just(Value::Null), 1 => any_value()].boxed(),
            ),
        ]);
        object(vec![
            (
                "choices",
                prop::collection::vec(choice, 0..3)
                    .prop_map(Value::Array)
                    .boxed(),
            ),
            (
                "usage",
                prop_oneof![8 => Just(Value::Null), 1 => any_value()].boxed(),
            ),
            (
                "error",
                prop_oneof![8 => Just(Value::Null), 1 => any_value()].boxed(),
            ),
            ("id", any_scalar().boxed()),
        ])
    }

    /// The properties below say nothing when the fast reader gives up on everything: it must
    /// answer a fair share of the random chunks, and most of those with choices.
    #[test]
    fn the_random_chunks_reach_the_fast_reader() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = any_chunk();
        let (mut answered, mut with_text) = (0, 0);
        for _ in 0..2000 {
            let chunk = strategy.new_tree(&mut runner).unwrap().current();
            let data = serde_json::to_vec(&chunk).unwrap();
            if let Some(c) = read(&data) {
                answered += 1;
                if c.choices
                    .iter()
                    .any(|c| c.delta.as_ref().is_some_and(|d| d.content.is_some()))
                {
                    with_text += 1;
                }
            }
        }
        assert!(
            answered > 200 && with_text > 50,
            "answered {answered}, with text {with_text}"
        );
    }

    #[test]
    fn a_template_reads_the_chunks_that_differ_only_in_text() {
        let chunk = |text: &str, finish: &str| {
            format!(
                r#"{{"id":"c1","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":{}}},"logprobs":null,"finish_reason":{finish}}}]}}"#,
                serde_json::to_string(text).unwrap()
            )
        };
        let mut t = Template::default();
        let first = chunk("<thought>", "null");
        assert!(t.apply(first.as_bytes()).is_none(), "no template yet");
        assert!(t.read(first.as_bytes()).is_some());
        for text in ["a", "", "\"\n\\ é 😀", "\"},\"x\":{\""] {
            let next = chunk(text, "null");
            let got = t.apply(next.as_bytes()).unwrap_or_else(|| panic!("{next}"));
            assert_eq!(Ok(format!("{got:?}")), serde(next.as_bytes()), "{next}");
        }
        // The closing chunk differs outside the text: read in full, and never learnt from.
        let last = chunk("", "\"stop\"");
        assert!(t.apply(last.as_bytes()).is_none());
        assert_eq!(whole(t.read(last.as_bytes())), serde(last.as_bytes()).ok());
        assert!(
            t.apply(chunk("b", "null").as_bytes()).is_some(),
            "the text template stays"
        );
        // Not one string in the middle: read in full.
        let trick = first.replace("\"<thought>\"", "\"a\",\"role\":\"b\"");
        assert!(t.apply(trick.as_bytes()).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A stream read with a template reads as each chunk alone.
        #[test]
        fn a_template_never_changes_a_reading(
            texts in prop::collection::vec(any_text(), 1..8),
            others in prop::collection::vec(any_chunk(), 0..3),
            order in any::<u64>(),
        ) {
            let mut stream: Vec<Vec<u8>> = texts
                .iter()
                .map(|t| {
                    serde_json::to_vec(&serde_json::json!({
                        "id": "c", "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]
                    }))
                    .unwrap()
                })
                .collect();
            for (k, other) in others.iter().enumerate() {
                let at = (order >> (k * 8)) as usize % (stream.len() + 1);
                stream.insert(at, serde_json::to_vec(other).unwrap());
            }
            let mut t = Template::default();
            for data in &stream {
                let with = t.read(data).map(|c| match c {
                    Chunk::Text(text) => format!("{:?}", WireChunk {
                        choices: vec![WireChoice {
                            delta: Some(WireMessage { content: Some(text), ..WireMessage::default() }),
                            ..WireChoice::default()
                        }],
                        ..WireChunk::default()
                    }),
                    Chunk::Whole(c) => format!("{c:?}"),
                });
                prop_assert_eq!(with, fast(data), "{}", String::from_utf8_lossy(data));
            }
        }

        /// Whenever the fast reader answers, serde reads the same chunk.
        #[test]
        fn answers_what_serde_answers(chunk in any_chunk(), pretty in any::<bool>()) {
            let data = if pretty {
                serde_json::to_vec_pretty(&chunk).unwrap()
            } else {
                serde_json::to_vec(&chunk).unwrap()
            };
            if let Some(got) = fast(&data) {
                prop_assert_eq!(Ok(got), serde(&data));
            }
        }

        /// Broken chunks too: a byte changed, cut short or doubled somewhere.
        #[test]
        fn broken_chunks_are_never_read_differently(
            chunk in any_chunk(),
            at in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"\"\\{}[],:0-en \x01\xff".to_vec()),
            how in 0..3u8,
        ) {
            let mut data = serde_json::to_vec(&chunk).unwrap();
            let i = at.index(data.len());
            match how {
                0 => data[i] = byte,
                1 => data.truncate(i),
                _ => data.insert(i, byte),
            }
            if let Some(got) = fast(&data) {
                prop_assert_eq!(Ok(got), serde(&data), "{}", String::from_utf8_lossy(&data));
            }
        }
    }
}
