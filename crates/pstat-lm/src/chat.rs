//! Chat prompts rendered with the model's own `tokenizer.chat_template` (Jinja, run by
//! minijinja with the settings Hugging Face and llama-cpp-python use: `trim_blocks`,
//! `lstrip_blocks`, Python string methods, `raise_exception`). A base model without a template
//! (Gemma 3 270m) gets [`ChatError::NoTemplate`]: pstat never invents a chat format.

use crate::gguf::{GgufError, GgufFile};
use crate::hf;
use crate::tokenizer::{Tokenizer, TokenizerError};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, ErrorKind, Value, context};

/// Marks where the final assistant message starts in a rendering, so a prefill can continue it
/// without the template's end-of-turn. Private-use characters no template or statement contains.
const PREFILL_MARK: &str = "\u{E000}pstat-prefill\u{E001}";

#[derive(Debug, thiserror::Error)]
/// Why a chat template could not be read or rendered.
pub enum ChatError {
    /// Reading the GGUF metadata failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// Loading or using the tokenizer failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error(
        "{0}: the model has no chat template (`tokenizer.chat_template`, or a Hugging Face folder's \
         `chat_template`), so it is a base model: \
         use a plain prompt (\"chat\": false) or a chat model"
    )]
    /// The model (its path is the field) has no chat template: a base model.
    NoTemplate(String),
    /// The template failed to parse or render.
    #[error("chat template of {path}: {message}")]
    Template {
        /// The model the template comes from.
        path: String,
        /// The template engine's error.
        message: String,
    },
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text of the turn.
    pub content: String,
}

