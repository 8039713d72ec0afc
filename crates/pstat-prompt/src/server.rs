//! Completion servers as backends. Each prompt asks for one generated token at temperature 0
//! with the top log-probabilities of the next token, and p(a), p(b), p(c) are read from them.
//! Every option id must come back: an id missing from the top-n is asked again with a larger
//! n, and still missing is an error (a missing id is never read as p = 0). Prompts of a unit
//! are sent in order, so a server's prompt cache reuses the shared prefix.
//!
//! Two protocols:
//! - OpenAI-compatible `POST /v1/completions` (`logprobs: n`): the prompt goes as text (the
//!   server tokenizes it) and the top log-probabilities come keyed by token text, or by
//!   `token_id:<id>` where the server honours `return_tokens_as_token_ids` (vLLM). Keyed by
//!   text, the option tokens must have distinct texts. llama-cpp-python's server speaks this.
//! - llama.cpp's native `POST /completion` (`n_probs: n`): the prompt goes as token ids and
//!   the top log-probabilities come with their ids. Chosen when the URL ends in `/completion`.

use crate::error::PromptError;
use crate::scoring::{EncodedPrompts, OptionProbs, OptionScorer, OptionTokens};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// Largest top-n asked for by default: more than any embedded model's vocabulary (Gemma 3 has
/// 262,144 tokens), so an option token always comes back where the server allows it. A
/// letter without its leading space can rank beyond the top thousand.
const MAX_TOP_N: usize = 300_000;

/// Which request/response shape the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerApi {
    OpenAi,
    LlamaCpp,
}

/// How the returned log-probabilities identify tokens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TokenKey {
    Id(u32),
    Text(String),
}

/// A completion server scoring the answer options.
pub struct ServerScorer {
    url: String,
    api: ServerApi,
    model: Option<String>,
    options: OptionTokens,
    agent: ureq::Agent,
    /// Top log-probabilities asked for; grows tenfold when an option was missing (up to
    /// [`MAX_TOP_N`]), and stays grown for later prompts.
    top_n: usize,
}

impl ServerScorer {
    /// `url`: a server root or `/v1` base (OpenAI-compatible), or a URL ending in
    /// `/completion` (llama.cpp native). `model` is sent as the OpenAI `model` field.
    pub fn new(
        url: &str,
        model: Option<String>,
        options: OptionTokens,
        timeout: Duration,
    ) -> Result<Self, PromptError> {
        let trimmed = url.trim_end_matches('/');
        let (url, api) = if trimmed.ends_with("/completion") {
            (trimmed.to_string(), ServerApi::LlamaCpp)
        } else if trimmed.ends_with("/completions") {
            (trimmed.to_string(), ServerApi::OpenAi)
        } else if trimmed.ends_with("/v1") {
            (format!("{trimmed}/completions"), ServerApi::OpenAi)
        } else {
            (format!("{trimmed}/v1/completions"), ServerApi::OpenAi)
        };
        if api == ServerApi::OpenAi {
            check_distinct_pieces(&url, &options)?;
        }
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .build()
            .new_agent();
        Ok(ServerScorer {
            url,
            api,
            model,
            options,
            agent,
            top_n: 20,
        })
    }

    fn error(&self, message: impl Into<String>) -> PromptError {
        PromptError::Backend {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    fn request(&self, text: &str, tokens: &[u32], top_n: usize) -> Result<Value, PromptError> {
        let body = match self.api {
            ServerApi::OpenAi => {
                let mut body = json!({
                    "prompt": text,
                    "max_tokens": 1,
                    "temperature": 0.0,
                    "logprobs": top_n,
                    "echo": false,
                    "return_tokens_as_token_ids": true,
                });
                if let Some(model) = &self.model {
                    body["model"] = json!(model);
                }
                body
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
        };
        let mut response = self
            .agent
            .post(&self.url)
            .send_json(&body)
            .map_err(|e| self.error(e.to_string()))?;
        response
            .body_mut()
            .read_json()
            .map_err(|e| self.error(format!("unreadable response: {e}")))
    }

    /// p of each option from one response, or the first option token that is missing.
    fn read(&self, reply: &Value) -> Result<Result<[f64; 3], (u32, String)>, PromptError> {
        let top = match self.api {
            ServerApi::OpenAi => openai_top_logprobs(reply),
            ServerApi::LlamaCpp => llamacpp_top_logprobs(reply),
        }
        .map_err(|m| self.error(m))?;
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
                    None => return Ok(Err((id, piece.clone()))),
                }
            }
        }
        Ok(Ok(p))
    }

