//! Reading one model turn (docs/protocol.md §1.1): a hand-written, case-insensitive scan for the protocol tags.
//!
//! Model text is not XML: a bare `<` in prose or code is content, so no XML reader is used here.
//!
//! The order of work is fixed by the protocol (docs/protocol.md §1.1): `<think>` blocks are removed first, then a markdown
//! fence around the whole turn is unwrapped, then the remaining text is split into blocks. Removed
//! pieces are *masked*, never copied out, so every span still points into the original text.
//!
//! * `types.rs`: what a reading gives ([`Turn`], [`Block`], [`Tag`]).
//! * `scan.rs`: the tag scanner over the live (unmasked) text.
//! * `prepare.rs`: the partial stop string, `<think>` removal and the fence.
//! * `read.rs`: thoughts, the decision, and calls in other dialects.

#[cfg(test)]
mod linear;
mod prepare;
mod read;
mod scan;
mod types;

pub use read::unwrap_cdata;
pub use read::{read_turn, read_turn_with};
pub(crate) use types::ALL_TAGS;
pub use types::{Block, Span, Tag, Turn, TurnKind};
