//! The upstream's chat template, as llama.cpp publishes it: `GET /props` at the server's root
//! (beside `/v1`), fields `chat_template`, `bos_token`, `eos_token`. Asked without the key
//! (llama.cpp serves it openly), following no redirect, within [`PROBE_TIME`], reading at most
//! [`MAX_PROPS`] bytes.

use std::time::Duration;

use serde::Deserialize;

use crate::upstream::read_up_to;

/// Time the probe may take.
const PROBE_TIME: Duration = Duration::from_secs(10);
/// Largest `/props` answer read.
const MAX_PROPS: usize = 1024 * 1024;

/// What `/props` says of the chat template.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub(crate) struct Props {
    #[serde(default)]
    pub chat_template: Option<String>,
    #[serde(default)]
    pub bos_token: Option<String>,
    #[serde(default)]
    pub eos_token: Option<String>,
}

/// Why the probe gave no answer (the upstream may still answer turns).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("GET /props failed: {0}")]
    Http(String),
    #[error("GET /props answered HTTP {0}")]
    Status(u16),
    #[error("GET /props answered more than {MAX_PROPS} bytes")]
    TooLarge,
    #[error("GET /props is not the JSON llama.cpp sends: {0}")]
    NotProps(String),
}

/// Ask `upstream` (its base URL, with `/v1`) for its props.
pub(crate) async fn fetch(upstream: &str) -> Result<Props, ProbeError> {
    let base = upstream.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PROBE_TIME)
        .build()
        .map_err(|e| ProbeError::Http(e.to_string()))?;
    let response = client
        .get(format!("{root}/props"))
        .send()
        .await
        .map_err(|e| ProbeError::Http(e.without_url().to_string()))?;
    if !response.status().is_success() {
        return Err(ProbeError::Status(response.status().as_u16()));
    }
    let (bytes, whole) = read_up_to(response, MAX_PROPS)
        .await
        .map_err(|e| ProbeError::Http(e.without_url().to_string()))?;
    if !whole {
        return Err(ProbeError::TooLarge);
    }
    serde_json::from_slice(&bytes).map_err(|e| ProbeError::NotProps(e.to_string()))
}
