//! Completion servers as backends: vLLM, llama.cpp's server, llama-cpp-python's server, or
//! any OpenAI-compatible `POST /v1/completions`. Each prompt asks for one generated token at
//! temperature 0 with the top log-probabilities of the next token, and p(a), p(b), p(c) are
//! read from them.
//!
//! - Tokenization stays ours: the prompt goes as token ids where the server takes them (vLLM,
//!   llama.cpp), so no server adds a second BOS or tokenizes differently. A server that
//!   refuses ids with an error status (llama-cpp-python's takes text only, and answers 500)
//!   gets the text, and every reply's
//!   `usage.prompt_tokens` must equal our token count; where it is one more or one less, the
//!   BOS written by the chat template is dropped from or added to the text, once, for all.
//! - Log-probabilities come by the server's own mechanism: `logprobs: n` keyed by
//!   `token_id:<id>` (vLLM with `return_tokens_as_token_ids`) or by token text
//!   (llama-cpp-python), or llama.cpp's `logprobs.content[0].top_logprobs` with ids. Every
//!   option id must come back: one missing from the top-n is asked again with a larger n,
//!   and still missing is an error (never read as p = 0). Every returned probability must
//!   be finite and in [0, 1], their sum at most 1 + 1e-4; a reply that is not is retried.
//! - `concurrency` requests are in flight at once. A unit's first prompt goes alone, so the
//!   server's prefix cache holds the shared context before the others arrive.
//! - Timeouts, retries with backoff and the API key are the shared client's
//!   ([`pstat_http`]); a failure names the prompt (its number and statement).
//! - The judgments are keyed by [`backend_key`]: the completions URL and the model id the
//!   server reports at `GET /v1/models`, so two servers (or one restarted on another model)
//!   never share cached answers.
//!
//! llama.cpp's native `POST /completion` (`n_probs`, ids in and out) is also spoken, when the
//! URL ends in `/completion`.
//!
//! With `logprobs = "prompt"` (vLLM), no top-n is asked for: one request sends the prompt
//! followed by each option token, as a batch of token-id prompts, with `prompt_logprobs: 0`,
//! and each option's log-probability is read at the last position of its prompt. vLLM returns
//! the prompt tokens' own log-probabilities whatever their rank, so its `--max-logprobs` cap
//! (20 by default) never applies.

use crate::error::PromptError;
use crate::scoring::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens, PromptCodec};
use crate::template::QUESTION;
use pstat_http::{Client, HttpError, HttpOptions, endpoint};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How far above 1 a probability, or the sum of the returned ones, may go (float rounding
/// in the server's softmax and in its JSON).
pub const PROBABILITY_TOLERANCE: f64 = 1e-4;

/// Which request/response shape the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerApi {
    /// An OpenAI-compatible completions endpoint (`/v1/completions`).
    OpenAi,
    /// llama.cpp's native `/completion` endpoint.
    LlamaCpp,
}

/// How the prompt is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptInput {
    /// Token ids, or text where the server refuses ids (an HTTP error status on the first
    /// prompt: 400/422, or llama-cpp-python's 500 after the retries).
    #[default]
    Auto,
    /// Always token ids.
    Tokens,
    /// Always text.
    Text,
}

/// How the option tokens' log-probabilities are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogprobRequest {
    /// The next token's top-n (`logprobs: n`, llama.cpp's `n_probs`), grown until every
    /// option is among them.
    #[default]
    TopN,
    /// The prompt followed by each option token, with `prompt_logprobs: 0` (vLLM's completions
    /// endpoint): the options' own log-probabilities at any rank, token ids only.
    Prompt,
}

/// The server backend's settings; every field but `url` has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// A server root or `/v1` base (OpenAI-compatible), or a URL ending in `/completion`
    /// (llama.cpp native).
    pub url: String,
    /// The model to ask for; it must be among those the server lists. None: the server's
    /// only model.
    pub model: Option<String>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Token ids, text, or ids falling back to text (`auto`, default).
    pub prompt: PromptInput,
    /// `top_n` (default) or `prompt` (vLLM, no `--max-logprobs` needed).
    pub logprobs: LogprobRequest,
    /// Top log-probabilities asked for at first; grows tenfold (up to `max_top_logprobs`)
    /// when an option token is not among them.
    pub top_logprobs: usize,
    /// The default is more than any embedded model's vocabulary (Gemma 3: 262,144 tokens), so
    /// an option always comes back where the server allows it (vLLM caps at its
    /// `--max-logprobs`, 20 by default: its error says so).
    pub max_top_logprobs: usize,
    /// HTTP client settings (timeout, retries, backoff, API key variable).
    pub http: HttpOptions,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            url: String::new(),
            model: None,
            concurrency: 8,
            prompt: PromptInput::Auto,
            logprobs: LogprobRequest::TopN,
            top_logprobs: 20,
            max_top_logprobs: 300_000,
            http: HttpOptions::default(),
        }
    }
}

