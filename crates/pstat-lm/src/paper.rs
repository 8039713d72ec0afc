//! The paper's 21 models (Appendix C, Table A3) and their veracity layers per domain, so a
//! study on one of them starts from the paper's layer. A model is recognised by its name (GGUF
//! `general.name`, config.json's `_name_or_path`, or its file or folder name) together with its
//! architecture and depth; without a name, by architecture and size alone when every paper model
//! of that shape agrees on the layer.
//!
//! Layer numbering: pstat's layer l is the output of the l-th decoder block (Hugging Face's
//! `hidden_states[l]`; layer 0 would be the embeddings). The authors' `collect_activations.py`
//! hooks `model.layers[l]` (0-based) and saves its output, so their layer l — the number
//! printed in Table A3 and in their `configs/model/*.yaml` `task_layers` — is pstat's layer
//! l + 1 ([`PaperModel::pstat_layer`]).

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
    /// Whether it is a chat (instruction-tuned) model.
    pub chat: bool,
    /// GGUF `general.architecture`.
    pub arch: &'static str,
    /// Decoder blocks.
    pub n_layers: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Rows of the token embedding in the Hugging Face weights.
    pub vocab: usize,
    /// Veracity layer for City Locations, Medical Indications, Word Definitions, as Table A3
    /// prints it (the authors' 0-based block index).
    pub layers: [usize; 3],
    /// Normalised names (lower-case letters and digits) that identify the model.
    #[serde(skip)]
    keys: &'static [&'static str],
}

impl PaperModel {
    /// The paper's veracity layer for `domain`, as Table A3 prints it.
    pub fn layer(&self, domain: Domain) -> usize {
        match domain {
            Domain::CityLocations => self.layers[0],
            Domain::MedIndications => self.layers[1],
            Domain::WordDefinitions => self.layers[2],
        }
    }

    /// The same layer in pstat's numbering: the output of the authors' 0-based block l is
    /// pstat's layer l + 1 (see the module documentation).
    pub fn pstat_layer(&self, domain: Domain) -> usize {
        self.layer(domain) + 1
    }

    /// pstat's veracity layers for City, Medical, Word.
    pub fn pstat_layers(&self) -> [usize; 3] {
        self.layers.map(|l| l + 1)
    }

    /// Family as the paper groups models.
    pub fn family(&self) -> &'static str {
        family_of(self.repo)
    }
}

/// Family of a model from its name.
pub fn family_of(name: &str) -> &'static str {
    let lower = name.to_lowercase();
    [
        ("smollm", "SmolLM"),
        ("gemma", "Gemma"),
        ("mistral", "Mistral"),
        ("qwen", "Qwen"),
        ("llama", "Llama"),
    ]
    .into_iter()
    .find(|(key, _)| lower.contains(key))
    .map_or("other", |(_, family)| family)
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
    /// Decoder blocks.
    pub n_layers: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Vocabulary size of the decoder (rows of its token embedding).
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

/// The paper's veracity layer of a loaded model for `domain`, in pstat's numbering (see
/// [`layer_of`]); a user's explicit layer always takes precedence over it.
pub fn paper_layer(model: &LanguageModel, domain: Domain) -> Option<usize> {
    layer_of(&Identity::of(model.path(), model.config()), domain)
}

/// The paper's veracity layer of `identity` for `domain` in pstat's numbering (Table A3's
/// l + 1): the recognised model's, or the one every paper model of its shape shares; `None`
/// when it is not a paper model or the candidates disagree.
pub fn layer_of(identity: &Identity, domain: Domain) -> Option<usize> {
    let layers: Vec<usize> = candidates(identity)
        .iter()
        .map(|m| m.pstat_layer(domain))
        .collect();
    let first = *layers.first()?;
    layers.iter().all(|&l| l == first).then_some(first)
}

/// The paper model with short name `name` (`_qwen-2.5-72b`), if any.
pub fn by_short_name(name: &str) -> Option<&'static PaperModel> {
    PAPER_MODELS.iter().find(|m| m.short_name == name)
}

/// The layers a probe reads around a veracity layer: offset o's layer is veracity + o + shift.
/// The shift is 0 unless the window of offsets would leave 1..=n_layers; then the whole window
/// is moved by the fewest layers that bring it inside (a shift, not a clip, so every offset
/// keeps a layer of its own and the window keeps its width). The veracity layer stays inside
/// the moved window whenever 0 is one of the offsets. `_qwen-2.5-72b` on City Locations
/// (Table A3: 79, pstat layer 80 of 80) reads 76..80 instead of 78..82.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerWindow {
    /// The veracity layer the window is centred on (pstat numbering: block i's output is
    /// layer i).
    pub veracity: usize,
    /// Decoder blocks of the model.
    pub n_layers: usize,
    /// Added to every veracity + offset (negative: moved down).
    pub shift: i64,
    /// (offset, layer) in the order of the offsets given.
    pub layers: Vec<(i64, usize)>,
}

