//! Weight matrices kept in the type their file stores them in (f32, f16, bf16 or a ggml block
//! quantization), dequantized to f32 a tile of rows at a time when a product needs them.
//!
//! Dequantization is candle's own (`GgmlType::to_float`, a port of ggml's reference
//! `dequantize_row_*`), applied to whole blocks, so a tile holds exactly the f32 values that
//! dequantizing the whole tensor at load would have produced; on x86-64 with AVX2 the types
//! the embedded models use go through kernels that compute the same values
//! (`dequant_avx2`).

use super::precision::Precision;
use candle_core::quantized::GgmlDType;
use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, GgmlType,
};
use half::{bf16, f16};
use pstat_data::error::Malformed;
use std::io::Read;
use std::sync::Arc;

/// The elements of one tensor, row-major, in their stored type: plain floats, or ggml blocks
/// of [`Stored::block_size`] consecutive elements of a row.
#[derive(Clone)]
pub enum Stored {
    /// Plain f32 elements.
    F32(Vec<f32>),
    /// IEEE half-precision elements.
    F16(Vec<f16>),
    /// bfloat16 elements.
    Bf16(Vec<bf16>),
    /// ggml Q4_0 blocks (4-bit, 32 elements, one scale).
    Q4_0(Vec<BlockQ4_0>),
    /// ggml Q4_1 blocks (4-bit, 32 elements, scale and minimum).
    Q4_1(Vec<BlockQ4_1>),
    /// ggml Q5_0 blocks (5-bit, 32 elements, one scale).
    Q5_0(Vec<BlockQ5_0>),
    /// ggml Q5_1 blocks (5-bit, 32 elements, scale and minimum).
    Q5_1(Vec<BlockQ5_1>),
    /// ggml Q8_0 blocks (8-bit, 32 elements, one scale).
    Q8_0(Vec<BlockQ8_0>),
    /// ggml Q2_K super-blocks (2-bit, 256 elements).
    Q2K(Vec<BlockQ2K>),
    /// ggml Q3_K super-blocks (3-bit, 256 elements).
    Q3K(Vec<BlockQ3K>),
    /// ggml Q4_K super-blocks (4-bit, 256 elements).
    Q4K(Vec<BlockQ4K>),
    /// ggml Q5_K super-blocks (5-bit, 256 elements).
    Q5K(Vec<BlockQ5K>),
    /// ggml Q6_K super-blocks (6-bit, 256 elements).
    Q6K(Vec<BlockQ6K>),
}

/// Runs `$body` with `$blocks` bound to the typed vector of whichever variant `$stored` is.
macro_rules! with_blocks {
    ($stored:expr, $blocks:ident => $body:expr) => {
        match $stored {
            Stored::F32($blocks) => $body,
            Stored::F16($blocks) => $body,
            Stored::Bf16($blocks) => $body,
            Stored::Q4_0($blocks) => $body,
            Stored::Q4_1($blocks) => $body,
            Stored::Q5_0($blocks) => $body,
            Stored::Q5_1($blocks) => $body,
            Stored::Q8_0($blocks) => $body,
            Stored::Q2K($blocks) => $body,
            Stored::Q3K($blocks) => $body,
            Stored::Q4K($blocks) => $body,
            Stored::Q5K($blocks) => $body,
            Stored::Q6K($blocks) => $body,
        }
    };
}