impl ServerConfig {
    /// The defaults with `url`.
    pub fn new(url: &str) -> Self {
        ServerConfig {
            url: url.to_string(),
            ..ServerConfig::default()
        }
    }

    /// Check the settings before any request: an http(s) URL, concurrency ≥ 1, `top_logprobs`
    /// in 1..=`max_top_logprobs`, `logprobs = "prompt"` neither with `prompt = "text"` nor
    /// with llama.cpp's native `/completion` URL, and the HTTP options;
    /// [`PromptError::Backend`] naming the URL otherwise.
    pub fn validate(&self) -> Result<(), PromptError> {
        let bad = |message: String| PromptError::Backend {
            url: self.url.clone(),
            message,
        };
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(bad("the URL must start with http:// or https://".into()));
        }
        if self.concurrency == 0 {
            return Err(bad("concurrency must be at least 1".into()));
        }
        if self.top_logprobs == 0 || self.top_logprobs > self.max_top_logprobs {
            return Err(bad(format!(
                "top_logprobs = {} must be in 1..=max_top_logprobs ({})",
                self.top_logprobs, self.max_top_logprobs
            )));
        }
        if self.logprobs == LogprobRequest::Prompt {
            if self.prompt == PromptInput::Text {
                return Err(bad(
                    "logprobs = \"prompt\" sends token ids; it cannot go with prompt = \"text\""
                        .into(),
                ));
            }
            if self.url.trim_end_matches('/').ends_with("/completion") {
                return Err(bad("logprobs = \"prompt\" needs an OpenAI-compatible /v1/completions (vLLM), not llama.cpp's native /completion".into()));
            }
        }
        self.http.validate().map_err(|e| bad(e.to_string()))
    }
}

/// The key stored with a unit's judgments: the completions endpoint and the model id the
/// server reports, so answers cached from one server are never read back for another.
pub fn backend_key(url: &str, model_id: &str) -> String {
    format!("server:{url}#{model_id}")
}

/// How the returned log-probabilities identify tokens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TokenKey {
    Id(u32),
    Text(String),
}

/// How prompts go once the first one settled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Tokens,
    /// The text; `bos` -1 drops the template's BOS text, +1 prepends it, 0 sends it as is.
    Text {
        bos: i8,
    },
}

/// One checked reply.
#[derive(Debug)]
struct Reply {
    top: HashMap<TokenKey, f64>,
    prompt_tokens: Option<u64>,
}

/// A completion server scoring the answer options.
pub struct ServerScorer {
    url: String,
    api: ServerApi,
    model_id: String,
    options: OptionTokens,
    /// The BOS token and its text, when the tokenizer adds one (for the text fallback).
    bos: Option<(u32, String)>,
    client: Client,
    concurrency: usize,
    input: PromptInput,
    logprobs: LogprobRequest,
    max_top_n: usize,
    top_n: AtomicUsize,
    sent: Mutex<Option<Sent>>,
}

impl ServerScorer {
    /// Connects: asks the server for its model id, and takes the option tokens and BOS from
    /// `codec`, which must be the tokenizer of the model the server runs.
    pub fn connect(config: &ServerConfig, codec: &dyn PromptCodec) -> Result<Self, PromptError> {
        let options = OptionTokens::new(codec)?;
        let bos = match codec.encode_option("")?.as_slice() {
            [id] => Some((*id, codec.piece(*id)?)),
            _ => None,
        };
        Self::open(config, options, bos)
    }

    fn open(
        config: &ServerConfig,
        options: OptionTokens,
        bos: Option<(u32, String)>,
    ) -> Result<Self, PromptError> {
        config.validate()?;
        let (url, api, root) = endpoints(&config.url);
        if api == ServerApi::OpenAi {
            check_distinct_pieces(&url, &options)?;
        }
        let client = Client::new(&config.http).map_err(|e| PromptError::Backend {
            url: url.clone(),
            message: e.to_string(),
        })?;
        let models = client
            .get_json(&endpoint(&root, "v1/models"))
            .map_err(|e| PromptError::Backend {
                url: url.clone(),
                message: format!("listing its models (the model id keys cached judgments): {e}"),
            })?;
        let model_id = choose_model(&models, config.model.as_deref()).map_err(|message| {
            PromptError::Backend {
                url: url.clone(),
                message,
            }
        })?;
        Ok(ServerScorer {
            url,
            api,
            model_id,
            options,
            bos,
            client,
            concurrency: config.concurrency,
            input: config.prompt,
            logprobs: config.logprobs,
            max_top_n: config.max_top_logprobs,
            top_n: AtomicUsize::new(config.top_logprobs),
            sent: Mutex::new(None),
        })
    }

