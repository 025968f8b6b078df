//! Scanners over a turn's text as it streams in, which every model client (the HTTP one and the
//! scripted one) runs the same way, so that a turn ends at the same byte whatever the server
//! does: the stop strings, enforced on our side (`stops.rs`: [`StopScanner`]), and the end of a
//! turn that writes a block it already wrote (`blocks.rs`: [`RepeatedBlock`], watched by a
//! [`BlockWatch`]). Pure code over text: no I/O, no knowledge of models, requests or servers;
//! the model clients (`crate::llm`) sit above and re-export what a caller names.

mod blocks;
mod stops;

pub(crate) use blocks::BlockWatch;
pub use blocks::{BlockCheck, RepeatedBlock};
pub use stops::StopScanner;