impl Stored {
    /// Reads `n_elements` elements of type `dtype` (raw ggml blocks, as a GGUF file lays them
    /// out) from `reader`. `Ok(None)` when pstat does not implement `dtype`.
    pub fn read(
        reader: &mut impl Read,
        dtype: GgmlDType,
        n_elements: usize,
    ) -> std::io::Result<Option<Self>> {
        Ok(Some(match dtype {
            GgmlDType::F32 => Self::F32(read_blocks(reader, n_elements)?),
            GgmlDType::F16 => Self::F16(read_blocks(reader, n_elements)?),
            GgmlDType::BF16 => Self::Bf16(read_blocks(reader, n_elements)?),
            GgmlDType::Q4_0 => Self::Q4_0(read_blocks(reader, n_elements)?),
            GgmlDType::Q4_1 => Self::Q4_1(read_blocks(reader, n_elements)?),
            GgmlDType::Q5_0 => Self::Q5_0(read_blocks(reader, n_elements)?),
            GgmlDType::Q5_1 => Self::Q5_1(read_blocks(reader, n_elements)?),
            GgmlDType::Q8_0 => Self::Q8_0(read_blocks(reader, n_elements)?),
            GgmlDType::Q2K => Self::Q2K(read_blocks(reader, n_elements)?),
            GgmlDType::Q3K => Self::Q3K(read_blocks(reader, n_elements)?),
            GgmlDType::Q4K => Self::Q4K(read_blocks(reader, n_elements)?),
            GgmlDType::Q5K => Self::Q5K(read_blocks(reader, n_elements)?),
            GgmlDType::Q6K => Self::Q6K(read_blocks(reader, n_elements)?),
            GgmlDType::Q8_1 | GgmlDType::Q8K => return Ok(None),
        }))
    }

    /// The ggml type of the elements.
    pub fn dtype(&self) -> GgmlDType {
        with_blocks!(self, b => element_type(b))
    }

    /// Elements per block: a row's length must be a multiple of it.
    pub fn block_size(&self) -> usize {
        self.dtype().block_size()
    }

    /// How many elements the tensor holds.
    pub fn n_elements(&self) -> usize {
        with_blocks!(self, b => b.len() * self.block_size())
    }

    /// Bytes the stored elements or blocks occupy.
    pub fn size_in_bytes(&self) -> usize {
        with_blocks!(self, b => std::mem::size_of_val(b.as_slice()))
    }

    /// The stored blocks as the file laid them out (ggml's layout of the type).
    pub(super) fn bytes(&self) -> &[u8] {
        with_blocks!(self, b => as_bytes(b))
    }

    /// Elements `first..first + out.len()` as f32; both ends on block boundaries.
    fn dequantize_into(&self, first: usize, out: &mut [f32]) {
        let block = self.block_size();
        debug_assert!(first.is_multiple_of(block) && out.len().is_multiple_of(block));
        let blocks = first / block..(first + out.len()) / block;
        #[cfg(target_arch = "x86_64")]
        {
            let dtype = self.dtype();
            let size = dtype.type_size();
            let bytes = &self.bytes()[blocks.start * size..blocks.end * size];
            if super::dequant_avx2::dequantize(dtype, bytes, out) {
                return;
            }
        }
        with_blocks!(self, b => GgmlType::to_float(&b[blocks], out))
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}[{}]", self.dtype(), self.n_elements())
    }
}

/// The bytes of a slice of ggml blocks (or plain floats), as the file laid them out.
fn as_bytes<T>(blocks: &[T]) -> &[u8] {
    // SAFETY: ggml block types are `repr(C)` structs of f16s and byte arrays without padding
    // (and f32/f16/bf16 are plain numbers), so every byte of the slice is initialised.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), std::mem::size_of_val(blocks))
    }
}

fn element_type<T: GgmlType>(_: &[T]) -> GgmlDType {
    T::DTYPE
}

/// `n_elements` elements of block type `T` read straight into their typed vector.
fn read_blocks<T: GgmlType>(reader: &mut impl Read, n_elements: usize) -> std::io::Result<Vec<T>> {
    let n_blocks = n_elements / T::BLCK_SIZE;
    let mut blocks = vec![T::zeros(); n_blocks];
    // SAFETY: ggml's block types are `repr(C)` structs of f16s and byte arrays (or plain
    // f32/f16/bf16), so every byte pattern is a valid value, and the byte view covers exactly
    // the vector's initialised elements. The layout is the file's (little-endian, as ggml
    // writes it) because `size_of::<T>()` is ggml's type size for every block type.
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(
            blocks.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(blocks.as_slice()),
        )
    };
    reader.read_exact(bytes)?;
    Ok(blocks)
}

/// One stored tensor among the row blocks of a [`Matrix`].
#[derive(Debug, Clone)]
struct Part {
    rows: usize,
    /// Shared, so that fusing projections ([`Matrix::stack`]) moves no weights.
    data: Arc<Stored>,
}

