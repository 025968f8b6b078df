//! Helpers shared by the integration tests (`mod common;`).
#![allow(dead_code)]

pub mod cli;
pub mod fake_server;
pub mod lab;
pub mod py;
pub mod redis;
pub mod script;
pub mod serve_proc;
