//! What a fake server is told to do: its turns and the switches of the module's table.

use super::*;

/// What the server does with the request's `stop` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopMode {
    /// Stop at the first stop string and leave it out (OpenAI, vLLM).
    #[default]
    Strip,
    /// Stop at it and keep it in the text (TGI).
    Keep,
    /// Ignore `stop`: send the whole turn.
    Ignore,
    /// Reject a request that has `stop` with a 400 naming it (OpenAI reasoning models).
    Reject,
    /// Strip it, but flush half of the stop string first (llama.cpp streaming bug).
    FlushPartial,
}

/// What Ollama's own endpoints say of a model's window.
#[derive(Debug, Clone, Default)]
pub struct FakeOllama {
    /// `model_info.<arch>.context_length` in `/api/show` (what the model could take).
    pub model_context: u64,
    /// A `num_ctx` line in `/api/show`'s `parameters`.
    pub num_ctx: Option<u64>,
    /// The model is loaded with this `context_length` (`/api/ps`); `None`: nothing loaded.
    pub loaded: Option<u64>,
}

/// How a server refuses a prompt over its window (`context_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextShape {
    /// llama.cpp: 400, `exceed_context_size_error`, `n_prompt_tokens` 3000 and `n_ctx` 2048.
    LlamaCpp,
    /// vLLM: 400, "maximum context length is 2048 tokens. However, you requested 3000 tokens…".
    Vllm,
    /// SGLang: 400, "The input (3000 tokens) is longer than the model's context length (2048 tokens)".
    Sglang,
    /// OpenAI: 400, `context_length_exceeded`, "…maximum context length is 2048 tokens. However,
    /// your messages resulted in 3000 tokens…".
    OpenAi,
    /// llama.cpp's refusal inside a 200 stream (an `error` event), for a streamed request; a
    /// whole one gets the 400.
    InBand,
}