impl LayerWindow {
    /// The window of `offsets` around `veracity` in a model of `n_layers` blocks; an error
    /// names the offsets and the depth when they cannot fit at all.
    pub fn new(veracity: usize, offsets: &[i64], n_layers: usize) -> Result<Self, String> {
        if veracity == 0 || veracity > n_layers {
            return Err(format!(
                "veracity layer {veracity} is outside 1..={n_layers}"
            ));
        }
        let v = veracity as i64;
        let n = n_layers as i64;
        let (Some(&lo), Some(&hi)) = (offsets.iter().min(), offsets.iter().max()) else {
            return Ok(Self {
                veracity,
                n_layers,
                shift: 0,
                layers: Vec::new(),
            });
        };
        if hi - lo + 1 > n {
            return Err(format!(
                "layer offsets {lo}..{hi} span {} layers, more than the model's {n_layers}",
                hi - lo + 1
            ));
        }
        let shift = if v + hi > n {
            n - (v + hi)
        } else if v + lo < 1 {
            1 - (v + lo)
        } else {
            0
        };
        let layers = offsets
            .iter()
            .map(|&o| (o, (v + o + shift) as usize))
            .collect();
        Ok(Self {
            veracity,
            n_layers,
            shift,
            layers,
        })
    }

    /// The layer read at `offset`.
    pub fn layer(&self, offset: i64) -> Option<usize> {
        self.layers
            .iter()
            .find(|(o, _)| *o == offset)
            .map(|(_, l)| *l)
    }

    /// Every layer read, in the order of the offsets.
    pub fn all(&self) -> Vec<usize> {
        self.layers.iter().map(|(_, l)| *l).collect()
    }

    /// What the shift did, for the record; `None` when the window needed none.
    pub fn note(&self) -> Option<String> {
        (self.shift != 0).then(|| {
            let layers = self.all();
            let (first, last) = (
                layers.iter().min().copied().unwrap_or(0),
                layers.iter().max().copied().unwrap_or(0),
            );
            format!(
                "window shifted by {:+} layers to {first}..{last} to stay within 1..={} \
                 (veracity layer {})",
                self.shift, self.n_layers, self.veracity
            )
        })
    }
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
        // Llama 3.3 70B is the only 80-layer llama: recognised by shape alone (Table A3's 40
        // is the output of block 40, pstat's layer 41).
        let llama70 = identity(&["weights"], "llama", 80, 8192, 128256);
        assert_eq!(layer_of(&llama70, Domain::MedIndications), Some(41));
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

    #[test]
    fn pstat_layers_are_the_authors_block_plus_one() {
        for m in &PAPER_MODELS {
            for (i, d) in Domain::ALL.into_iter().enumerate() {
                assert_eq!(m.pstat_layer(d), m.layers[i] + 1, "{}", m.short_name);
                let id = identity(&[m.repo], m.arch, m.n_layers, m.hidden, m.vocab);
                assert_eq!(layer_of(&id, d), Some(m.layers[i] + 1), "{}", m.short_name);
            }
        }
        let qwen72 = by_short_name("_qwen-2.5-72b").unwrap();
        assert_eq!(qwen72.pstat_layers(), [80, 70, 41]);
        assert_eq!(
            by_short_name("gemma-7b").unwrap().pstat_layers(),
            [15, 20, 18]
        );
        assert!(by_short_name("qwen-2.5-72").is_none());
    }

    #[test]
    fn every_shape_gets_five_distinct_valid_layers_around_its_veracity_layer() {
        let offsets = [-2, -1, 0, 1, 2];
        let mut shifted = Vec::new();
        for m in &PAPER_MODELS {
            for d in Domain::ALL {
                let v = m.pstat_layer(d);
                let w = LayerWindow::new(v, &offsets, m.n_layers).unwrap();
                let layers = w.all();
                assert_eq!(layers.len(), 5, "{} {d}", m.short_name);
                assert!(
                    layers.iter().all(|&l| (1..=m.n_layers).contains(&l)),
                    "{} {d}: {layers:?}",
                    m.short_name
                );
                // Five consecutive layers that contain the veracity layer.
                assert!(layers.windows(2).all(|p| p[1] == p[0] + 1), "{layers:?}");
                assert!(layers.contains(&v), "{} {d}", m.short_name);
                if w.shift == 0 {
                    assert_eq!(layers, (v - 2..=v + 2).collect::<Vec<_>>());
                    assert_eq!(w.note(), None);
                } else {
                    shifted.push((m.short_name, d, layers.clone(), w.note().unwrap()));
                }
            }
        }
        // Only `_qwen-2.5-72b` City (Table A3: 79, the last of 80 blocks) needs a shift.
        assert_eq!(shifted.len(), 1, "{shifted:?}");
        let (name, domain, layers, note) = &shifted[0];
        assert_eq!((*name, *domain), ("_qwen-2.5-72b", Domain::CityLocations));
        assert_eq!(layers, &[76, 77, 78, 79, 80]);
        assert!(note.contains("76..80") && note.contains("-2"), "{note}");
    }

    #[test]
    fn windows_shift_up_at_the_bottom_and_refuse_what_cannot_fit() {
        let w = LayerWindow::new(1, &[-2, -1, 0, 1, 2], 28).unwrap();
        assert_eq!((w.shift, w.all()), (2, vec![1, 2, 3, 4, 5]));
        assert_eq!(w.layer(0), Some(3));
        assert_eq!(LayerWindow::new(5, &[0], 5).unwrap().all(), [5]);
        assert!(LayerWindow::new(2, &[-2, -1, 0, 1, 2], 4).is_err());
        assert!(LayerWindow::new(9, &[0], 8).is_err());
        assert_eq!(
            LayerWindow::new(3, &[], 8).unwrap().all(),
            Vec::<usize>::new()
        );
    }
}
