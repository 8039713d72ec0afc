//! Where a model's tensors come from. The forward pass names tensors the GGUF way
//! (`blk.3.attn_q.weight`) and asks a [`TensorSource`] for them; a GGUF file answers directly,
//! a Hugging Face folder ([`crate::hf`]) maps each name to its safetensors tensor and applies
//! the transforms llama.cpp's converter would have applied. Either way the tensor comes back
//! in its stored type (quantized, F16, BF16 or F32) as a candle [`QTensor`].

use crate::gguf::{GgufError, GgufFile};
use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

/// A store of named tensors, in GGUF naming and GGUF layout.
pub trait TensorSource {
    /// Whether tensor `name` exists.
    fn has(&self, name: &str) -> bool;

    /// Tensor `name` in its stored type, dimensions outermost first.
    fn tensor(&mut self, name: &str) -> Result<QTensor, SourceError>;

    /// Tensor `name`'s data as stored, laid out as ggml lays out its type (what a weight
    /// matrix is kept in).
    fn raw(&mut self, name: &str) -> Result<RawTensor<'_>, SourceError>;

    /// The file that holds (or should hold) tensor `name`, for error messages.
    fn origin(&self, name: &str) -> String;
}

/// A tensor's dimensions (outermost first), stored type and a reader at its first byte.
pub struct RawTensor<'a> {
    /// Dimensions, outermost first.
    pub dims: Vec<usize>,
    /// The stored element type.
    pub dtype: GgmlDType,
    /// A reader positioned at the tensor's first byte.
    pub data: Box<dyn Read + 'a>,
}

/// A tensor that cannot be read from its source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading the GGUF file failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A tensor is absent, of an unsupported type or unreadable.
    #[error("{file}: tensor `{name}`: {detail}")]
    Tensor {
        /// The file that holds (or should hold) it.
        file: String,
        /// The tensor's name.
        name: String,
        /// What is wrong.
        detail: String,
    },
}

/// The tensors of one GGUF file.
pub struct GgufTensors<'a> {
    file: &'a GgufFile,
    reader: BufReader<File>,
}

impl<'a> GgufTensors<'a> {
    /// The tensors of `file`; fails when the file cannot be opened again for reading.
    pub fn new(file: &'a GgufFile) -> Result<Self, GgufError> {
        Ok(Self {
            file,
            reader: file.reader()?,
        })
    }
}

impl TensorSource for GgufTensors<'_> {
    fn has(&self, name: &str) -> bool {
        self.file.has_tensor(name)
    }

    fn tensor(&mut self, name: &str) -> Result<QTensor, SourceError> {
        Ok(self
            .file
            .tensor_with(&mut self.reader, name, &Device::Cpu)?)
    }

    fn raw(&mut self, name: &str) -> Result<RawTensor<'_>, SourceError> {
        let content = self.file.content();
        let info = content
            .tensor_infos
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor {
                path: self.file.path().to_path_buf(),
                name: name.to_string(),
            })?;
        let start = content.tensor_data_offset + info.offset;
        self.reader
            .seek(SeekFrom::Start(start))
            .map_err(|e| SourceError::Tensor {
                file: self.file.path().display().to_string(),
                name: name.to_string(),
                detail: format!("cannot read: {e}"),
            })?;
        Ok(RawTensor {
            dims: info.shape.dims().to_vec(),
            dtype: info.ggml_dtype,
            data: Box::new(&mut self.reader),
        })
    }

    fn origin(&self, _name: &str) -> String {
        self.file.path().display().to_string()
    }
}
