//! The paper's 21 models (Appendix C, Table A3) and their veracity layers per domain, so a
//! study on one of them starts from the paper's layer. A model is recognised by its name (GGUF
//! `general.name`, config.json's `_name_or_path`, or its file or folder name) together with its
//! architecture and depth; without a name, by architecture and size alone when every paper model
//! of that shape agrees on the layer.

use crate::gguf::{GgufFile, ModelConfig};
use crate::hf;
use crate::runtime::LanguageModel;
use pstat_data::Domain;
use std::path::Path;

/// One row of Table A3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PaperModel {
    /// The paper's short name (`_` marks chat models).
    pub short_name: &'static str,
    /// The Hugging Face repository.
    pub repo: &'static str,
    pub chat: bool,
    /// GGUF `general.architecture`.
    pub arch: &'static str,
    pub n_layers: usize,
    pub hidden: usize,
    /// Rows of the token embedding in the Hugging Face weights.
    pub vocab: usize,
    /// Veracity layer for City Locations, Medical Indications, Word Definitions.
    pub layers: [usize; 3],
    /// Normalised names (lower-case letters and digits) that identify the model.
    #[serde(skip)]
    keys: &'static [&'static str],
}

impl PaperModel {
    /// The paper's veracity layer for `domain`.
    pub fn layer(&self, domain: Domain) -> usize {
        match domain {
            Domain::CityLocations => self.layers[0],
            Domain::MedIndications => self.layers[1],
            Domain::WordDefinitions => self.layers[2],
        }
    }

    /// Family as the paper groups models.
    pub fn family(&self) -> &'static str {
        crate::registry::family_of(self.repo)
    }
}

macro_rules! paper_model {
    ($short:literal, $repo:literal, $chat:literal, $arch:literal, $n:literal, $h:literal, $v:literal, [$c:literal, $m:literal, $w:literal], $keys:expr) => {
        PaperModel {
            short_name: $short,
            repo: $repo,
            chat: $chat,
            arch: $arch,
            n_layers: $n,
            hidden: $h,
            vocab: $v,
            layers: [$c, $m, $w],
            keys: $keys,
        }
    };
}

