//! The labeler: sends a contrastive prompt to an OpenAI-compatible chat endpoint (local or
//! hosted: https, an API key, a model name) and validates the JSON answer (the five keys of
//! Appendix I.1), asking again on invalid answers.

use pstat_http::{Client, HttpOptions};
use serde::{Deserialize, Serialize};

/// The answer the template asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterLabel {
    /// A short noun/entity-focused label for the cluster (non-empty).
    pub cluster_label: String,
    /// The pattern the cluster's statements share (non-empty).
    pub shared_cluster_pattern: String,
    /// What distinguishes the retracted examples from the nearby non-retracted ones
    /// (non-empty).
    pub retracted_vs_stable_contrast: String,
    /// Why such statements might be vulnerable to epistemic retractions (non-empty).
    pub retraction_hypothesis: String,
    /// The labeler's caveats; a list is joined with "; ", and empty means none.
    pub caveats: String,
}

/// The keys the answer's JSON object must hold, in the template's order.
pub const ANSWER_KEYS: [&str; 5] = [
    "cluster_label",
    "shared_cluster_pattern",
    "retracted_vs_stable_contrast",
    "retraction_hypothesis",
    "caveats",
];

/// Extracts the JSON object from a model answer: a ```json fenced block if present, otherwise
/// the span from the first `{` to the last `}`.
fn json_span(text: &str) -> Option<&str> {
    let body = match text.find("```") {
        Some(open) => {
            let after = &text[open + 3..];
            let after = after
                .strip_prefix("json")
                .or_else(|| after.strip_prefix("JSON"))
                .unwrap_or(after);
            after.find("```").map_or(after, |close| &after[..close])
        }
        None => text,
    };
    let start = body.find('{')?;
    let end = body.rfind('}')?;
    (end > start).then(|| &body[start..=end])
}

/// Parses and validates an answer. Every key must be present with a non-empty string; `caveats`
/// may also be a list of strings (joined with "; ") or an empty list/string (no caveats). Extra
/// keys are ignored.
pub fn parse_label_answer(text: &str) -> Result<ClusterLabel, InvalidAnswer> {
    parse_answer(text).map_err(InvalidAnswer)
}

/// A labeler's answer that is not the JSON object asked for; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAnswer(pub String);

fn parse_answer(text: &str) -> Result<ClusterLabel, String> {
    let span = json_span(text).ok_or("no JSON object in the answer")?;
    let value: serde_json::Value =
        serde_json::from_str(span).map_err(|e| format!("invalid JSON: {e}"))?;
    let object = value.as_object().ok_or("the answer is not a JSON object")?;
    let field = |key: &str| -> Result<String, String> {
        match object.get(key) {
            None => Err(format!("missing key `{key}`")),
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() || key == "caveats" => {
                Ok(s.trim().to_string())
            }
            Some(serde_json::Value::Array(items)) if key == "caveats" => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::trim)
                        .ok_or(format!("`{key}` list holds a non-string"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.join("; ")),
            Some(serde_json::Value::String(_)) => Err(format!("empty `{key}`")),
            Some(other) => Err(format!("`{key}` is not a string: {other}")),
        }
    };
    Ok(ClusterLabel {
        cluster_label: field(ANSWER_KEYS[0])?,
        shared_cluster_pattern: field(ANSWER_KEYS[1])?,
        retracted_vs_stable_contrast: field(ANSWER_KEYS[2])?,
        retraction_hypothesis: field(ANSWER_KEYS[3])?,
        caveats: field(ANSWER_KEYS[4])?,
    })
}

/// Why a [`Labeler`] could not be built or gave no label.
#[derive(Debug, thiserror::Error)]
pub enum LabelerError {
    /// The HTTP options or API key were rejected, or a request failed after its retries.
    #[error("labeler: {0}")]
    Http(#[from] pstat_http::HttpError),
    /// Every answer failed validation.
    #[error("no valid answer after {attempts} attempt(s); last problem: {last}")]
    Invalid {
        /// Requests made ([`LabelerConfig::attempts`], at least 1).
        attempts: usize,
        /// What was wrong with the last answer.
        last: String,
    },
}

/// A labeled cluster answer and how many requests it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelOutcome {
    /// The validated answer.
    pub label: ClusterLabel,
    /// Requests made, the one answered validly included (1 or more).
    pub attempts: usize,
}

