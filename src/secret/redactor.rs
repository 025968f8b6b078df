//! [`Redactor`]: every secret tagloop knows of in a run, and the forms derived from it, replaced
//! with [`REDACTED`] (see the module above for where it is applied and which forms).

use std::borrow::Cow;

use base64::Engine;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use memchr::memmem;
use serde_json::Value;

use super::Secret;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not redacted: a two-letter "key" would turn ordinary text into
/// `[redacted]` everywhere and protects nothing anyway.
pub const MIN_SECRET_LEN: usize = 4;

/// Derived encodings are only searched for secrets at least this long; the alignment-independent
/// core of a shorter secret's base64 is so short that it would match innocent text.
const MIN_DERIVED_LEN: usize = 8;

/// Replaces every secret it holds, and the forms derived from it, with [`REDACTED`].
///
/// Cheap to clone and to share; an empty redactor leaves text untouched (and borrows it).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Every string to replace, longest first so a longer form wins over a part of it.
    pub(super) needles: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} forms)", self.needles.len())
    }
}

impl Redactor {
    /// A redactor with no secrets.
    pub fn new() -> Self {
        Redactor::default()
    }

    /// A redactor for these secrets (empty and too-short ones are ignored).
    pub fn with<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut r = Redactor::new();
        for s in secrets {
            r.add(s.as_ref());
        }
        r
    }

    /// Add a secret and its derived forms.
    pub fn add(&mut self, secret: &str) {
        if secret.len() < MIN_SECRET_LEN {
            return;
        }
        let mut forms = vec![secret.to_owned(), secret.chars().rev().collect()];
        if secret.len() >= MIN_DERIVED_LEN {
            for engine in [&STANDARD, &URL_SAFE] {
                forms.push(engine.encode(format!("Bearer {secret}")));
                forms.push(engine.encode(secret));
                for shift in 0..3 {
                    forms.push(base64_core(secret.as_bytes(), shift, engine));
                }
            }
        }
        for f in forms {
            let f = f.trim_end_matches('=').to_owned();
            if f.len() >= MIN_SECRET_LEN && !self.needles.contains(&f) {
                self.needles.push(f);
            }
        }
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    }

    /// Add a [`Secret`] (see [`Redactor::add`]).
    pub fn add_secret(&mut self, secret: &Secret) {
        self.add(secret.expose());
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Whether `text` holds any secret or derived form.
    pub fn finds(&self, text: &str) -> bool {
        self.finds_bytes(text.as_bytes())
    }

    /// Whether `bytes` (UTF-8 or not) hold any secret or derived form.
    pub fn finds_bytes(&self, bytes: &[u8]) -> bool {
        self.needles
            .iter()
            .any(|n| memmem::find(bytes, n.as_bytes()).is_some())
    }

    /// `text` with every secret and derived form replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.redact_bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // A needle is valid UTF-8, so it starts and ends on character boundaries of valid
            // UTF-8 text, and replacing it keeps the text valid; the lossy branch never runs.
            Cow::Owned(bytes) => Cow::Owned(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// `bytes` with every secret and derived form replaced by [`REDACTED`], searched byte for
    /// byte: the same as [`Redactor::redact`] on UTF-8, and it also finds the key in text that is
    /// not UTF-8 (a Latin-1 error page that echoes `Bearer KEY`).
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if !self.finds_bytes(bytes) {
            return Cow::Borrowed(bytes);
        }
        let mut out = bytes.to_vec();
        // Longest first, so that a longer form wins over a part of it.
        for n in &self.needles {
            out = replace_all(out, n.as_bytes());
        }
        Cow::Owned(out)
    }

    /// [`Redactor::redact`] into an owned string.
    pub fn redact_string(&self, text: String) -> String {
        match self.redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(s) => s,
        }
    }

    /// Redact every string (keys included) in a JSON value, in place.
    pub fn redact_json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) if self.finds(s) => *s = self.redact(s).into_owned(),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let keys: Vec<String> = map.keys().filter(|k| self.finds(k)).cloned().collect();
                for k in keys {
                    if let Some(v) = map.remove(&k) {
                        map.insert(self.redact(&k).into_owned(), v);
                    }
                }
                map.values_mut().for_each(|v| self.redact_json(v));
            }
            _ => {}
        }
    }
}