/// Table A3, in the paper's order. Layers are the paper's (C, M, W); the shape columns come
/// from each repository's config.json. The paper lists the chat Gemma 3 as "Gemma-3-27b-pt";
/// its repository is gemma-3-27b-it.
pub const PAPER_MODELS: [PaperModel; 21] = [
    paper_model!(
        "gemma-7b",
        "google/gemma-7b",
        false,
        "gemma",
        28,
        3072,
        256000,
        [14, 19, 17],
        &["gemma7b"]
    ),
    paper_model!(
        "gemma-2-9b",
        "google/gemma-2-9b",
        false,
        "gemma2",
        42,
        3584,
        256000,
        [24, 25, 23],
        &["gemma29b"]
    ),
    paper_model!(
        "gemma-3-27b",
        "google/gemma-3-27b-pt",
        false,
        "gemma3",
        62,
        5376,
        262208,
        [34, 25, 27],
        &["gemma327bpt", "gemma327b"]
    ),
    paper_model!(
        "llama-3.1-8b",
        "meta-llama/Llama-3.1-8B",
        false,
        "llama",
        32,
        4096,
        128256,
        [18, 17, 17],
        &["llama318b"]
    ),
    paper_model!(
        "llama-3.2-3b",
        "meta-llama/Llama-3.2-3B",
        false,
        "llama",
        28,
        3072,
        128256,
        [16, 17, 15],
        &["llama323b"]
    ),
    paper_model!(
        "mistral-7B-v0.3",
        "mistralai/Mistral-7B-v0.3",
        false,
        "llama",
        32,
        4096,
        32768,
        [18, 17, 18],
        &["mistral7bv03"]
    ),
    paper_model!(
        "qwen-2.5-7b",
        "Qwen/Qwen2.5-7B",
        false,
        "qwen2",
        28,
        3584,
        152064,
        [18, 19, 17],
        &["qwen257b"]
    ),
    paper_model!(
        "qwen-2.5-14b",
        "Qwen/Qwen2.5-14B",
        false,
        "qwen2",
        48,
        5120,
        152064,
        [30, 31, 30],
        &["qwen2514b"]
    ),
    paper_model!(
        "qwen-2.5-72b",
        "Qwen/Qwen2.5-72B",
        false,
        "qwen2",
        80,
        8192,
        152064,
        [22, 20, 8],
        &["qwen2572b"]
    ),
    paper_model!(
        "_gemma-7b",
        "google/gemma-7b-it",
        true,
        "gemma",
        28,
        3072,
        256000,
        [19, 19, 17],
        &["gemma7bit"]
    ),
    paper_model!(
        "_gemma-2-9b",
        "google/gemma-2-9b-it",
        true,
        "gemma2",
        42,
        3584,
        256000,
        [27, 26, 25],
        &["gemma29bit"]
    ),
    paper_model!(
        "_gemma-3-27b",
        "google/gemma-3-27b-it",
        true,
        "gemma3",
        62,
        5376,
        262208,
        [35, 31, 33],
        &["gemma327bit"]
    ),
    paper_model!(
        "_llama-3.2-3b",
        "meta-llama/Llama-3.2-3B-Instruct",
        true,
        "llama",
        28,
        3072,
        128256,
        [16, 19, 18],
        &["llama323binstruct"]
    ),
    paper_model!(
        "_llama-3.1-8b",
        "meta-llama/Llama-3.1-8B-Instruct",
        true,
        "llama",
        32,
        4096,
        128256,
        [18, 19, 18],
        &["llama318binstruct"]
    ),
    paper_model!(
        "_llama-3.3-70b",
        "meta-llama/Llama-3.3-70B-Instruct",
        true,
        "llama",
        80,
        8192,
        128256,
        [20, 40, 20],
        &["llama3370binstruct"]
    ),
    paper_model!(
        "_llama-3-8b-med",
        "m42-health/Llama3-Med42-8B",
        true,
        "llama",
        32,
        4096,
        128256,
        [18, 16, 15],
        &["llama3med428b", "med428b"]
    ),
    paper_model!(
        "_llama-3-8b-bio",
        "ContactDoctor/Bio-Medical-Llama-3-8B",
        true,
        "llama",
        32,
        4096,
        128256,
        [18, 19, 18],
        &["biomedicalllama38b"]
    ),
    paper_model!(
        "_mistral-7B-v0.3",
        "mistralai/Mistral-7B-Instruct-v0.3",
        true,
        "llama",
        32,
        4096,
        32768,
        [19, 21, 18],
        &["mistral7binstructv03"]
    ),
    paper_model!(
        "_qwen-2.5-7b",
        "Qwen/Qwen2.5-7B-Instruct",
        true,
        "qwen2",
        28,
        3584,
        152064,
        [19, 21, 18],
        &["qwen257binstruct"]
    ),
    paper_model!(
        "_qwen-2.5-14b",
        "Qwen/Qwen2.5-14B-Instruct",
        true,
        "qwen2",
        48,
        5120,
        152064,
        [31, 34, 30],
        &["qwen2514binstruct"]
    ),
    paper_model!(
        "_qwen-2.5-72b",
        "Qwen/Qwen2.5-72B-Instruct",
        true,
        "qwen2",
        80,
        8192,
        152064,
        [79, 69, 40],
        &["qwen2572binstruct"]
    ),
];

/// What is known about a model for recognising it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Names to match: `general.name`, `_name_or_path`, the file or folder path.
    pub names: Vec<String>,
    /// GGUF `general.architecture`.
    pub arch: String,
    pub n_layers: usize,
    pub hidden: usize,
    pub vocab: usize,
}

impl Identity {
    /// The identity of the model at `path` (GGUF file or Hugging Face folder) with decoder
    /// shape `config`.
    pub fn of(path: &Path, config: &ModelConfig) -> Self {
        let mut names = vec![path.display().to_string()];
        names.extend(name_of(path));
        Self {
            names,
            arch: config.arch.gguf_name().to_string(),
            n_layers: config.n_layers,
            hidden: config.hidden,
            vocab: config.vocab_size,
        }
    }

