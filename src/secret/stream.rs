//! Redaction of what arrives in pieces (a streamed answer), where a secret may be split between
//! two pieces.
//!
//! Each piece is added to what is held; what can go out is redacted and given back, and what
//! could still turn out to be part of a secret is held back: the longest end of the held text
//! that begins one of the [`Redactor`]'s forms, moved back to the start of any whole form that
//! crosses that point. Text that cannot begin a form (an event's closing newlines, most words)
//! goes out at once; a stream without secrets is passed on unchanged. What goes out, in all, is
//! what [`Redactor::redact`] makes of the whole text; only the moment each part goes out changes
//! (by at most the longest form's length).

use memchr::memmem;

use super::redactor::Redactor;

impl Redactor {
    /// Where `held` can be cut: everything before is safe to redact and pass on now.
    /// `boundary` says where a cut may fall (a character boundary of text).
    fn stream_cut(&self, held: &[u8], boundary: impl Fn(usize) -> bool) -> usize {
        // The longest end of `held` that is the start of a form (a form that a later piece may
        // complete).
        let partial = self
            .needles
            .iter()
            .filter_map(|n| {
                let n = n.as_bytes();
                (1..n.len().min(held.len() + 1))
                    .rev()
                    .find(|&k| held.ends_with(&n[..k]))
            })
            .max()
            .unwrap_or(0);
        let mut cut = held.len() - partial;
        while cut > 0 && !boundary(cut) {
            cut -= 1;
        }
        // Never inside a whole form: back to its start (a form starts on a character boundary,
        // being UTF-8 itself), and again if that lands inside another.
        loop {
            let crossing = self
                .needles
                .iter()
                .flat_map(|n| memmem::find_iter(held, n.as_bytes()).map(move |s| (s, s + n.len())))
                .filter(|&(s, e)| s < cut && e > cut)
                .map(|(s, _)| s)
                .min();
            match crossing {
                Some(s) => cut = s,
                None => return cut,
            }
        }
    }
}

/// A [`Redactor`] for text that arrives in pieces (the deltas of a streamed answer); see the
/// module docs for what is held back.
#[derive(Debug, Clone, Default)]
pub struct StreamRedactor {
    redactor: Redactor,
    held: String,
}

impl StreamRedactor {
    /// A stream redactor for the secrets `redactor` holds.
    pub fn new(redactor: Redactor) -> Self {
        StreamRedactor {
            redactor,
            held: String::new(),
        }
    }

    /// Take `piece`; give back the redacted text that can go out now (maybe empty).
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let held = &self.held;
        let cut = self
            .redactor
            .stream_cut(held.as_bytes(), |i| held.is_char_boundary(i));
        let rest = self.held.split_off(cut);
        let out = std::mem::replace(&mut self.held, rest);
        self.redactor.redact_string(out)
    }

    /// The redacted text still held back (the end of the stream).
    pub fn finish(&mut self) -> String {
        self.redactor.redact_string(std::mem::take(&mut self.held))
    }
}

/// A [`Redactor`] for bytes that arrive in pieces (a streamed answer relayed as it came, UTF-8
/// or not); see the module docs for what is held back.
#[derive(Debug, Clone, Default)]
pub struct ByteStreamRedactor {
    redactor: Redactor,
    held: Vec<u8>,
}

impl ByteStreamRedactor {
    /// A stream redactor for the secrets `redactor` holds.
    pub fn new(redactor: Redactor) -> Self {
        ByteStreamRedactor {
            redactor,
            held: Vec::new(),
        }
    }

    /// Take `piece`; give back the redacted bytes that can go out now (maybe none).
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        if self.redactor.is_empty() {
            return piece.to_vec();
        }
        self.held.extend_from_slice(piece);
        let cut = self.redactor.stream_cut(&self.held, |_| true);
        let rest = self.held.split_off(cut);
        let out = std::mem::replace(&mut self.held, rest);
        self.redactor.redact_bytes(&out).into_owned()
    }

    /// The redacted bytes still held back (the end of the stream).
    pub fn finish(&mut self) -> Vec<u8> {
        let out = std::mem::take(&mut self.held);
        self.redactor.redact_bytes(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};

    use super::*;

    const KEY: &str = "sk-test-0123456789abcdefXYZ";

    /// A text holding the key in several forms, one right after another.
    fn text() -> String {
        let reversed: String = KEY.chars().rev().collect();
        let b64 = URL_SAFE.encode(format!("Bearer {KEY}"));
        let plain = STANDARD.encode(KEY);
        format!("héllo {KEY} and {reversed}, ünï {b64}{KEY}{KEY} {plain}sk-test- end\n\n")
    }

    #[test]
    fn a_stream_split_anywhere_is_redacted_as_the_whole_text() {
        let r = Redactor::with([KEY]);
        let text = text();
        let whole = r.redact(&text).into_owned();
        assert!(!whole.contains(KEY) && whole.contains("[redacted]"));
        let bounds: Vec<usize> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect();
        // Every cut into three pieces whose middle is at most 40 characters (a form split
        // twice), and into two (the last piece empty), as text and as bytes.
        for (n, &a) in bounds.iter().enumerate() {
            for &b in bounds[n..].iter().take(40).chain([&text.len()]) {
                let pieces = [&text[..a], &text[a..b], &text[b..]];
                let mut s = StreamRedactor::new(r.clone());
                let mut bytes = ByteStreamRedactor::new(r.clone());
                let (mut out, mut out_bytes) = (String::new(), Vec::new());
                for piece in pieces {
                    let got = s.push(piece);
                    assert!(!got.contains(KEY), "{a} {b}: {got}");
                    out.push_str(&got);
                    out_bytes.extend(bytes.push(piece.as_bytes()));
                }
                out.push_str(&s.finish());
                out_bytes.extend(bytes.finish());
                assert_eq!(out, whole, "cut at {a} and {b}");
                assert_eq!(out_bytes, whole.as_bytes(), "cut at {a} and {b}");
            }
        }
    }

    #[test]
    fn only_what_may_begin_a_secret_is_held_back() {
        let r = Redactor::with([KEY]);
        let mut s = StreamRedactor::new(r.clone());
        // An event's end, a word: nothing that begins a form of the key.
        assert_eq!(s.push("data: {\"x\": 1}\n\n"), "data: {\"x\": 1}\n\n");
        // The start of the key is held until the rest shows it is not the key...
        assert_eq!(s.push("see sk-te"), "see ");
        assert_eq!(s.push("a time"), "sk-tea time");
        // ... or that it is.
        assert_eq!(s.push(" sk-test-0123"), " ");
        assert_eq!(s.push("456789abcdefXYZ!"), "[redacted]!");
        assert_eq!(s.finish(), "");
        // Bytes that are not UTF-8 pass as they are.
        let mut b = ByteStreamRedactor::new(r);
        assert_eq!(b.push(b"\xff\xfe"), b"\xff\xfe");
        assert_eq!(b.finish(), b"");
        // Without secrets, nothing is ever held.
        let mut none = StreamRedactor::new(Redactor::new());
        assert_eq!(none.push("sk-te"), "sk-te");
    }
}