/// Where the labeler is and how it is reached; every field but `url` has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LabelerConfig {
    /// A server root (`http://127.0.0.1:8080`), a `/v1` base, or the full
    /// `/v1/chat/completions` address; https for a hosted endpoint.
    pub url: String,
    /// The `model` field of each request (a hosted endpoint needs its real name).
    pub model: String,
    /// Requests per prompt while answers fail validation (transport failures are retried
    /// apart, by `http`).
    pub attempts: usize,
    /// Timeout, transport retries, backoff and API key variable (`[clustering.http]` of a run
    /// config).
    pub http: HttpOptions,
}

impl Default for LabelerConfig {
    fn default() -> Self {
        LabelerConfig {
            url: String::new(),
            model: "default".into(),
            attempts: 3,
            http: HttpOptions::default(),
        }
    }
}

/// Client for `POST {base}/v1/chat/completions`.
pub struct Labeler {
    url: String,
    model: String,
    max_attempts: usize,
    client: Client,
}

impl Labeler {
    /// The key comes from `http.api_key_env`, else from `OPENAI_API_KEY` if set; the
    /// timeout and retries from `http` (`[clustering.http]` of a run config).
    pub fn from_config(config: &LabelerConfig) -> Result<Self, LabelerError> {
        Ok(Self::with_client(config, Client::new(&config.http)?))
    }

    fn with_client(config: &LabelerConfig, client: Client) -> Self {
        let url = config.url.trim_end_matches('/');
        let url = if url.ends_with("/chat/completions") {
            url.to_string()
        } else {
            pstat_http::endpoint(url, "v1/chat/completions")
        };
        Labeler {
            url,
            model: config.model.clone(),
            max_attempts: config.attempts.max(1),
            client,
        }
    }