    /// The model id the server reported (and that is sent with every request).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Retries made so far (failed attempts that a later one made good).
    pub fn retries(&self) -> usize {
        self.client.retries()
    }

    fn error(&self, message: impl Into<String>) -> PromptError {
        PromptError::Backend {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    fn body(&self, prompts: &EncodedPrompts, i: usize, sent: Sent, top_n: usize) -> Value {
        let tokens = &prompts.tokens[i];
        match self.api {
            ServerApi::OpenAi => {
                let prompt = match sent {
                    Sent::Tokens => json!(tokens),
                    Sent::Text { bos } => json!(self.text(&prompts.texts[i], bos)),
                };
                json!({
                    "model": self.model_id,
                    "prompt": prompt,
                    "max_tokens": 1,
                    "temperature": 0.0,
                    "logprobs": top_n,
                    "echo": false,
                    "return_tokens_as_token_ids": true,
                })
            }
            ServerApi::LlamaCpp => json!({
                "prompt": tokens,
                "n_predict": 1,
                "n_probs": top_n,
                // Greedy, with probabilities from a plain softmax of the logits.
                "temperature": -1.0,
                "post_sampling_probs": false,
                "cache_prompt": true,
            }),
        }
    }

    fn text<'t>(&self, text: &'t str, bos: i8) -> std::borrow::Cow<'t, str> {
        match (bos, &self.bos) {
            (-1, Some((_, piece))) => text.strip_prefix(piece.as_str()).unwrap_or(text).into(),
            (1, Some((_, piece))) => format!("{piece}{text}").into(),
            _ => text.into(),
        }
    }

    /// The text variants worth trying: as is, and with the BOS text dropped or added where
    /// our tokens start with BOS.
    fn text_variants(&self, prompts: &EncodedPrompts, i: usize) -> Vec<i8> {
        let mut variants = vec![0];
        if let Some((id, piece)) = &self.bos
            && prompts.tokens[i].first() == Some(id)
        {
            variants.push(if prompts.texts[i].starts_with(piece.as_str()) {
                -1
            } else {
                1
            });
        }
        variants
    }

    fn post(
        &self,
        prompts: &EncodedPrompts,
        i: usize,
        sent: Sent,
        top_n: usize,
    ) -> Result<Reply, HttpError> {
        let api = self.api;
        self.client
            .post_json(&self.url, &self.body(prompts, i, sent, top_n), |v| {
                parse_reply(api, &v)
            })
    }

    /// The prompt-token count the server reports must be ours (for text: the BOS check).
    fn count_matches(&self, reply: &Reply, prompts: &EncodedPrompts, i: usize, sent: Sent) -> bool {
        match reply.prompt_tokens {
            Some(n) => n == prompts.tokens[i].len() as u64,
            // Without a count, only ids we sent ourselves are known to be what was read.
            None => sent == Sent::Tokens || self.api == ServerApi::LlamaCpp,
        }
    }