    fn same_shape(&self, m: &PaperModel) -> bool {
        // GGUF conversions may drop padding rows of the embedding (Gemma 3: 262208 → 262144).
        self.arch == m.arch
            && self.n_layers == m.n_layers
            && self.hidden == m.hidden
            && self.vocab.abs_diff(m.vocab) * 100 <= m.vocab
    }
}

/// The model's own name: GGUF `general.name`, or config.json's `_name_or_path`.
fn name_of(path: &Path) -> Option<String> {
    if hf::is_folder(path) {
        let config = hf::read_json(&path.join(hf::CONFIG)).ok()?;
        config.get("_name_or_path")?.as_str().map(str::to_string)
    } else {
        let file = GgufFile::open(path).ok()?;
        file.opt_str("general.name").ok()?.map(str::to_string)
    }
}

/// Lower-case letters and digits only: "Meta Llama 3.1 8B Instruct" → "metallama318binstruct".
fn normalise(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The paper models `identity` may be: the one whose longest key occurs in one of its names
/// (and whose shape matches), else every paper model of its shape.
pub fn candidates(identity: &Identity) -> Vec<&'static PaperModel> {
    let names: Vec<String> = identity.names.iter().map(|n| normalise(n)).collect();
    let named = PAPER_MODELS
        .iter()
        .filter(|m| identity.same_shape(m))
        .filter_map(|m| {
            let key = m
                .keys
                .iter()
                .filter(|k| names.iter().any(|n| n.contains(*k)))
                .map(|k| k.len())
                .max()?;
            Some((key, m))
        })
        .max_by_key(|(len, _)| *len);
    match named {
        Some((_, m)) => vec![m],
        None => PAPER_MODELS
            .iter()
            .filter(|m| identity.same_shape(m))
            .collect(),
    }
}

/// The single paper model `identity` is, if it can be told apart.
pub fn recognise(identity: &Identity) -> Option<&'static PaperModel> {
    match candidates(identity).as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The paper's veracity layer of a loaded model for `domain` (see [`layer_of`]); a user's
/// explicit layer always takes precedence over it.
pub fn paper_layer(model: &LanguageModel, domain: Domain) -> Option<usize> {
    layer_of(&Identity::of(model.path(), model.config()), domain)
}