    /// One chat completion at temperature 0; returns the assistant's text.
    fn complete(&self, prompt: &str) -> Result<String, LabelerError> {
        let body = serde_json::json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
        });
        Ok(self.client.post_json(&self.url, &body, |reply| {
            reply["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| "no choices[0].message.content".to_string())
        })?)
    }

    /// Asks until the answer validates or `max_attempts` is reached.
    pub fn label(&self, prompt: &str) -> Result<LabelOutcome, LabelerError> {
        let mut last = String::new();
        for attempt in 1..=self.max_attempts {
            let text = self.complete(prompt)?;
            match parse_label_answer(&text) {
                Ok(label) => {
                    return Ok(LabelOutcome {
                        label,
                        attempts: attempt,
                    });
                }
                Err(InvalidAnswer(problem)) => last = problem,
            }
        }
        Err(LabelerError::Invalid {
            attempts: self.max_attempts,
            last,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    const VALID: &str = r#"{"cluster_label": "Ambiguous city names", "shared_cluster_pattern": "Places sharing names",
        "retracted_vs_stable_contrast": "Retracted ones have namesakes", "retraction_hypothesis": "Referent ambiguity",
        "caveats": "Small cluster"}"#;

    #[test]
    fn parses_plain_fenced_and_chatty_answers() {
        let plain = parse_label_answer(VALID).unwrap();
        assert_eq!(plain.cluster_label, "Ambiguous city names");
        let fenced = format!("Here you go:\n```json\n{VALID}\n```\nHope this helps.");
        assert_eq!(parse_label_answer(&fenced).unwrap(), plain);
        assert_eq!(
            parse_label_answer(&format!("```\n{VALID}\n```")).unwrap(),
            plain
        );
        assert_eq!(
            parse_label_answer(&format!("Sure! {VALID} Done.")).unwrap(),
            plain
        );
    }

    #[test]
    fn caveats_may_be_a_list_or_empty_and_extra_keys_are_ignored() {
        let list = VALID.replace(
            r#""Small cluster""#,
            r#"["Small cluster", " few examples "]"#,
        );
        assert_eq!(
            parse_label_answer(&list).unwrap().caveats,
            "Small cluster; few examples"
        );
        let empty = VALID.replace(r#""Small cluster""#, r#""""#);
        assert_eq!(parse_label_answer(&empty).unwrap().caveats, "");
        let extra = VALID.replace('}', r#", "confidence": 0.4}"#);
        assert!(parse_label_answer(&extra).is_ok());
    }

    #[test]
    fn rejects_invalid_answers_with_reasons() {
        assert_eq!(
            parse_label_answer("I cannot help").unwrap_err().0,
            "no JSON object in the answer"
        );
        assert!(
            parse_label_answer("{not json}")
                .unwrap_err()
                .0
                .starts_with("invalid JSON")
        );
        assert_eq!(
            parse_label_answer("[1, 2]").unwrap_err().0,
            "no JSON object in the answer"
        );
        let missing = VALID.replace(r#""caveats": "Small cluster""#, r#""notes": "x""#);
        assert_eq!(
            parse_label_answer(&missing).unwrap_err().0,
            "missing key `caveats`"
        );
        let empty_label = VALID.replace("Ambiguous city names", "  ");
        assert_eq!(
            parse_label_answer(&empty_label).unwrap_err().0,
            "empty `cluster_label`"
        );
        let number = VALID.replace(r#""Referent ambiguity""#, "3");
        assert_eq!(
            parse_label_answer(&number).unwrap_err().0,
            "`retraction_hypothesis` is not a string: 3"
        );
        let bad_list = VALID.replace(r#""Small cluster""#, "[1]");
        assert_eq!(
            parse_label_answer(&bad_list).unwrap_err().0,
            "`caveats` list holds a non-string"
        );
    }

    /// Serves one canned chat reply per connection, returning the request bodies it saw.
    fn serve(replies: Vec<String>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for content in replies {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                assert!(
                    request_line.starts_with("POST /v1/chat/completions "),
                    "{request_line}"
                );
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line.to_ascii_lowercase().starts_with("authorization:") {
                        bodies.push(line.trim().to_string());
                    }
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                bodies.push(String::from_utf8(body).unwrap());
                let reply = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]})
                    .to_string();
                let mut stream = stream;
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                )
                .unwrap();
            }
            bodies
        });
        (url, handle)
    }

    fn judge(url: &str, attempts: usize) -> Labeler {
        Labeler::from_config(&LabelerConfig {
            url: url.to_string(),
            model: "judge".into(),
            attempts,
            http: HttpOptions {
                timeout_s: 10.0,
                ..HttpOptions::default()
            },
        })
        .unwrap()
    }

    #[test]
    fn retries_until_valid() {
        let (url, server) = serve(vec!["no idea".into(), format!("```json\n{VALID}\n```")]);
        let labeler = judge(&url, 3);
        let outcome = labeler.label("PROMPT").unwrap();
        assert_eq!(outcome.attempts, 2);
        assert_eq!(outcome.label.retraction_hypothesis, "Referent ambiguity");
        let bodies = server.join().unwrap();
        let sent: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(sent["model"], "judge");
        assert_eq!(sent["messages"][0]["content"], "PROMPT");
    }

    #[test]
    fn a_hosted_endpoint_gets_its_model_name_and_key() {
        // SAFETY: only this test reads or writes this variable.
        unsafe { std::env::set_var("PSTAT_LABELER_TEST_KEY", "sk-labeler") };
        let (url, server) = serve(vec![VALID.into()]);
        let labeler = Labeler::from_config(&LabelerConfig {
            url: format!("{url}/v1/chat/completions"),
            model: "gpt-4o-mini".into(),
            http: HttpOptions {
                api_key_env: Some("PSTAT_LABELER_TEST_KEY".into()),
                ..HttpOptions::default()
            },
            ..LabelerConfig::default()
        })
        .unwrap();
        assert_eq!(labeler.label("PROMPT").unwrap().attempts, 1);
        let seen = server.join().unwrap();
        assert_eq!(seen[0], "authorization: Bearer sk-labeler");
        let sent: serde_json::Value = serde_json::from_str(&seen[1]).unwrap();
        assert_eq!(sent["model"], "gpt-4o-mini");
        let unset = LabelerConfig {
            url: url.clone(),
            http: HttpOptions {
                api_key_env: Some("PSTAT_LABELER_TEST_UNSET".into()),
                ..HttpOptions::default()
            },
            ..LabelerConfig::default()
        };
        let err = Labeler::from_config(&unset).err().unwrap().to_string();
        assert!(err.contains("PSTAT_LABELER_TEST_UNSET"), "{err}");
    }

    #[test]
    fn gives_up_after_max_attempts() {
        let (url, server) = serve(vec!["{}".into(), "nope".into()]);
        let labeler = judge(&format!("{url}/v1/"), 2);
        match labeler.label("PROMPT") {
            Err(LabelerError::Invalid { attempts: 2, last }) => {
                assert_eq!(last, "no JSON object in the answer")
            }
            other => panic!("unexpected {other:?}"),
        }
        server.join().unwrap();
    }

    #[test]
    fn unreachable_server_is_an_error_not_a_panic() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let labeler = Labeler::from_config(&LabelerConfig {
            url: format!("http://127.0.0.1:{port}"),
            http: HttpOptions {
                retries: 1,
                backoff_ms: 1,
                ..HttpOptions::default()
            },
            ..LabelerConfig::default()
        })
        .unwrap();
        let err = labeler.label("x").unwrap_err();
        assert!(matches!(err, LabelerError::Http(_)), "{err}");
    }
}
