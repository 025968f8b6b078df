//! Server-sent events, decoded as the bytes arrive: the streamed turn's hot path.
//!
//! A streamed turn is dozens of small events (one per few tokens). Reading them here, straight
//! from the response body, costs one pass over the bytes and no allocation per event: the
//! decoder keeps one buffer for unread bytes and one for the event being assembled, and hands
//! out the finished event's data by reference. (async-openai's stream, used before, moves every
//! event through a spawned task, a channel and three owned strings.)
//!
//! The format (WHATWG HTML, "server-sent events"): lines end in LF, CRLF or CR; a blank line ends
//! an event; `data:` lines are joined with `\n`; `event:` names the event; a line starting with
//! `:` is a comment; one space after the colon is dropped; other fields (`id`, `retry`) are not
//! needed here. An event without data is not dispatched. At the end of the body, an event that
//! was not closed by a blank line is still delivered (servers that end on `data: [DONE]\n`).

/// One event: its name (empty for the default, `message`) and its data.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Event<'a> {
    pub(super) name: &'a [u8],
    pub(super) data: &'a [u8],
}

/// The incremental decoder.
#[derive(Debug, Default)]
pub(super) struct Decoder {
    /// Bytes received and not yet read as lines.
    buf: Vec<u8>,
    /// Where unread bytes start in `buf`.
    pos: usize,
    /// The data of the event being assembled.
    data: Vec<u8>,
    /// Its name.
    name: Vec<u8>,
    /// Whether it has a `data` field (data may be empty).
    has_data: bool,
    /// The last line ended in CR: an LF first in the next bytes belongs to it.
    after_cr: bool,
    /// The event handed out last is to be cleared before the next one is assembled.
    dispatched: bool,
}

impl Decoder {
    /// A decoder whose buffer holds `bytes` before it grows (a whole streamed turn often
    /// arrives in one read and is fed in before any event is taken out).
    pub(super) fn with_capacity(bytes: usize) -> Self {
        Decoder {
            buf: Vec::with_capacity(bytes),
            ..Decoder::default()
        }
    }

    /// Bytes held for the event not yet complete (its data so far and its unread lines): a
    /// server that never ends an event would otherwise grow this without bound.
    pub(super) fn pending(&self) -> usize {
        self.buf.len() - self.pos + if self.dispatched { 0 } else { self.data.len() }
    }

    /// Add bytes from the body.
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes fed so far hold one. At the end of the body
    /// (`at_end`), a last unterminated line and an unclosed event are taken as complete.
    pub(super) fn next(&mut self, at_end: bool) -> Option<Event<'_>> {
        if self.dispatched {
            self.data.clear();
            self.name.clear();
            self.has_data = false;
            self.dispatched = false;
        }
        loop {
            if self.after_cr && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.after_cr = false;
            }
            let rest = &self.buf[self.pos..];
            let (line_end, next) = match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    if rest[i] == b'\r' {
                        self.after_cr = true;
                    }
                    (self.pos + i, self.pos + i + 1)
                }
                None if at_end && !rest.is_empty() => (self.buf.len(), self.buf.len()),
                None => {
                    if at_end && self.has_data {
                        self.dispatched = true;
                        return Some(Event {
                            name: &self.name,
                            data: &self.data,
                        });
                    }
                    return None;
                }
            };
            let start = self.pos;
            self.pos = next;
            if line_end == start {
                // A blank line ends the event.
                if self.has_data {
                    self.dispatched = true;
                    return Some(Event {
                        name: &self.name,
                        data: &self.data,
                    });
                }
                self.name.clear();
                continue;
            }
            let line = &self.buf[start..line_end];
            if line[0] == b':' {
                continue; // a comment
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            match field {
                b"data" => {
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(value);
                    self.has_data = true;
                }
                b"event" => {
                    self.name.clear();
                    self.name.extend_from_slice(value);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_counts_what_an_unfinished_event_holds() {
        let mut d = Decoder::default();
        d.feed(b"data: one\n\ndata: tw");
        assert_eq!(
            d.next(false).map(|e| e.data.to_vec()),
            Some(b"one".to_vec())
        );
        assert_eq!(d.pending(), "data: tw".len());
        assert!(d.next(false).is_none());
        d.feed(b"o\ndata: th");
        assert!(d.next(false).is_none());
        assert_eq!(d.pending(), "two".len() + "data: th".len());
        d.feed(b"ree\n\n");
        assert_eq!(
            d.next(false).map(|e| e.data.to_vec()),
            Some(b"two\nthree".to_vec())
        );
        assert_eq!(d.pending(), 0);
    }

    /// Every event of `chunks` fed in order, as (name, data) strings.
    fn events(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let n = chunks.len();
        for (i, c) in chunks.iter().enumerate() {
            d.feed(c);
            while let Some(e) = d.next(i + 1 == n) {
                out.push((
                    String::from_utf8_lossy(e.name).into_owned(),
                    String::from_utf8_lossy(e.data).into_owned(),
                ));
            }
        }
        out
    }

    fn e(name: &str, data: &str) -> (String, String) {
        (name.into(), data.into())
    }

    #[test]
    fn lines_end_in_lf_crlf_or_cr_even_when_split_between_reads() {
        let want = vec![e("", "a"), e("", "b"), e("", "c")];
        assert_eq!(events(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\r"]), want);
        assert_eq!(
            events(&[
                b"data: a\r",
                b"\n\r",
                b"\ndata: b\n",
                b"\n",
                b"data: c\r",
                b"\r"
            ]),
            want
        );
        // One byte at a time.
        let text = b"data: a\r\n\r\ndata: b\r\rdata: c\n\n";
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(events(&bytes), want);
    }

    #[test]
    fn data_lines_join_comments_are_skipped_and_names_are_kept() {
        assert_eq!(
            events(&[
                b": ping\nevent: keepalive\ndata: {}\n\ndata:x\ndata:  y\nid: 3\nretry: 10\n\n"
            ]),
            vec![e("keepalive", "{}"), e("", "x\n y")]
        );
        // A blank line without data dispatches nothing and forgets the name.
        assert_eq!(events(&[b"event: error\n\ndata: z\n\n"]), vec![e("", "z")]);
        // `data` with no colon is an empty data line.
        assert_eq!(events(&[b"data\n\n"]), vec![e("", "")]);
    }

    #[test]
    fn the_end_of_the_body_closes_the_last_event() {
        assert_eq!(
            events(&[b"data: {\"a\":1}\n\ndata: [DONE]"]),
            vec![e("", "{\"a\":1}"), e("", "[DONE]")]
        );
        assert_eq!(events(&[b"data: last\n"]), vec![e("", "last")]);
        assert!(events(&[b": only a comment"]).is_empty());
    }

    #[test]
    fn multibyte_characters_split_across_reads_come_out_whole() {
        let text = "data: {\"t\":\"héllo → 世界\"}\n\n".as_bytes();
        let parts: Vec<&[u8]> = text.chunks(3).collect();
        assert_eq!(events(&parts), vec![e("", "{\"t\":\"héllo → 世界\"}")]);
    }

    #[test]
    fn a_long_stream_does_not_keep_what_it_has_read() {
        let mut d = Decoder::default();
        for _ in 0..10_000 {
            d.feed(b"data: {\"choices\":[]}\n\n");
            assert!(d.next(false).is_some());
        }
        assert!(d.buf.len() < 64 * 1024, "{}", d.buf.len());
    }
}
