//! The client's questions to its server beside the turns (its kind, its window, its tokenizer,
//! its model list), asked through [`Upstream`](crate::upstream::Upstream), and their failures as
//! [`LlmError`], redacted as a turn's are.

use super::OpenAiModel;
use crate::llm::{LlmError, Prompt, Role, ServerKind};
use crate::upstream::{Tokenize, UpstreamError};

impl OpenAiModel {
    /// The server's kind: stated in the config, or detected once.
    pub async fn server_kind(&self) -> ServerKind {
        self.upstream.kind().await
    }

    /// The ids the server lists at `GET {base_url}/models` (asked as a turn is: key, no redirect,
    /// 30 s, 1 MiB). Ids are the server's text: neutralise them before showing them.
    pub async fn served_models(&self) -> Result<Vec<String>, LlmError> {
        let models = self.upstream.served_models().await;
        models.map_err(|e| self.upstream_error(e))
    }

    /// [`Model::count_tokens`](crate::llm::Model::count_tokens): the server's own count, when it
    /// has a tokenizer (see `crate::upstream`).
    pub(super) async fn count(&self, prompt: &Prompt) -> Result<Option<u64>, LlmError> {
        let prompt = match prompt {
            Prompt::Chat(messages) => Tokenize::Chat {
                messages,
                continued: self.cfg.prefill
                    && messages.last().is_some_and(|m| m.role == Role::Assistant),
            },
            Prompt::Text(text) => Tokenize::Text(text),
        };
        let counted = self.upstream.count(prompt).await;
        counted.map_err(|e| self.upstream_error(e))
    }

    /// A failure beside the turns, as our error, mapped as a turn's is, and redacted.
    fn upstream_error(&self, e: UpstreamError) -> LlmError {
        let err = match e {
            UpstreamError::Fault(fault) => return self.fault(fault, 0).err,
            UpstreamError::Unexpected(message) => LlmError::Other(message),
            UpstreamError::Malformed { reason, snippet } => LlmError::Malformed {
                url: self.base_url.clone(),
                reason,
                snippet,
            },
        };
        err.redacted(&self.redactor)
    }
}