    /// Sends prompt `i` the settled way, or settles it (on the first prompt).
    fn request(
        &self,
        prompts: &EncodedPrompts,
        i: usize,
        top_n: usize,
    ) -> Result<Reply, PromptError> {
        let settled = *self.sent.lock().expect("no panics while held");
        let name = || request_name(prompts, i);
        let http = |e: HttpError| self.error(format!("{}: {e}", name()));
        if let Some(sent) = settled {
            let reply = self.post(prompts, i, sent, top_n).map_err(http)?;
            if !self.count_matches(&reply, prompts, i, sent) {
                return Err(self.error(format!(
                    "{}: the server read {} prompt tokens where {} were sent; the tokenization is no longer under pstat's control",
                    name(),
                    reply.prompt_tokens.map_or("an unknown number of".into(), |n| n.to_string()),
                    prompts.tokens[i].len()
                )));
            }
            return Ok(reply);
        }
        // Settle: ids if the server takes them, else the text variant it counts as we do.
        let mut refused = None;
        if self.api == ServerApi::LlamaCpp || self.input != PromptInput::Text {
            match self.post(prompts, i, Sent::Tokens, top_n) {
                Ok(reply) if self.count_matches(&reply, prompts, i, Sent::Tokens) => {
                    *self.sent.lock().expect("no panics while held") = Some(Sent::Tokens);
                    return Ok(reply);
                }
                Ok(reply) => {
                    return Err(self.error(format!(
                        "{}: the server read {:?} prompt tokens where {} token ids were sent",
                        name(),
                        reply.prompt_tokens,
                        prompts.tokens[i].len()
                    )));
                }
                // A refusal of ids (llama-cpp-python answers 500 with its validation errors,
                // after the usual retries): the text is tried, under the count check.
                Err(HttpError::Status { status, body, .. })
                    if self.input == PromptInput::Auto && self.api == ServerApi::OpenAi =>
                {
                    refused = Some(format!("HTTP {status}: {body}"))
                }
                Err(e) => return Err(http(e)),
            }
        }
        let mut counts = Vec::new();
        for bos in self.text_variants(prompts, i) {
            let sent = Sent::Text { bos };
            let reply = self.post(prompts, i, sent, top_n).map_err(http)?;
            if self.count_matches(&reply, prompts, i, sent) {
                *self.sent.lock().expect("no panics while held") = Some(sent);
                return Ok(reply);
            }
            counts.push(reply.prompt_tokens);
        }
        Err(self.error(format!(
            "{}: {}the server's token count of the text prompt ({}) differs from pstat's ({}); a second BOS or another tokenizer would move the answers, so the text is not sent",
            name(),
            refused.map_or(String::new(), |b| format!("token ids were refused ({b}); ")),
            counts
                .iter()
                .map(|c| c.map_or("not reported".into(), |n| n.to_string()))
                .collect::<Vec<_>>()
                .join(" / "),
            prompts.tokens[i].len()
        )))
    }

    /// p of each option from one reply, or the first option token that is missing.
    fn read(&self, top: &HashMap<TokenKey, f64>) -> Result<[f64; 3], (u32, String)> {
        let mut p = [0.0; 3];
        for (j, (ids, pieces)) in self
            .options
            .ids
            .iter()
            .zip(&self.options.pieces)
            .enumerate()
        {
            for (&id, piece) in ids.iter().zip(pieces) {
                let logprob = top
                    .get(&TokenKey::Id(id))
                    .or_else(|| top.get(&TokenKey::Text(piece.clone())));
                match logprob {
                    Some(lp) => p[j] += lp.exp(),
                    None => return Err((id, piece.clone())),
                }
            }
        }
        Ok(p)
    }

    /// The option tokens' log-probabilities after prompt `i`, as the last prompt log-probability
    /// of the prompt extended by each option token (one batched request).
    fn prompt_logprobs(&self, prompts: &EncodedPrompts, i: usize) -> Result<Reply, PromptError> {
        let ids: Vec<u32> = self.options.ids.iter().flatten().copied().collect();
        let tokens = &prompts.tokens[i];
        let batch: Vec<Vec<u32>> = ids
            .iter()
            .map(|&id| tokens.iter().copied().chain([id]).collect())
            .collect();
        let body = json!({
            "model": self.model_id,
            "prompt": batch,
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        });
        let reply = self
            .client
            .post_json(&self.url, &body, |v| parse_prompt_logprobs(&v, &ids))
            .map_err(|e| self.error(format!("{}: {e}", request_name(prompts, i))))?;
        let sent = (tokens.len() as u64 + 1) * ids.len() as u64;
        match reply.prompt_tokens {
            Some(n) if n != sent => Err(self.error(format!(
                "{}: the server read {n} prompt tokens where {sent} token ids were sent ({} prompts of {})",
                request_name(prompts, i),
                ids.len(),
                tokens.len() + 1
            ))),
            _ => Ok(reply),
        }
    }

    fn score_one(&self, prompts: &EncodedPrompts, i: usize) -> Result<OptionProbs, PromptError> {
        if self.logprobs == LogprobRequest::Prompt {
            let reply = self.prompt_logprobs(prompts, i)?;
            // parse_prompt_logprobs returned every option id.
            let p = self
                .read(&reply.top)
                .expect("every option id was read from the reply");
            return Ok(OptionProbs::from_probs(p));
        }
        loop {
            let top_n = self.top_n.load(Ordering::Relaxed);
            let reply = self.request(prompts, i, top_n)?;
            match self.read(&reply.top) {
                Ok(p) => return Ok(OptionProbs::from_probs(p)),
                Err((id, piece)) if top_n >= self.max_top_n => {
                    return Err(PromptError::MissingOption {
                        url: format!("{} ({})", self.url, request_name(prompts, i)),
                        id,
                        piece,
                        top_n,
                    });
                }
                Err(_) => {
                    let grown = (top_n * 10).min(self.max_top_n);
                    self.top_n.fetch_max(grown, Ordering::Relaxed);
                }
            }
        }
    }
}

