//! Helpers shared by the integration tests (`mod common;`).
#![allow(dead_code)]

pub mod cli;
pub mod fake_server;
pub mod lab;
pub mod py;
pub mod redis;
pub mod script;
pub mod serve_proc;

/// Serve `app` on a free loopback port, in the background: `http://127.0.0.1:PORT`.
pub async fn serve_on_loopback(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}