/// A weight matrix `rows × cols` (row-major, as GGUF stores `[cols, rows]`): one or more
/// stored tensors of equal width stacked on top of each other.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Rows (output features).
    pub rows: usize,
    /// Columns (input features), the length of a row.
    pub cols: usize,
    parts: Vec<Part>,
    /// How products with this matrix are computed ([`super::ops::linear`]).
    pub precision: Precision,
}

impl Matrix {
    /// A matrix of f32 values.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Self {
        Self::from_stored(rows, cols, Stored::F32(data)).expect("matrix data must be rows × cols")
    }

    /// A matrix of stored elements; the error says why they cannot form `rows × cols`.
    pub fn from_stored(rows: usize, cols: usize, data: Stored) -> Result<Self, Malformed> {
        Self::checked(rows, cols, data).map_err(Malformed)
    }

    fn checked(rows: usize, cols: usize, data: Stored) -> Result<Self, String> {
        let block = data.block_size();
        if !cols.is_multiple_of(block) {
            return Err(format!(
                "rows of {cols} elements are not whole {:?} blocks of {block}",
                data.dtype()
            ));
        }
        if data.n_elements() != rows * cols {
            return Err(format!(
                "{} elements, expected {rows} × {cols}",
                data.n_elements()
            ));
        }
        Ok(Self {
            rows,
            cols,
            parts: vec![Part {
                rows,
                data: Arc::new(data),
            }],
            precision: Precision::F32,
        })
    }

    /// Stacks matrices with equal column counts on top of each other (fused projections).
    /// f32 parts are concatenated into one buffer (so the product runs as one gemm, exactly
    /// as before); stored types stay separate parts of their own types.
    pub fn stack(parts: &[Matrix]) -> Self {
        let cols = parts[0].cols;
        assert!(
            parts.iter().all(|p| p.cols == cols),
            "stacked matrices need equal widths"
        );
        let rows = parts.iter().map(|p| p.rows).sum();
        let precision = parts[0].precision;
        if parts.iter().all(|p| p.as_f32().is_some()) {
            let data = parts
                .iter()
                .flat_map(|p| p.as_f32().unwrap().iter().copied())
                .collect();
            return Self::new(rows, cols, data).with_precision(precision);
        }
        Self {
            rows,
            cols,
            parts: parts.iter().flat_map(|p| p.parts.iter().cloned()).collect(),
            precision,
        }
    }

    /// The same matrix, its products computed in `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Each part's first row and stored blocks, when every part is a block quantization
    /// (`None` if any is stored as floats).
    pub(super) fn quantized_parts(&self) -> Option<Vec<(usize, &Stored)>> {
        let mut first = 0;
        self.parts
            .iter()
            .map(|p| {
                let at = first;
                first += p.rows;
                let floats = matches!(
                    p.data.dtype(),
                    GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16
                );
                (!floats).then(|| (at, p.data.as_ref()))
            })
            .collect()
    }

    /// The elements as one f32 slice, when that is how they are stored.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self.parts.as_slice() {
            [Part { data, .. }] => match data.as_ref() {
                Stored::F32(v) => Some(v),
                _ => None,
            },
            _ => None,
        }
    }

    /// Bytes the stored elements occupy.
    pub fn size_in_bytes(&self) -> usize {
        self.parts.iter().map(|p| p.data.size_in_bytes()).sum()
    }

    /// The stored types of the parts, top to bottom.
    pub fn dtypes(&self) -> Vec<GgmlDType> {
        self.parts.iter().map(|p| p.data.dtype()).collect()
    }

    /// Rows `rows` dequantized to f32 into `out` (`rows.len() × cols`).
    pub fn dequantize_rows(&self, rows: std::ops::Range<usize>, out: &mut [f32]) {
        assert!(rows.end <= self.rows, "rows out of range");
        assert_eq!(out.len(), rows.len() * self.cols, "out must be rows × cols");
        let mut part_start = 0;
        let mut out = out;
        for part in &self.parts {
            let part_rows = part_start..part_start + part.rows;
            part_start += part.rows;
            let (lo, hi) = (rows.start.max(part_rows.start), rows.end.min(part_rows.end));
            if lo >= hi {
                continue;
            }
            let (head, rest) = out.split_at_mut((hi - lo) * self.cols);
            part.data
                .dequantize_into((lo - part_rows.start) * self.cols, head);
            out = rest;
        }
    }

    /// Row `i` as f32 (an embedding lookup dequantizes only the rows it needs).
    pub fn row(&self, i: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.cols];
        self.dequantize_rows(i..i + 1, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;
    use crate::model::Loader;
    use crate::model::ops::linear;
    use crate::weights::GgufTensors;
    use candle_core::quantized::{QStorage, QTensor, gguf_file};
    use candle_core::{Device, Tensor};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::borrow::Cow;

    const TYPES: [GgmlDType; 13] = [
        GgmlDType::F32,
        GgmlDType::F16,
        GgmlDType::BF16,
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q2K,
        GgmlDType::Q3K,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
    ];

    /// Writes `tensors` as a GGUF file and loads each back as a stored-type [`Matrix`].
    fn round_trip(tensors: &[(String, QTensor)]) -> Vec<Matrix> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weights.gguf");
        let named: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut out = std::fs::File::create(&path).unwrap();
        gguf_file::write(&mut out, &[], &named).unwrap();
        drop(out);
        let file = GgufFile::open(&path).unwrap();
        let mut tensors_of_file = GgufTensors::new(&file).unwrap();
        let mut loader = Loader::new(&mut tensors_of_file);
        tensors
            .iter()
            .map(|(name, t)| {
                let [rows, cols] = t.shape().dims() else {
                    panic!("matrices are 2-d")
                };
                loader.matrix(name, *rows, *cols).unwrap()
            })
            .collect()
    }

    fn candle_f32(t: &QTensor) -> Vec<f32> {
        let values = t.dequantize(&Device::Cpu).unwrap();
        values.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn bits(xs: &[f32]) -> Vec<u32> {
        xs.iter().map(|v| v.to_bits()).collect()
    }

    /// Random bytes as blocks of every type (any bit pattern is a block, NaN scales included),
    /// read from a file and dequantized by row ranges: bit for bit candle's dequantization of
    /// the whole tensor.
    #[test]
    fn every_stored_type_dequantizes_as_candle_does() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (rows, cols) = (6, 512);
        let tensors: Vec<(String, QTensor)> = TYPES
            .iter()
            .map(|&dtype| {
                let n_bytes = rows * cols / dtype.block_size() * dtype.type_size();
                let bytes: Vec<u8> = (0..n_bytes).map(|_| rng.random()).collect();
                let storage = QStorage::from_data(Cow::Owned(bytes), &Device::Cpu, dtype).unwrap();
                (
                    format!("{dtype:?}"),
                    QTensor::new(storage, (rows, cols)).unwrap(),
                )
            })
            .collect();
        for ((name, tensor), matrix) in tensors.iter().zip(round_trip(&tensors)) {
            assert_eq!(matrix.dtypes(), [tensor.dtype()], "{name}");
            assert_eq!(
                matrix.size_in_bytes(),
                tensor.storage_size_in_bytes(),
                "{name}"
            );
            let expected = bits(&candle_f32(tensor));
            let mut all = vec![0.0; rows * cols];
            matrix.dequantize_rows(0..rows, &mut all);
            assert_eq!(bits(&all), expected, "{name}: all rows");
            let mut middle = vec![0.0; 3 * cols];
            matrix.dequantize_rows(2..5, &mut middle);
            assert_eq!(
                bits(&middle),
                expected[2 * cols..5 * cols],
                "{name}: rows 2..5"
            );
            for r in 0..rows {
                assert_eq!(
                    bits(&matrix.row(r)),
                    expected[r * cols..(r + 1) * cols],
                    "{name}: row {r}"
                );
            }
        }
    }

    /// Products with stored weights, tiled and stacked across types, are bit for bit the
    /// product with the whole weight dequantized first, for every batch size (gemv for one
    /// row, small and large gemm blockings) and shape (one tile, several tiles).
    #[test]
    fn tiled_products_equal_dequantize_first() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut random = |rows: usize, cols: usize, dtype: GgmlDType| {
            let values: Vec<f32> = (0..rows * cols)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect();
            let t = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
            QTensor::quantize(&t, dtype).unwrap()
        };
        let shapes = [
            (40, 256, GgmlDType::Q8_0),
            (300, 256, GgmlDType::Q4K),
            (1100, 512, GgmlDType::Q8_0),
            (2300, 1024, GgmlDType::Q6K),
            (700, 768, GgmlDType::F16),
            (600, 256, GgmlDType::Q5_0),
        ];
        let tensors: Vec<(String, QTensor)> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(rows, cols, dtype))| (format!("w{i}"), random(rows, cols, dtype)))
            .collect();
        // A fused projection of three types, as Q4_K_M files mix Q4_K and Q6_K.
        let fused_parts = [
            ("q".to_string(), random(512, 512, GgmlDType::Q4K)),
            ("k".to_string(), random(128, 512, GgmlDType::Q6K)),
            ("v".to_string(), random(300, 512, GgmlDType::Q8_0)),
        ];
        let loaded = round_trip(&tensors);
        let fused = Matrix::stack(&round_trip(&fused_parts));
        let fused_f32: Vec<f32> = fused_parts
            .iter()
            .flat_map(|(_, t)| candle_f32(t))
            .collect();
        let mut cases: Vec<(Matrix, Matrix)> = tensors
            .iter()
            .zip(loaded)
            .map(|((_, t), m)| {
                let dense = Matrix::new(m.rows, m.cols, candle_f32(t));
                (m, dense)
            })
            .collect();
        cases.push((
            fused.clone(),
            Matrix::new(fused.rows, fused.cols, fused_f32),
        ));
        for (stored, dense) in &cases {
            assert!(stored.as_f32().is_none());
            for n in [1, 2, 5, 64, 65, 300] {
                let x: Vec<f32> = (0..n * stored.cols)
                    .map(|_| rng.random_range(-2.0f32..2.0))
                    .collect();
                assert_eq!(
                    bits(&linear(&x, n, stored)),
                    bits(&linear(&x, n, dense)),
                    "{:?} {}×{}, n = {n}",
                    stored.dtypes(),
                    stored.rows,
                    stored.cols
                );
            }
        }
    }

    /// The AVX2 kernels (Q4_1, Q8_0, Q4_K, Q6_K) against candle's scalar `to_float` on many
    /// random blocks, NaN and infinite scales included: bit for bit the same values.
    #[test]
    fn fast_dequantization_is_candles_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        assert!(
            std::env::var_os("CI").is_none() || std::arch::is_x86_feature_detected!("avx2"),
            "the CI machine must have AVX2 to test the AVX2 kernels"
        );
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let n_blocks = 4096;
        for dtype in [
            GgmlDType::Q4_1,
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
        ] {
            let bytes: Vec<u8> = (0..n_blocks * dtype.type_size())
                .map(|_| rng.random())
                .collect();
            let n = n_blocks * dtype.block_size();
            let stored = Stored::read(&mut bytes.as_slice(), dtype, n)
                .unwrap()
                .unwrap();
            let mut fast = vec![0.0; n];
            stored.dequantize_into(0, &mut fast);
            let mut reference = vec![0.0; n];
            with_blocks!(&stored, b => GgmlType::to_float(b, &mut reference));
            assert_eq!(bits(&fast), bits(&reference), "{dtype:?}");
        }
    }

    #[test]
    fn malformed_matrices_are_refused() {
        let q8 = Stored::Q8_0(vec![BlockQ8_0::zeros(); 4]);
        let err = Matrix::from_stored(2, 48, q8.clone()).unwrap_err().0;
        assert!(err.contains("not whole Q8_0 blocks"), "{err}");
        let err = Matrix::from_stored(3, 32, q8).unwrap_err().0;
        assert!(err.contains("128 elements, expected 3 × 32"), "{err}");
    }
}