impl Message {
    /// A message with this role and content.
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// A model's chat template with the special-token texts it may refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// File the template came from, for error messages.
    origin: String,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// The template stored in `gguf`, or [`ChatError::NoTemplate`].
    pub fn from_gguf(gguf: &GgufFile, tokenizer: &Tokenizer) -> Result<Self, ChatError> {
        let origin = gguf.path().display().to_string();
        let source = gguf
            .opt_str("tokenizer.chat_template")?
            .ok_or_else(|| ChatError::NoTemplate(origin.clone()))?;
        let text_of = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .unwrap_or_default()
                .to_string()
        };
        Self::new(
            source,
            origin,
            text_of(tokenizer.bos_id()),
            text_of(tokenizer.eos_id()),
        )
    }

    /// The chat template of a GGUF file or of a Hugging Face folder.
    pub fn load(path: &std::path::Path, tokenizer: &Tokenizer) -> Result<Self, ChatError> {
        if hf::is_folder(path) {
            Self::from_hf_folder(path, tokenizer)
        } else {
            Self::from_gguf(&GgufFile::open(path)?, tokenizer)
        }
    }

    /// The template of a Hugging Face folder ([`Self::hf_source`]); [`ChatError::NoTemplate`]
    /// when it has none.
    pub fn from_hf_folder(dir: &std::path::Path, tokenizer: &Tokenizer) -> Result<Self, ChatError> {
        let Some((source, origin)) = Self::hf_source(dir)? else {
            return Err(ChatError::NoTemplate(dir.display().to_string()));
        };
        let text_of = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .unwrap_or_default()
                .to_string()
        };
        Self::new(
            &source,
            origin.display().to_string(),
            text_of(tokenizer.bos_id()),
            text_of(tokenizer.eos_id()),
        )
    }

    /// The template source of a Hugging Face folder and the file it came from, where
    /// transformers looks: chat_template.jinja, which takes priority, else tokenizer_config.json.
    pub fn hf_source(
        dir: &std::path::Path,
    ) -> Result<Option<(String, std::path::PathBuf)>, ChatError> {
        let jinja_path = dir.join(hf::CHAT_TEMPLATE);
        if jinja_path.is_file() {
            let source = std::fs::read_to_string(&jinja_path).map_err(|e| ChatError::Template {
                path: jinja_path.display().to_string(),
                message: e.to_string(),
            })?;
            return Ok(Some((source, jinja_path)));
        }
        let config_path = dir.join(hf::TOKENIZER_CONFIG);
        Ok(Self::from_tokenizer_config(&config_path)?.map(|source| (source, config_path)))
    }

    /// `chat_template` of tokenizer_config.json, if the file has one: a string, or the
    /// `default` entry of a list of named templates.
    fn from_tokenizer_config(path: &std::path::Path) -> Result<Option<String>, ChatError> {
        if !path.is_file() {
            return Ok(None);
        }
        let config = hf::read_json(path).map_err(TokenizerError::from)?;
        match config.get("chat_template") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(serde_json::Value::Array(named)) => Ok(named
                .iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|t| t.get("template")?.as_str().map(str::to_string))),
            Some(other) => Err(ChatError::Template {
                path: path.display().to_string(),
                message: format!(
                    "`chat_template` should be a string or a list of named templates, found {other}"
                ),
            }),
        }
    }

    /// A template from source text; `origin` names it in errors.
    pub fn new(source: &str, origin: String, bos: String, eos: String) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| template_error(&origin, &e))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| template_error(&origin, &e))?;
        Ok(Self {
            env,
            origin,
            bos,
            eos,
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                context! { role => m.role.as_str(), content => m.content.as_str() }
            })
            .collect();
        self.env
            .get_template("chat")
            .and_then(|t| {
                t.render(context! {
                    messages => messages,
                    add_generation_prompt => add_generation_prompt,
                    bos_token => self.bos.as_str(),
                    eos_token => self.eos.as_str(),
                })
            })
            .map_err(|e| template_error(&self.origin, &e))
    }

    /// Renders `messages` followed by an assistant turn that starts with `prefill` and is left
    /// open (no end-of-turn), so the model continues it. The prefill is inserted verbatim, even
    /// where the template would strip or escape message content.
    pub fn render_with_prefill(
        &self,
        messages: &[Message],
        prefill: &str,
    ) -> Result<String, ChatError> {
        let mut all = messages.to_vec();
        all.push(Message::new("assistant", PREFILL_MARK));
        let rendered = self.render(&all, false)?;
        let at = rendered
            .rfind(PREFILL_MARK)
            .ok_or_else(|| ChatError::Template {
                path: self.origin.clone(),
                message: "the template drops the content of a final assistant message, so it \
                      cannot be prefilled"
                    .into(),
            })?;
        Ok(format!("{}{prefill}", &rendered[..at]))
    }

    /// Token ids of a rendered chat: control tokens parsed, and BOS added by the tokenizer's
    /// rule only if the template did not already write it (never a double BOS).
    pub fn tokenize(&self, tokenizer: &Tokenizer, rendered: &str) -> Result<Vec<u32>, ChatError> {
        Ok(self
            .tokenize_with_offsets(tokenizer, rendered)?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// [`ChatTemplate::tokenize`] with the byte range of `rendered` each token came from.
    pub fn tokenize_with_offsets(
        &self,
        tokenizer: &Tokenizer,
        rendered: &str,
    ) -> Result<Vec<(u32, std::ops::Range<usize>)>, ChatError> {
        let has_bos = !self.bos.is_empty() && rendered.starts_with(&self.bos);
        Ok(tokenizer.encode_with_offsets(rendered, !has_bos, true)?)
    }
}

fn template_error(origin: &str, err: &minijinja::Error) -> ChatError {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ChatError::Template {
        path: origin.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, verbatim from its GGUF.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn smollm2() -> ChatTemplate {
        ChatTemplate::new(
            SMOLLM2,
            "test".into(),
            "<|im_start|>".into(),
            "<|im_end|>".into(),
        )
        .unwrap()
    }

    #[test]
    fn renders_default_system_prompt_and_generation_prompt() {
        let text = smollm2()
            .render(&[Message::new("user", "What is 2+2?")], true)
            .unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn prefill_continues_the_assistant_turn_without_end_of_turn() {
        let text = smollm2()
            .render_with_prefill(&[Message::new("user", "Q?")], "The answer is ")
            .unwrap();
        assert!(
            text.ends_with("<|im_start|>assistant\nThe answer is "),
            "{text:?}"
        );
        assert!(!text.contains(PREFILL_MARK));
    }

    #[test]
    fn raise_exception_and_python_methods_work() {
        let t = ChatTemplate::new(
            "{% if messages[0]['content'].strip().startswith('x') %}{{ raise_exception('no x') }}{% endif %}ok",
            "t".into(),
            String::new(),
            String::new(),
        )
        .unwrap();
        assert_eq!(
            t.render(&[Message::new("user", " y")], false).unwrap(),
            "ok"
        );
        let err = t
            .render(&[Message::new("user", " x")], false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no x"), "{err}");
    }

    #[test]
    fn syntax_error_names_the_template() {
        let err = ChatTemplate::new(
            "{% for %}",
            "model.gguf".into(),
            String::new(),
            String::new(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("model.gguf"), "{err}");
    }
}
