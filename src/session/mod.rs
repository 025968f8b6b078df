//! Transcripts on disk. (in progress)