impl OptionScorer for ServerScorer {
    fn score(
        &mut self,
        prompts: &EncodedPrompts,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<OptionProbs>, PromptError> {
        let n = prompts.len();
        let mut out: Vec<Option<OptionProbs>> = vec![None; n];
        if n == 0 {
            return Ok(Vec::new());
        }
        out[0] = Some(self.score_one(prompts, 0)?);
        progress(1);
        let this = &*self;
        let next = AtomicUsize::new(1);
        let failed = AtomicBool::new(false);
        let mut first_error = None;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..this.concurrency.min(n - 1) {
                let tx = tx.clone();
                let (next, failed) = (&next, &failed);
                scope.spawn(move || {
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        let result = this.score_one(prompts, i);
                        failed.fetch_or(result.is_err(), Ordering::Relaxed);
                        if tx.send((i, result)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for (i, result) in rx {
                match result {
                    Ok(p) => {
                        out[i] = Some(p);
                        progress(1);
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        });
        if let Some(e) = first_error {
            return Err(e);
        }
        out.into_iter()
            .enumerate()
            .map(|(i, p)| {
                p.ok_or_else(|| self.error(format!("{}: no answer", request_name(prompts, i))))
            })
            .collect()
    }

    fn identity(&self) -> String {
        backend_key(&self.url, &self.model_id)
    }
}

/// The completions endpoint, its protocol, and the server root (for `/v1/models`).
fn endpoints(url: &str) -> (String, ServerApi, String) {
    let trimmed = url.trim_end_matches('/');
    if let Some(root) = trimmed.strip_suffix("/completion") {
        return (trimmed.to_string(), ServerApi::LlamaCpp, root.to_string());
    }
    let root = trimmed
        .strip_suffix("/completions")
        .unwrap_or(trimmed)
        .trim_end_matches('/');
    let root = root.strip_suffix("/v1").unwrap_or(root);
    (
        endpoint(root, "v1/completions"),
        ServerApi::OpenAi,
        root.to_string(),
    )
}

/// The model to ask for among those `GET /v1/models` lists (`data[].id`).
fn choose_model(models: &Value, wanted: Option<&str>) -> Result<String, String> {
    let ids: Vec<&str> = models["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    match (wanted, ids.as_slice()) {
        (_, []) => Err(format!("GET /v1/models lists no model ids: {models}")),
        (Some(w), _) if ids.contains(&w) => Ok(w.to_string()),
        (Some(w), _) => Err(format!(
            "the server does not serve model {w:?}; it serves {ids:?}"
        )),
        (None, [only]) => Ok(only.to_string()),
        (None, _) => Err(format!(
            "the server serves several models {ids:?}: name one (model)"
        )),
    }
}

/// "prompt 3 of 100 (statement "…")": which request failed.
fn request_name(prompts: &EncodedPrompts, i: usize) -> String {
    let statement = prompts.texts[i]
        .split_once(QUESTION)
        .and_then(|(_, rest)| rest.trim_start().lines().next())
        .unwrap_or("");
    let mut shown: String = statement.chars().take(80).collect();
    if shown.len() < statement.len() {
        shown.push('…');
    }
    format!(
        "prompt {} of {} (statement {shown:?})",
        i + 1,
        prompts.len()
    )
}

/// With text keys, two option tokens of the same text could not be told apart.
fn check_distinct_pieces(url: &str, options: &OptionTokens) -> Result<(), PromptError> {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for (ids, pieces) in options.ids.iter().zip(&options.pieces) {
        for (&id, piece) in ids.iter().zip(pieces) {
            if let Some(other) = seen.insert(piece, id) {
                return Err(PromptError::Backend {
                    url: url.to_string(),
                    message: format!(
                        "option tokens {other} and {id} are both {piece:?}: a server that keys log-probabilities by text cannot tell them apart (use llama.cpp's /completion, which keys by id)"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The next token's top log-probabilities from a reply in any of the shapes spoken, checked:
/// finite, each probability in [0, 1], their sum at most 1 (both within
/// [`PROBABILITY_TOLERANCE`]).
fn parse_reply(api: ServerApi, reply: &Value) -> Result<Reply, String> {
    let entries = match api {
        ServerApi::OpenAi => openai_top_logprobs(reply)?,
        ServerApi::LlamaCpp => llamacpp_top_logprobs(&reply["completion_probabilities"][0])?,
    };
    let mut sum = 0.0;
    for (key, lp) in &entries {
        let p = lp.exp();
        if !lp.is_finite() || p > 1.0 + PROBABILITY_TOLERANCE {
            return Err(format!("the probability of {key:?} is {p} (log {lp})"));
        }
        sum += p;
    }
    if sum > 1.0 + PROBABILITY_TOLERANCE {
        return Err(format!(
            "the {} returned probabilities sum to {sum}, above 1",
            entries.len()
        ));
    }
    Ok(Reply {
        top: entries.into_iter().collect(),
        prompt_tokens: reply["usage"]["prompt_tokens"].as_u64(),
    })
}

/// vLLM's batched reply to prompts `[..., ids[k]]` with `prompt_logprobs: 0`: choice `index` k
/// has `prompt_logprobs` (one entry per prompt token, `null` for the first), whose last entry
/// maps `"<ids[k]>"` to `{"logprob": x, "rank": r, "decoded_token": t}`. Checked as the top-n
/// replies are: finite, each probability at most 1, their sum at most 1.
fn parse_prompt_logprobs(reply: &Value, ids: &[u32]) -> Result<Reply, String> {
    let choices = reply["choices"]
        .as_array()
        .ok_or("no choices array in the response")?;
    if choices.len() != ids.len() {
        return Err(format!(
            "{} choices for {} prompts (one per option token)",
            choices.len(),
            ids.len()
        ));
    }
    let mut top = HashMap::new();
    let mut sum = 0.0;
    for (k, choice) in choices.iter().enumerate() {
        let index = choice["index"].as_u64().unwrap_or(k as u64) as usize;
        let id = *ids
            .get(index)
            .ok_or(format!("choice index {index} out of range"))?;
        let last = choice["prompt_logprobs"]
            .as_array()
            .and_then(|l| l.last())
            .ok_or(format!(
                "choice {index} has no prompt_logprobs (is the server vLLM?)"
            ))?;
        let entry = &last[id.to_string()];
        let lp = entry["logprob"]
            .as_f64()
            .or_else(|| entry.as_f64())
            .ok_or(format!(
                "choice {index}: the last prompt_logprobs entry has no log-probability for token {id}: {last}"
            ))?;
        let p = lp.exp();
        if !lp.is_finite() || p > 1.0 + PROBABILITY_TOLERANCE {
            return Err(format!("the probability of token {id} is {p} (log {lp})"));
        }
        sum += p;
        if top.insert(TokenKey::Id(id), lp).is_some() {
            return Err(format!("token {id} answered twice"));
        }
    }
    if sum > 1.0 + PROBABILITY_TOLERANCE {
        return Err(format!("the options' probabilities sum to {sum}, above 1"));
    }
    Ok(Reply {
        top,
        prompt_tokens: reply["usage"]["prompt_tokens"].as_u64(),
    })
}

/// `choices[0].logprobs`: `top_logprobs[0]` as `{text or "token_id:<id>": logprob}` (OpenAI,
/// vLLM, llama-cpp-python), or `content[0].top_logprobs` as `[{id, logprob}]` (llama.cpp).
fn openai_top_logprobs(reply: &Value) -> Result<Vec<(TokenKey, f64)>, String> {
    let logprobs = &reply["choices"][0]["logprobs"];
    if logprobs["content"].is_array() {
        return llamacpp_top_logprobs(&logprobs["content"][0]);
    }
    let top = logprobs["top_logprobs"][0]
        .as_object()
        .ok_or("no choices[0].logprobs.top_logprobs[0] object in the response")?;
    top.iter()
        .map(|(key, lp)| {
            let lp = lp
                .as_f64()
                .ok_or(format!("log-probability of {key:?} is not a number"))?;
            let key = match key.strip_prefix("token_id:").map(str::parse::<u32>) {
                Some(Ok(id)) => TokenKey::Id(id),
                _ => TokenKey::Text(key.clone()),
            };
            Ok((key, lp))
        })
        .collect()
}

/// One token's entry of llama.cpp: `top_logprobs: [{id, logprob}]` (current), or
/// `probs: [{tok_str, prob}]` (before the log-probability rework).
fn llamacpp_top_logprobs(first: &Value) -> Result<Vec<(TokenKey, f64)>, String> {
    if let Some(top) = first["top_logprobs"].as_array() {
        top.iter()
            .map(|e| {
                let id = e["id"].as_u64().ok_or("top_logprobs entry without an id")?;
                let lp = e["logprob"]
                    .as_f64()
                    .ok_or("top_logprobs entry without a logprob")?;
                Ok((TokenKey::Id(id as u32), lp))
            })
            .collect()
    } else if let Some(probs) = first["probs"].as_array() {
        probs
            .iter()
            .map(|e| {
                let text = e["tok_str"].as_str().ok_or("probs entry without tok_str")?;
                let p = e["prob"].as_f64().ok_or("probs entry without prob")?;
                Ok((TokenKey::Text(text.to_string()), p.ln()))
            })
            .collect()
    } else {
        Err("no top_logprobs (or probs) for the next token in the response".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> OptionTokens {
        OptionTokens {
            ids: vec![vec![64, 253], vec![65, 288], vec![66, 272]],
            pieces: vec![
                vec!["a".into(), " a".into()],
                vec!["b".into(), " b".into()],
                vec!["c".into(), " c".into()],
            ],
        }
    }

    fn top(reply: Value, api: ServerApi) -> Result<[f64; 3], String> {
        let scorer_options = options();
        let reply = parse_reply(api, &reply)?;
        let mut p = [0.0; 3];
        for (j, ids) in scorer_options.ids.iter().enumerate() {
            for (&id, piece) in ids.iter().zip(&scorer_options.pieces[j]) {
                p[j] += reply
                    .top
                    .get(&TokenKey::Id(id))
                    .or_else(|| reply.top.get(&TokenKey::Text(piece.clone())))
                    .ok_or(format!("missing {piece:?}"))?
                    .exp();
            }
        }
        Ok(p)
    }

    #[test]
    fn urls_choose_the_protocol_and_the_models_endpoint() {
        let (url, api, root) = endpoints("http://h:1");
        assert_eq!(
            (url.as_str(), api, root.as_str()),
            ("http://h:1/v1/completions", ServerApi::OpenAi, "http://h:1")
        );
        for u in ["http://h:1/v1/", "http://h:1/v1/completions"] {
            assert_eq!(endpoints(u).0, "http://h:1/v1/completions");
            assert_eq!(endpoints(u).2, "http://h:1");
        }
        let (url, api, root) = endpoints("https://h/x/completion");
        assert_eq!(
            (url.as_str(), api, root.as_str()),
            ("https://h/x/completion", ServerApi::LlamaCpp, "https://h/x")
        );
    }

    #[test]
    fn openai_logprobs_are_read_by_text_or_id() {
        let reply = json!({"choices": [{"logprobs": {"top_logprobs": [{
            " a": (0.5f64).ln(), "a": (0.1f64).ln(), " b": (0.2f64).ln(), "b": (0.05f64).ln(),
            "token_id:66": (0.01f64).ln(), " c": (0.04f64).ln(), "\n": (0.1f64).ln()
        }]}}]});
        let p = top(reply, ServerApi::OpenAi).unwrap();
        assert!(
            (p[0] - 0.6).abs() < 1e-12
                && (p[1] - 0.25).abs() < 1e-12
                && (p[2] - 0.05).abs() < 1e-12
        );
    }

    #[test]
    fn llamacpp_logprobs_are_read_by_id_in_both_shapes() {
        let entries: Vec<Value> = [64u32, 253, 65, 288, 66, 272]
            .iter()
            .map(|&id| json!({"id": id, "token": "?", "logprob": (0.1f64).ln()}))
            .collect();
        let native = json!({"completion_probabilities": [{"id": 253, "top_logprobs": entries}]});
        let p = top(native, ServerApi::LlamaCpp).unwrap();
        assert!(p.iter().all(|&x| (x - 0.2).abs() < 1e-12));
        let oai = json!({"choices": [{"logprobs": {"content": [{"id": 253, "top_logprobs": entries}]}}],
            "usage": {"prompt_tokens": 12}});
        assert_eq!(top(oai.clone(), ServerApi::OpenAi).unwrap(), p);
        assert_eq!(
            parse_reply(ServerApi::OpenAi, &oai).unwrap().prompt_tokens,
            Some(12)
        );
        let err = parse_reply(ServerApi::LlamaCpp, &json!({"content": ""}))
            .err()
            .unwrap();
        assert!(err.contains("no top_logprobs"), "{err}");
    }

    #[test]
    fn impossible_probabilities_are_rejected() {
        let reply = |a: f64, b: f64| json!({"choices": [{"logprobs": {"top_logprobs": [{"a": a, "b": b}]}}]});
        assert!(parse_reply(ServerApi::OpenAi, &reply(-0.1, -3.0)).is_ok());
        let above = parse_reply(ServerApi::OpenAi, &reply(-0.1, -0.5))
            .err()
            .unwrap();
        assert!(
            above.contains("sum to") && above.contains("above 1"),
            "{above}"
        );
        let one = parse_reply(ServerApi::OpenAi, &reply(0.01, -9.0))
            .err()
            .unwrap();
        assert!(one.contains("probability of"), "{one}");
        let text = json!({"choices": [{"logprobs": {"top_logprobs": [{"a": "x"}]}}]});
        assert!(parse_reply(ServerApi::OpenAi, &text).is_err());
    }

    #[test]
    fn prompt_logprobs_are_read_at_the_last_position_of_each_option_prompt() {
        let ids = [64u32, 253, 65];
        let choice = |index: usize, id: u32, p: f64| {
            json!({"index": index, "text": "x", "prompt_logprobs": [null,
                {"7": {"logprob": -0.1, "rank": 1, "decoded_token": "q"}},
                {id.to_string(): {"logprob": p.ln(), "rank": 40, "decoded_token": "a"}}]})
        };
        let reply = json!({"choices": [choice(2, 65, 0.3), choice(0, 64, 0.1), choice(1, 253, 0.2)],
            "usage": {"prompt_tokens": 9}});
        let r = parse_prompt_logprobs(&reply, &ids).unwrap();
        assert!((r.top[&TokenKey::Id(65)] - 0.3f64.ln()).abs() < 1e-12);
        assert!((r.top[&TokenKey::Id(64)] - 0.1f64.ln()).abs() < 1e-12);
        assert_eq!(r.prompt_tokens, Some(9));
        let short = json!({"choices": [choice(0, 64, 0.1)]});
        assert!(
            parse_prompt_logprobs(&short, &ids)
                .unwrap_err()
                .contains("1 choices")
        );
        let wrong =
            json!({"choices": [choice(0, 64, 0.1), choice(1, 64, 0.1), choice(2, 65, 0.3)]});
        let err = parse_prompt_logprobs(&wrong, &ids).unwrap_err();
        assert!(err.contains("token 253"), "{err}");
        let above =
            json!({"choices": [choice(0, 64, 0.5), choice(1, 253, 0.4), choice(2, 65, 0.3)]});
        assert!(
            parse_prompt_logprobs(&above, &ids)
                .unwrap_err()
                .contains("above 1")
        );
        let text = ServerConfig {
            logprobs: LogprobRequest::Prompt,
            prompt: PromptInput::Text,
            ..ServerConfig::new("http://h:1")
        };
        assert!(
            text.validate()
                .unwrap_err()
                .to_string()
                .contains("token ids")
        );
    }

    #[test]
    fn the_model_is_the_servers_own() {
        let one = json!({"object": "list", "data": [{"id": "smol", "object": "model"}]});
        assert_eq!(choose_model(&one, None).unwrap(), "smol");
        assert_eq!(choose_model(&one, Some("smol")).unwrap(), "smol");
        assert!(
            choose_model(&one, Some("other"))
                .unwrap_err()
                .contains("does not serve")
        );
        let two = json!({"data": [{"id": "x"}, {"id": "y"}]});
        assert!(choose_model(&two, None).unwrap_err().contains("several"));
        assert!(choose_model(&json!({}), None).is_err());
        assert_ne!(
            backend_key("http://a/v1/completions", "x"),
            backend_key("http://a/v1/completions", "y")
        );
    }

    #[test]
    fn a_request_is_named_by_its_statement() {
        let prompts = EncodedPrompts {
            texts: vec![format!(
                "ctx\n{QUESTION}\nParis is in France.\na. The statement is true."
            )],
            tokens: vec![vec![1, 2]],
            shared: 0,
        };
        assert_eq!(
            request_name(&prompts, 0),
            "prompt 1 of 1 (statement \"Paris is in France.\")"
        );
    }

    #[test]
    fn options_that_share_a_text_are_refused_for_text_keys() {
        let mut o = options();
        o.pieces[1][0] = "a".into();
        let err = check_distinct_pieces("u", &o).unwrap_err().to_string();
        assert!(err.contains("cannot tell them apart"), "{err}");
    }

    #[test]
    fn configs_are_checked() {
        assert!(ServerConfig::new("http://h:1").validate().is_ok());
        assert!(ServerConfig::new("h:1").validate().is_err());
        let zero = ServerConfig {
            concurrency: 0,
            ..ServerConfig::new("http://h:1")
        };
        assert!(
            zero.validate()
                .unwrap_err()
                .to_string()
                .contains("concurrency")
        );
        let parsed: ServerConfig =
            serde_json::from_value(json!({"url": "https://h", "concurrency": 4, "prompt": "text", "http": {"retries": 2, "api_key_env": "K"}})).unwrap();
        assert_eq!(
            (parsed.concurrency, parsed.prompt, parsed.http.retries),
            (4, PromptInput::Text, 2)
        );
    }
}
