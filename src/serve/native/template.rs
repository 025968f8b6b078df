//! The upstream's chat template, rendered here with minijinja: the template is the server's
//! text (outside input), so its work is bounded in fuel (minijinja's instruction count) and its
//! output in bytes, and a failure is a [`TemplateError`], never a panic.
//!
//! What Hugging Face templates expect of their renderer is provided: `raise_exception`,
//! `strftime_now`, and a `tojson` that writes as Python's `json.dumps` does (`", "` and `": "`
//! between items, no HTML escapes; an `indent` argument), since the model was trained on that
//! text, not on minijinja's compact, HTML-safe one.

use std::io::{self, Write};

use minijinja::value::{Serde, Value as Jinja};
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{Formatter, PrettyFormatter, Serializer};

use super::markers::Markers;

/// Most template instructions one rendering may run.
const FUEL: u64 = 5_000_000;
/// Largest rendered prompt, in bytes.
pub(crate) const MAX_PROMPT: usize = 8 * 1024 * 1024;

/// Why the chat template could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TemplateError {
    /// The template does not compile, or failed while rendering (`raise_exception`, fuel).
    #[error("the chat template failed: {0}")]
    Render(String),
    /// It rendered more than [`MAX_PROMPT`] bytes.
    #[error("the chat template rendered more than {MAX_PROMPT} bytes")]
    TooLarge,
}

/// A compiled chat template and the special tokens it is given.
#[derive(Debug)]
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    /// The markers its text spells, kept out of the client's texts.
    markers: Markers,
}

impl ChatTemplate {
    /// Compile `source`; `bos` and `eos` are the server's `bos_token` and `eos_token`.
    pub(crate) fn new(source: &str, bos: &str, eos: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(64);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat".to_string(), source.to_string())
            .map_err(|e| TemplateError::Render(e.to_string()))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
            markers: Markers::of(source, bos, eos),
        })
    }

    /// The markers of this template (and the server's BOS and EOS).
    pub(crate) fn markers(&self) -> &Markers {
        &self.markers
    }

    /// The prompt for `messages` and `tools` (OpenAI's shapes), opened for the assistant's turn.
    pub(crate) fn render(
        &self,
        messages: &[Value],
        tools: &[Value],
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| TemplateError::Render(e.to_string()))?;
        let ctx = minijinja::context! {
            messages => Jinja::from(Serde(messages)),
            tools => if tools.is_empty() { Jinja::from(()) } else { Jinja::from(Serde(tools)) },
            add_generation_prompt => true,
            bos_token => self.bos.clone(),
            eos_token => self.eos.clone(),
        };
        let mut out = Capped {
            bytes: Vec::new(),
            over: false,
        };
        match template.render_captured_to(ctx, &mut out) {
            Ok(_) => {}
            Err(_) if out.over => return Err(TemplateError::TooLarge),
            Err(e) => return Err(TemplateError::Render(e.to_string())),
        }
        String::from_utf8(out.bytes).map_err(|e| TemplateError::Render(e.to_string()))
    }
}

/// A writer that refuses to grow past [`MAX_PROMPT`].
struct Capped {
    bytes: Vec<u8>,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_PROMPT {
            self.over = true;
            return Err(io::Error::other("the rendered prompt is too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn raise_exception(message: String) -> Result<Jinja, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// The date as Python's `strftime` with the few codes templates use (`%d %b %Y`, `%Y-%m-%d`).
fn strftime_now(format: String) -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    let (y, m, d) = civil(days);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format
        .replace("%Y", &y.to_string())
        .replace("%m", &format!("{m:02}"))
        .replace("%d", &format!("{d:02}"))
        .replace("%b", MONTHS[(m as usize).saturating_sub(1).min(11)])
}

/// Days since 1970-01-01 as (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `value | tojson` or `value | tojson(indent=N)`, as Python's `json.dumps` writes it.
fn tojson(value: Jinja, kwargs: minijinja::value::Kwargs) -> Result<Jinja, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let value = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n.min(16)];
            value.serialize(&mut Serializer::with_formatter(
                &mut out,
                PrettyFormatter::with_indent(&pad),
            ))
        }
        None => value.serialize(&mut Serializer::with_formatter(&mut out, Spaced)),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    Ok(Jinja::from_safe_string(text))
}

/// JSON on one line with Python's default separators.
struct Spaced;

impl Formatter for Spaced {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tojson_writes_as_python_does() {
        let t = ChatTemplate::new("{{ messages[0] | tojson }}", "", "").unwrap();
        let out = t
            .render(
                &[json!({"role": "user", "content": "a <b> & c", "n": [1, 2]})],
                &[],
            )
            .unwrap();
        assert_eq!(
            out,
            r#"{"role": "user", "content": "a <b> & c", "n": [1, 2]}"#
        );
    }

    #[test]
    fn a_raised_exception_is_an_error() {
        let t = ChatTemplate::new("{{ raise_exception('no tools here') }}", "", "").unwrap();
        let e = t.render(&[], &[]).unwrap_err();
        assert!(e.to_string().contains("no tools here"), "{e}");
    }

    #[test]
    fn a_template_that_loops_forever_runs_out_of_fuel() {
        let t = ChatTemplate::new(
            "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        assert!(matches!(t.render(&[], &[]), Err(TemplateError::Render(_))));
    }

    #[test]
    fn a_template_that_writes_too_much_is_refused() {
        let t = ChatTemplate::new(
            "{% for i in range(10000) %}{{ messages[0].content }}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        let big = "x".repeat(1024);
        let e = t.render(&[json!({"content": big})], &[]).unwrap_err();
        assert!(matches!(e, TemplateError::TooLarge), "{e}");
    }

    #[test]
    fn the_date_is_a_calendar_date() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(20_454), (2026, 1, 1));
    }
}