impl ContextShape {
    /// The error object the server sends.
    pub(super) fn error(self) -> Value {
        match self {
            ContextShape::LlamaCpp | ContextShape::InBand => {
                json!({"error": {"code": 400, "message": "request (3000 tokens) exceeds the available context size (2048 tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 3000, "n_ctx": 2048}})
            }
            ContextShape::Vllm => {
                json!({"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", "type": "BadRequestError", "param": null, "code": 400})
            }
            ContextShape::Sglang => {
                json!({"object": "error", "message": "The input (3000 tokens) is longer than the model's context length (2048 tokens).", "type": "BadRequestError", "param": null, "code": 400})
            }
            ContextShape::OpenAi => {
                json!({"error": {"message": "This model's maximum context length is 2048 tokens. However, your messages resulted in 3000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
            }
        }
    }
}

/// How the fake server behaves.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Replies in order, one per successful request.
    pub turns: Vec<String>,
    /// Reply once the turns run out.
    pub default_reply: String,
    /// Reasoning sent as `reasoning_content` before the text.
    pub reasoning: Option<String>,
    /// Stop handling.
    pub stop_mode: StopMode,
    /// Send vLLM's `stop_reason` with the stop string.
    pub stop_reason: bool,
    /// SSE body bytes per write.
    pub chunk_bytes: usize,
    /// Characters per content delta ("token").
    pub token_chars: usize,
    /// `finish_reason: ""` on non-final chunks.
    pub empty_finish_reason: bool,
    /// Leave out `id`, `object`, `created`, `model`.
    pub missing_ids: bool,
    /// Answer 500 to the first N requests.
    pub fail_first: usize,
    /// Then answer 429 to the next N requests.
    pub rate_limit_first: usize,
    /// `Retry-After` value (seconds) on 429s.
    pub retry_after: Option<String>,
    /// Pause before the first body byte.
    pub first_byte_delay: Duration,
    /// Pause between body chunks.
    pub chunk_delay: Duration,
    /// Abort the connection after this many content events.
    pub cut_after_events: Option<usize>,
    /// One malformed event (stream) or a malformed body (whole).
    pub malformed_json: bool,
    /// `choices: []`.
    pub empty_choices: bool,
    /// When not empty, other model names get 404.
    pub known_models: Vec<String>,
    /// When set, requests without this bearer key get 401.
    pub require_key: Option<String>,
    /// Pick the reply by the step the request is at (the number of `<observation>` blocks in its
    /// prompt) instead of in arrival order, so many concurrent episodes each get their own script.
    pub by_step: bool,
    /// Answer `GET /props` as llama.cpp does.
    pub props: bool,
    /// Answer `GET /v1/models` with this `owned_by`.
    pub owned_by: Option<String>,
    /// The ids `GET /v1/models` lists; `None` lists `fake-model`.
    pub served_models: Option<Vec<String>>,
    /// Refuse a request with a grammar (`grammar`, `structured_outputs`, `ebnf`) with a 400
    /// naming the field.
    pub reject_grammar: bool,
    /// Refuse a chat whose last message is the assistant's (prefill) with llama.cpp's 400.
    pub reject_prefill: bool,
    /// Send the whole turn whatever `max_tokens` says.
    pub ignore_max_tokens: bool,
    /// Bytes of padding in the `/props` answer (with `props`).
    pub props_padding: usize,
    /// The `chat_template` the `/props` answer carries (with `props`).
    pub chat_template: Option<String>,
    /// Answer every completion request with this status and this many bytes of body (`x`s),
    /// streamed in 64 KiB pieces; `aborted()` counts it when the client hangs up before the end.
    pub huge_body: Option<(u16, usize)>,
    /// The window `/props` reports as `default_generation_settings.n_ctx`.
    pub props_n_ctx: u64,
    /// `max_model_len` on every `/v1/models` entry.
    pub max_model_len: Option<u64>,
    /// Answer Ollama's `/api/ps` and `/api/show`.
    pub ollama: Option<FakeOllama>,
    /// Answer `/tokenize` and `/apply-template` (404 otherwise).
    pub tokenizer: bool,
    /// Refuse every completion request as a prompt over the window.
    pub context_error: Option<ContextShape>,
    /// `(needle, reply)` pairs: a request whose prompt text (the messages' contents, or the
    /// completions prompt) contains a needle gets that reply, the first pair found winning;
    /// others fall back to `turns` / `default_reply`. For a proxy in front of this server whose
    /// prompt layout the test does not fix: the reply follows what the conversation holds (a
    /// tool's result, a word of the question), not how many requests came before or in what
    /// words the proxy framed them.
    pub by_content: Vec<(String, String)>,
    /// Refuse a completion request whose prompt tokens ([`FakeServer::prompt_tokens`]) plus its
    /// `max_tokens` exceed `props_n_ctx`, with llama.cpp's 400 and its numbers; answers report
    /// the same count as `prompt_tokens` (as llama.cpp does).
    pub enforce_window: bool,
    /// `/tokenize` answers this percentage of the count `enforce_window` uses (100: the same).
    pub tokenize_percent: u64,
    /// Serve's guess at a question's function, answered apart from the turns.
    pub guess: super::FakeGuess,
    /// End a streamed body this long after its last event (`[DONE]`).
    pub done_delay: Duration,
    /// `Connection: close` on every answer: a new connection for each request.
    pub close_after_answer: bool,
    /// `400` to `stream: true`.
    pub reject_stream: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            turns: Vec::new(),
            default_reply: "<final_answer>ok</final_answer>".to_owned(),
            reasoning: None,
            stop_mode: StopMode::Strip,
            stop_reason: false,
            chunk_bytes: 7,
            token_chars: 3,
            empty_finish_reason: false,
            missing_ids: false,
            fail_first: 0,
            rate_limit_first: 0,
            retry_after: None,
            first_byte_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            cut_after_events: None,
            malformed_json: false,
            empty_choices: false,
            known_models: Vec::new(),
            require_key: None,
            by_step: false,
            props: false,
            owned_by: None,
            served_models: None,
            reject_grammar: false,
            reject_prefill: false,
            ignore_max_tokens: false,
            props_padding: 0,
            chat_template: None,
            huge_body: None,
            props_n_ctx: 8192,
            max_model_len: None,
            ollama: None,
            tokenizer: false,
            context_error: None,
            by_content: Vec::new(),
            enforce_window: false,
            tokenize_percent: 100,
            guess: super::FakeGuess::default(),
            done_delay: Duration::ZERO,
            close_after_answer: false,
            reject_stream: false,
        }
    }
}

impl FakeConfig {
    /// Defaults with these scripted turns.
    pub fn turns<I, S>(turns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        FakeConfig {
            turns: turns.into_iter().map(Into::into).collect(),
            ..FakeConfig::default()
        }
    }
}
