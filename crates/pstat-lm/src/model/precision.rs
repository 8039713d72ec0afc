//! How a product with a weight matrix is computed: in f32 on the dequantized weights or with
//! the q8 integer kernels ([`Precision`]), and, under q8, with which instruction set
//! ([`Isa`]).
//!
//! Every [`super::weights::Matrix`] carries its precision and every q8 kernel is picked by
//! its instruction set, so this file sits below the weights and the kernels and imports
//! nothing of the model.

/// How products with weight matrices are computed (`precision` in a run config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 products on exactly the dequantized weights (the default; comparable with
    /// llama.cpp on an F32 re-quantized file).
    #[default]
    F32,
    /// Activations quantized to 8 bits per block and integer dot products against the stored
    /// blocks, as llama.cpp computes quantized products.
    Q8,
}

impl Precision {
    /// Every precision's name, as configs and `--precision` spell it.
    pub const NAMES: [&'static str; 2] = ["f32", "q8"];

    /// This precision's name ([`Precision::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Q8 => "q8",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "q8" => Ok(Precision::Q8),
            _ => Err(format!("unknown precision `{s}` (expected f32 or q8)")),
        }
    }
}

/// The instruction set a q8 product runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// The scalar reference kernels (every CPU).
    Scalar,
    /// AVX2 (`maddubs` + `madd` integer sums).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX512-VNNI (`vpdpbusd`), with AVX512F/BW/VL.
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Isa {
    /// The best this CPU has, detected once.
    pub fn detect() -> Isa {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                if has!("avx2")
                    && has!("avx512f")
                    && has!("avx512bw")
                    && has!("avx512vl")
                    && has!("avx512vnni")
                {
                    return Isa::Vnni;
                }
                if has!("avx2") {
                    return Isa::Avx2;
                }
            }
            Isa::Scalar
        })
    }

    /// The name manifests record.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Vnni => "avx512vnni",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_names_parse() {
        assert_eq!("q8".parse::<Precision>().unwrap(), Precision::Q8);
        assert_eq!("f32".parse::<Precision>().unwrap(), Precision::F32);
        assert!("q4".parse::<Precision>().unwrap_err().contains("f32 or q8"));
    }
}