    fn score_one(&mut self, text: &str, tokens: &[u32]) -> Result<OptionProbs, PromptError> {
        loop {
            let reply = self.request(text, tokens, self.top_n)?;
            match self.read(&reply)? {
                Ok(p) => return Ok(OptionProbs::from_probs(p)),
                Err((id, piece)) if self.top_n >= MAX_TOP_N => {
                    return Err(PromptError::MissingOption {
                        url: self.url.clone(),
                        id,
                        piece,
                        top_n: self.top_n,
                    });
                }
                Err(_) => self.top_n = (self.top_n * 10).min(MAX_TOP_N),
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
        let mut out = Vec::with_capacity(prompts.len());
        for (text, tokens) in prompts.texts.iter().zip(&prompts.tokens) {
            out.push(self.score_one(text, tokens)?);
            progress(1);
        }
        Ok(out)
    }

    fn identity(&self) -> String {
        match &self.model {
            Some(m) => format!("server:{}#{m}", self.url),
            None => format!("server:{}", self.url),
        }
    }
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

/// `choices[0].logprobs.top_logprobs[0]`: `{text or "token_id:<id>": logprob}`.
fn openai_top_logprobs(reply: &Value) -> Result<HashMap<TokenKey, f64>, String> {
    let top = reply["choices"][0]["logprobs"]["top_logprobs"][0]
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

/// `completion_probabilities[0]`: `top_logprobs: [{id, logprob}]` (current llama.cpp), or
/// `probs: [{tok_str, prob}]` (before the log-probability rework).
fn llamacpp_top_logprobs(reply: &Value) -> Result<HashMap<TokenKey, f64>, String> {
    let first = &reply["completion_probabilities"][0];
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
        Err("no completion_probabilities[0].top_logprobs (or .probs) in the response".into())
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

    fn scorer(url: &str) -> ServerScorer {
        ServerScorer::new(url, None, options(), Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn urls_choose_the_protocol() {
        assert_eq!(scorer("http://h:1").url, "http://h:1/v1/completions");
        assert_eq!(scorer("http://h:1/v1/").url, "http://h:1/v1/completions");
        let native = scorer("http://h:1/completion");
        assert_eq!(
            (native.url.as_str(), native.api),
            ("http://h:1/completion", ServerApi::LlamaCpp)
        );
    }

    #[test]
    fn openai_logprobs_are_read_by_text_or_id() {
        let s = scorer("http://h:1");
        let reply = json!({"choices": [{"logprobs": {"top_logprobs": [{
            " a": (0.5f64).ln(), "a": (0.1f64).ln(), " b": (0.2f64).ln(), "b": (0.05f64).ln(),
            "token_id:66": (0.01f64).ln(), " c": (0.04f64).ln(), "\n": (0.1f64).ln()
        }]}}]});
        let p = s.read(&reply).unwrap().unwrap();
        assert!(
            (p[0] - 0.6).abs() < 1e-12
                && (p[1] - 0.25).abs() < 1e-12
                && (p[2] - 0.05).abs() < 1e-12
        );
        // " c" missing: reported, not read as 0.
        let partial = json!({"choices": [{"logprobs": {"top_logprobs": [{" a": -0.1, "a": -3.0, " b": -4.0, "b": -5.0, "c": -6.0}]}}]});
        assert_eq!(s.read(&partial).unwrap(), Err((272, " c".into())));
    }

    #[test]
    fn llamacpp_logprobs_are_read_by_id() {
        let s = scorer("http://h:1/completion");
        let top: Vec<Value> = [64u32, 253, 65, 288, 66, 272]
            .iter()
            .map(|&id| json!({"id": id, "token": "?", "logprob": (0.1f64).ln()}))
            .collect();
        let reply = json!({"completion_probabilities": [{"id": 253, "logprob": -0.1, "top_logprobs": top}]});
        let p = s.read(&reply).unwrap().unwrap();
        assert!(p.iter().all(|&x| (x - 0.2).abs() < 1e-12));
        assert!(
            s.read(&json!({"content": ""}))
                .unwrap_err()
                .to_string()
                .contains("completion_probabilities")
        );
    }

    #[test]
    fn options_that_share_a_text_are_refused_for_text_keys() {
        let mut o = options();
        o.pieces[1][0] = "a".into();
        let err = ServerScorer::new("http://h:1", None, o.clone(), Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot tell them apart"), "{err}");
        assert!(
            ServerScorer::new("http://h:1/completion", None, o, Duration::from_secs(1)).is_ok()
        );
    }
}
