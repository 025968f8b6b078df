//! The client's `stop_sequences` applied to an answer's text as it goes out: the text is cut
//! before the first stop sequence, which is named in `stop_sequence`. Text that could be the
//! start of a stop sequence is held until the next piece shows whether it is one.

/// Cuts one answer's text at the first of its stop sequences.
#[derive(Debug, Default)]
pub(crate) struct StopCut {
    stops: Vec<String>,
    /// Text held back: it ends with what may be the start of a stop sequence.
    held: String,
    /// The stop sequence that ended the text.
    hit: Option<String>,
}

impl StopCut {
    pub(crate) fn new(stops: Vec<String>) -> StopCut {
        StopCut {
            stops,
            ..StopCut::default()
        }
    }

    /// The stop sequence that ended the text, once one did.
    pub(crate) fn hit(&self) -> Option<&str> {
        self.hit.as_deref()
    }

    /// Take in the next piece of text; what may go out now.
    pub(crate) fn push(&mut self, text: &str) -> String {
        if self.hit.is_some() {
            return String::new();
        }
        if self.stops.is_empty() {
            return text.to_string();
        }
        self.held.push_str(text);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()).map(|at| (at, s)))
            .min_by_key(|(at, s)| (*at, std::cmp::Reverse(s.len())));
        if let Some((at, stop)) = first {
            self.hit = Some(stop.clone());
            let out = self.held[..at].to_string();
            self.held.clear();
            return out;
        }
        // Keep the longest tail that begins some stop sequence.
        let keep = self
            .stops
            .iter()
            .flat_map(|s| {
                (1..s.len())
                    .filter(|n| s.is_char_boundary(*n) && self.held.ends_with(&s[..*n]))
                    .max()
            })
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// The text still held at the end of the answer.
    pub(crate) fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_stop_split_across_pieces() {
        let mut cut = StopCut::new(vec!["END".into()]);
        let mut out = cut.push("one two E");
        assert_eq!(out, "one two ");
        out.push_str(&cut.push("N"));
        out.push_str(&cut.push("D three"));
        out.push_str(&cut.push("more"));
        assert_eq!(out, "one two ");
        assert_eq!(cut.hit(), Some("END"));
        assert_eq!(cut.finish(), "");
    }

    #[test]
    fn a_false_start_is_sent_once_it_is_known() {
        let mut cut = StopCut::new(vec!["END".into()]);
        let mut out = cut.push("an E");
        out.push_str(&cut.push("nd"));
        out.push_str(&cut.finish());
        assert_eq!(out, "an End");
        assert_eq!(cut.hit(), None);
    }
}
