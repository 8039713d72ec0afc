use crate::error::UnknownName;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One of the three P-StaT domains. The string form (`city_locations`, ...) is the one used in
/// file names, CLI flags and every output table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    /// Cities and the countries they are in (`city_locations`).
    CityLocations,
    /// Drugs and the conditions they treat (`med_indications`).
    MedIndications,
    /// Words and their instances, types and synonyms (`word_definitions`).
    WordDefinitions,
}

impl Domain {
    /// The three domains, in the order of every table.
    pub const ALL: [Domain; 3] = [
        Domain::CityLocations,
        Domain::MedIndications,
        Domain::WordDefinitions,
    ];

    /// The string form (`city_locations`, `med_indications`, `word_definitions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Domain::CityLocations => "city_locations",
            Domain::MedIndications => "med_indications",
            Domain::WordDefinitions => "word_definitions",
        }
    }

    /// Human-readable name as the paper prints it.
    pub fn title(self) -> &'static str {
        match self {
            Domain::CityLocations => "City Locations",
            Domain::MedIndications => "Medical Indications",
            Domain::WordDefinitions => "Word Definitions",
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Domain {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "city_locations" | "city" | "cities" => Ok(Domain::CityLocations),
            "med_indications" | "med" | "medical" | "medical_indications" => {
                Ok(Domain::MedIndications)
            }
            "word_definitions" | "word" | "words" => Ok(Domain::WordDefinitions),
            other => Err(UnknownName(format!(
                "unknown domain `{other}` (expected city_locations, med_indications or word_definitions)"
            ))),
        }
    }
}

/// The statement types of Table 1. Fictional statements carry their canonical truth within
/// their fiction as two kinds (Fictional (T) / Fictional (F)), exactly as True/False carry the
/// real-world truth of the sentence as written (a negated sentence about a wrong pair is true).
/// `Noise` has no text: it names the non-semantic control (Gaussian activations for probing,
/// cross-domain True statements for prompting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// True about real entities (label True).
    True,
    /// False about real entities (label False).
    False,
    /// Fictional (T): about fictional entities, true within their fiction (label Neither).
    FictionalT,
    /// Fictional (F): about fictional entities, false within their fiction (label Neither).
    FictionalF,
    /// Synthetic (TF): about made-up entities, from the upstream synthetic files (label
    /// Neither).
    SyntheticTf,
    /// Synthetic (Fi): about made-up entities, from our generator (label Neither).
    SyntheticFi,
    /// The non-semantic control: no text (label Neither).
    Noise,
}

impl Kind {
    /// The six kinds that have text (every kind but [`Kind::Noise`]), in Table 1's order.
    pub const TEXTUAL: [Kind; 6] = [
        Kind::True,
        Kind::False,
        Kind::FictionalT,
        Kind::FictionalF,
        Kind::SyntheticTf,
        Kind::SyntheticFi,
    ];

    /// Every kind, [`Kind::TEXTUAL`] then [`Kind::Noise`].
    pub const ALL: [Kind; 7] = [
        Kind::True,
        Kind::False,
        Kind::FictionalT,
        Kind::FictionalF,
        Kind::SyntheticTf,
        Kind::SyntheticFi,
        Kind::Noise,
    ];

    /// The string form (`true`, `false`, `fictional_t`, `fictional_f`, `synthetic_tf`,
    /// `synthetic_fi`, `noise`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::True => "true",
            Kind::False => "false",
            Kind::FictionalT => "fictional_t",
            Kind::FictionalF => "fictional_f",
            Kind::SyntheticTf => "synthetic_tf",
            Kind::SyntheticFi => "synthetic_fi",
            Kind::Noise => "noise",
        }
    }

    /// Name as the paper prints it.
    pub fn title(self) -> &'static str {
        match self {
            Kind::True => "True",
            Kind::False => "False",
            Kind::FictionalT => "Fictional (T)",
            Kind::FictionalF => "Fictional (F)",
            Kind::SyntheticTf => "Synthetic (TF)",
            Kind::SyntheticFi => "Synthetic (Fi)",
            Kind::Noise => "Noise",
        }
    }

    /// Fictional (T) or Fictional (F).
    pub fn is_fictional(self) -> bool {
        matches!(self, Kind::FictionalT | Kind::FictionalF)
    }

    /// Ground-truth label: true = correct ∧ real, false = ¬correct ∧ real, neither = ¬real.
    pub fn label(self) -> Label {
        match self {
            Kind::True => Label::True,
            Kind::False => Label::False,
            _ => Label::Neither,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        let norm: String = s
            .trim()
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == norm || k.as_str().replace('_', "") == norm)
            .ok_or_else(|| {
                UnknownName(format!(
                    "unknown statement kind `{s}` (expected one of: {})",
                    Kind::ALL.map(|k| k.as_str()).join(", ")
                ))
            })
    }
}

/// The three-valued truth label of the trilemma.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// True in the real world.
    True,
    /// False in the real world.
    False,
    /// Neither: about entities that do not exist in the real world (Fictional, Synthetic,
    /// Noise).
    Neither,
}

/// One declarative statement of any domain and kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// Stable id: `{file stem}:{0-based data row}`, e.g. `city_locations:17`. It survives
    /// reordering of other files and is what every output table refers to.
    pub id: String,
    /// The domain it belongs to.
    pub domain: Domain,
    /// The relation of the template: `cities`, `indications`, `instances`, `types`, `synonyms`.
    pub relation: String,
    /// The sentence, trimmed.
    pub text: String,
    /// object_1 of the upstream CSVs: city, drug or head word.
    pub subject: String,
    /// object_2: country/region, condition, or category/hypernym/synonym.
    pub object: String,
    /// Whether the sentence is negated (the CSV's `negation`).
    pub negated: bool,
    /// Its kind (Table 1).
    pub kind: Kind,
    /// Where the row came from: `trilemma/city_locations.csv:19` (file and 1-based line).
    pub provenance: String,
    /// For Fictional statements, the work the entity comes from; for Synthetic (Fi), the
    /// generator settings. Empty otherwise.
    pub source: String,
}

impl Statement {
    /// The True/False/Neither label of its kind.
    pub fn label(&self) -> Label {
        self.kind.label()
    }
}