/// The paper's veracity layer of `identity` for `domain`: the recognised model's, or the one
/// every paper model of its shape shares; `None` when it is not a paper model or the candidates
/// disagree.
pub fn layer_of(identity: &Identity, domain: Domain) -> Option<usize> {
    let layers: Vec<usize> = candidates(identity)
        .iter()
        .map(|m| m.layer(domain))
        .collect();
    let first = *layers.first()?;
    layers.iter().all(|&l| l == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(
        names: &[&str],
        arch: &str,
        n_layers: usize,
        hidden: usize,
        vocab: usize,
    ) -> Identity {
        Identity {
            names: names.iter().map(|n| n.to_string()).collect(),
            arch: arch.into(),
            n_layers,
            hidden,
            vocab,
        }
    }

    #[test]
    fn table_a3_layers_are_the_papers() {
        // (short name, C, M, W) copied from Table A3.
        let expected = [
            ("gemma-7b", 14, 19, 17),
            ("gemma-2-9b", 24, 25, 23),
            ("gemma-3-27b", 34, 25, 27),
            ("llama-3.1-8b", 18, 17, 17),
            ("llama-3.2-3b", 16, 17, 15),
            ("mistral-7B-v0.3", 18, 17, 18),
            ("qwen-2.5-7b", 18, 19, 17),
            ("qwen-2.5-14b", 30, 31, 30),
            ("qwen-2.5-72b", 22, 20, 8),
            ("_gemma-7b", 19, 19, 17),
            ("_gemma-2-9b", 27, 26, 25),
            ("_gemma-3-27b", 35, 31, 33),
            ("_llama-3.2-3b", 16, 19, 18),
            ("_llama-3.1-8b", 18, 19, 18),
            ("_llama-3.3-70b", 20, 40, 20),
            ("_llama-3-8b-med", 18, 16, 15),
            ("_llama-3-8b-bio", 18, 19, 18),
            ("_mistral-7B-v0.3", 19, 21, 18),
            ("_qwen-2.5-7b", 19, 21, 18),
            ("_qwen-2.5-14b", 31, 34, 30),
            ("_qwen-2.5-72b", 79, 69, 40),
        ];
        assert_eq!(PAPER_MODELS.len(), expected.len());
        for (m, (short, c, med, w)) in PAPER_MODELS.iter().zip(expected) {
            assert_eq!(m.short_name, short);
            assert_eq!(
                [
                    Domain::CityLocations,
                    Domain::MedIndications,
                    Domain::WordDefinitions
                ]
                .map(|d| m.layer(d)),
                [c, med, w],
                "{short}"
            );
            assert!(m.layers.iter().all(|&l| l <= m.n_layers), "{short}");
            assert_eq!(m.chat, short.starts_with('_'), "{short}");
        }
        let chat = PAPER_MODELS.iter().filter(|m| m.chat).count();
        assert_eq!((chat, PAPER_MODELS.len() - chat), (12, 9));
    }

    #[test]
    fn every_paper_model_is_recognised_by_its_repository_name() {
        for m in &PAPER_MODELS {
            let id = identity(&[m.repo], m.arch, m.n_layers, m.hidden, m.vocab);
            assert_eq!(recognise(&id), Some(m), "{}", m.repo);
        }
    }

    #[test]
    fn gguf_names_and_file_names_are_recognised() {
        let cases = [
            ("Meta Llama 3.1 8B Instruct", "_llama-3.1-8b"),
            ("Meta-Llama-3.1-8B", "llama-3.1-8b"),
            ("/models/Llama-3.2-3B-Instruct-Q4_K_M.gguf", "_llama-3.2-3b"),
            ("Qwen2.5 14B Instruct", "_qwen-2.5-14b"),
            ("/hub/models--Qwen--Qwen2.5-7B/snapshots/abc", "qwen-2.5-7b"),
            ("Llama3 Med42 8B", "_llama-3-8b-med"),
        ];
        for (name, short) in cases {
            let m = PAPER_MODELS.iter().find(|m| m.short_name == short).unwrap();
            let id = identity(&[name], m.arch, m.n_layers, m.hidden, m.vocab);
            assert_eq!(recognise(&id).map(|m| m.short_name), Some(short), "{name}");
        }
    }

    #[test]
    fn shape_without_name_gives_a_layer_only_when_unambiguous() {
        // Gemma 3 27B GGUF (embedding trimmed to 262144 rows), no name: base and chat disagree.
        let gemma = identity(&["model.gguf"], "gemma3", 62, 5376, 262144);
        assert_eq!(recognise(&gemma), None);
        assert_eq!(layer_of(&gemma, Domain::CityLocations), None);
        // Llama 3.3 70B is the only 80-layer llama: recognised by shape alone.
        let llama70 = identity(&["weights"], "llama", 80, 8192, 128256);
        assert_eq!(layer_of(&llama70, Domain::MedIndications), Some(40));
        // Qwen 2.5 72B base and chat: a name is needed.
        let qwen72 = identity(&["x"], "qwen2", 80, 8192, 152064);
        assert_eq!(layer_of(&qwen72, Domain::WordDefinitions), None);
        // A name with the wrong depth is not trusted (a tiny test model named like a paper one).
        let tiny = identity(&["Llama-3.1-8B-Instruct"], "llama", 2, 64, 128256);
        assert_eq!(recognise(&tiny), None);
        assert_eq!(layer_of(&tiny, Domain::CityLocations), None);
        // Not a paper model at all.
        let smol = identity(&["SmolLM2 135M Instruct"], "llama", 30, 576, 49152);
        assert_eq!(layer_of(&smol, Domain::CityLocations), None);
    }
}
