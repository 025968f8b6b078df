//! The think → act → observe loop. (in progress)