/// `haystack` with every occurrence of `needle` replaced by [`REDACTED`].
fn replace_all(haystack: Vec<u8>, needle: &[u8]) -> Vec<u8> {
    let finder = memmem::Finder::new(needle);
    let mut at = 0;
    let mut out: Option<Vec<u8>> = None;
    for start in finder.find_iter(&haystack) {
        let o = out.get_or_insert_with(|| Vec::with_capacity(haystack.len()));
        o.extend_from_slice(&haystack[at..start]);
        o.extend_from_slice(REDACTED.as_bytes());
        at = start + needle.len();
    }
    match out {
        None => haystack,
        Some(mut o) => {
            o.extend_from_slice(&haystack[at..]);
            o
        }
    }
}

/// The part of the base64 of `data` that is the same whatever precedes it, when it starts
/// `shift` bytes (0–2) past a 3-byte boundary of a longer text: the characters that depend only
/// on `data`'s own bytes.
fn base64_core(data: &[u8], shift: usize, engine: &GeneralPurpose) -> String {
    let mut shifted = vec![0u8; shift];
    shifted.extend_from_slice(data);
    let encoded = engine.encode(&shifted);
    // The first characters mix the zero prefix in: skip the groups that hold any of it.
    let skip = if shift == 0 { 0 } else { 4 };
    // The last group mixes in what follows unless the data ends on a boundary: drop it.
    let full_groups = (shift + data.len()) / 3;
    let end = full_groups * 4;
    encoded.get(skip..end).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789abcdefXYZ";

    #[test]
    fn redacts_the_key_and_its_cheap_forms() {
        let r = Redactor::with([KEY]);
        let reversed: String = KEY.chars().rev().collect();
        let texts = [
            format!("Incorrect API key provided: Bearer {KEY}."),
            format!("reversed: {reversed}"),
            format!("b64: {}", STANDARD.encode(KEY)),
            format!("auth: {}", URL_SAFE.encode(format!("Bearer {KEY}"))),
        ];
        for t in &texts {
            let out = r.redact(t);
            assert!(out.contains(REDACTED), "{out}");
            assert!(!out.contains(KEY) && !out.contains(&reversed), "{out}");
        }
        // Inside a longer base64 text (e.g. an encoded /proc/PID/environ), at every alignment.
        for prefix in ["", "A", "AB", "ABC", "OPENAI_API_KEY="] {
            let blob = STANDARD.encode(format!("{prefix}{KEY}\0PATH=/bin"));
            let out = r.redact(&blob);
            assert!(out.contains(REDACTED), "prefix {prefix:?}: {out}");
        }
    }

    #[test]
    fn leaves_other_text_alone_and_ignores_short_secrets() {
        let r = Redactor::with(["", "ab", KEY]);
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(r.redact("ab ab"), "ab ab");
        assert!(Redactor::new().is_empty());
    }

    #[test]
    fn redacts_json_strings_and_keys() {
        let r = Redactor::with([KEY]);
        let mut v = serde_json::json!({"error": format!("bad key {KEY}"), KEY: [KEY, 1]});
        r.redact_json(&mut v);
        let text = v.to_string();
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains(REDACTED));
    }

    #[test]
    fn redacts_bytes_that_are_not_utf8() {
        let r = Redactor::with([KEY]);
        // A Latin-1 page: `é` is the lone byte 0xE9, which is not UTF-8.
        let page = [
            b"Cl\xe9 refus\xe9e : Bearer ".as_slice(),
            KEY.as_bytes(),
            b"\xff",
        ]
        .concat();
        assert!(std::str::from_utf8(&page).is_err());
        let out = r.redact_bytes(&page);
        assert_eq!(
            out.as_ref(),
            [b"Cl\xe9 refus\xe9e : Bearer [redacted]\xff".as_slice()].concat()
        );
        let b64 = STANDARD.encode(format!("Bearer {KEY}"));
        let page = [b"\xfe".as_slice(), b64.as_bytes()].concat();
        assert!(
            !r.redact_bytes(&page)
                .windows(b64.len() - 2)
                .any(|w| b64.as_bytes().starts_with(w))
        );
        assert!(matches!(r.redact_bytes(b"\xff clean"), Cow::Borrowed(_)));
    }
}
