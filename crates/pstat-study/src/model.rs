//! A model loaded for a run: the runtime, its name in tables and folders, and how a statement
//! is fed to it for activations (notes §3.2: base model → BOS + statement; chat model → the
//! statement as the only user message, rendered by the model's chat template).

use pstat_data::Dataset;
use pstat_lm::LanguageModel;
use pstat_lm::input::{ModelText, StatementEncoder};
use std::path::Path;
use std::sync::Arc;

/// A model loaded once per run, with what every stage reads from it.
pub struct LoadedModel {
    /// Registry name, or the GGUF file's stem.
    pub name: String,
    /// The runtime: forward pass, hidden states, scoring.
    pub lm: LanguageModel,
    /// The tokenizer and chat template, read once from the model's file or folder; the
    /// statement encoder and the behavioral prompt codec share them.
    pub text: Arc<ModelText>,
    /// How statements are tokenized for probing and familiarity.
    pub encoder: StatementEncoder,
}

/// The `model` column of every table: the registry name, or a GGUF path's file stem.
pub fn display_name(name_or_path: &str) -> String {
    if pstat_lm::registry::find(name_or_path).is_some() {
        return name_or_path.to_string();
    }
    Path::new(name_or_path).file_stem().map_or_else(
        || name_or_path.to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

impl LoadedModel {
    /// Loads a registry model or a file, its products computed in `precision`.
    pub fn load(name_or_path: &str, precision: pstat_lm::Precision) -> anyhow::Result<Self> {
        let path = pstat_lm::registry::resolve(name_or_path)?;
        let name = if pstat_lm::registry::find(name_or_path).is_some() {
            name_or_path.to_string()
        } else {
            Path::new(name_or_path).file_stem().map_or_else(
                || name_or_path.to_string(),
                |s| s.to_string_lossy().into_owned(),
            )
        };
        let lm = LanguageModel::load_with(&path, precision)?;
        let text = Arc::new(ModelText::load(&path)?);
        let encoder = StatementEncoder::new(Arc::clone(&text))?;
        Ok(LoadedModel {
            name,
            lm,
            text,
            encoder,
        })
    }

    /// Token ids fed for each statement id (in the order given).
    pub fn encode_statements(
        &self,
        data: &Dataset,
        ids: &[String],
    ) -> anyhow::Result<Vec<Vec<u32>>> {
        let text = data.texts();
        ids.iter()
            .map(|id| {
                let text = text
                    .get(id.as_str())
                    .ok_or_else(|| anyhow::anyhow!("statement `{id}` is not in {}", data.domain))?;
                Ok(self.encoder.encode(text)?)
            })
            .collect()
    }

    /// Identifies the input format (plain, or chat with the template's hash) for cache keys.
    /// Activations under another precision are other numbers, so `q8` is part of the key
    /// (f32 keys are as before, so existing caches stay valid).
    pub fn input_signature(&self) -> String {
        match self.lm.precision() {
            pstat_lm::Precision::F32 => self.encoder.signature(),
            precision => format!("{} precision={precision}", self.encoder.signature()),
        }
    }
}
