#![warn(missing_docs)]
//! `pstat._pstat`: pstat's probes and belief-stability rates on numpy arrays, with the
//! scikit-learn conventions (constructor parameters, `fit`, fitted attributes ending in `_`).
//! Every computation is the pipeline crates' own (`pstat-probe`, `pstat-stability`); this
//! module converts and checks arrays, releases the GIL while Rust computes, and turns bad
//! input into `ValueError`.

use half::f16;
use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods,
};
use pstat_probe::search::CSearch;
use pstat_probe::{
    Bags, MassMeanParams, Probe, ProbeParams, SawMilParams, TrainedProbe, TrainingSet,
};
use pstat_stability::{BeliefComparison, Bootstrap, RowKey, stability_row};
use pyo3::exceptions::{PyAttributeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

fn value_error(message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(message.to_string())
}

/// Instance rows [instances, features] as f32: a float32 C-contiguous array is borrowed (no
/// copy); float16, float64 and strided arrays are converted once.
enum Rows<'py> {
    Borrowed(PyReadonlyArray2<'py, f32>),
    Owned(Vec<f32>),
}

struct Matrix<'py> {
    rows: Rows<'py>,
    n: usize,
    dim: usize,
}

impl Matrix<'_> {
    fn values(&self) -> &[f32] {
        match &self.rows {
            Rows::Borrowed(a) => a.as_slice().expect("checked C-contiguous"),
            Rows::Owned(v) => v,
        }
    }

    fn into_vec(self) -> Vec<f32> {
        match self.rows {
            Rows::Borrowed(a) => a.as_slice().expect("checked C-contiguous").to_vec(),
            Rows::Owned(v) => v,
        }
    }
}

fn describe(array: &Bound<'_, PyAny>) -> String {
    let dtype = array
        .getattr("dtype")
        .map(|d| d.to_string())
        .unwrap_or_else(|_| array.get_type().to_string());
    let shape = array
        .getattr("shape")
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    format!("dtype {dtype}, shape {shape}")
}

fn matrix<'py>(x: &Bound<'py, PyAny>) -> PyResult<Matrix<'py>> {
    let Ok(untyped) = x.cast::<PyUntypedArray>() else {
        return Err(value_error(format!(
            "X must be a numpy array [instances, features] of float32, float16 or float64, got {}",
            x.get_type()
        )));
    };
    if untyped.ndim() != 2 {
        return Err(value_error(format!(
            "X must be 2-D [instances, features], got {}",
            describe(x)
        )));
    }
    let (n, dim) = (untyped.shape()[0], untyped.shape()[1]);
    let rows = if let Ok(a) = x.cast::<PyArray2<f32>>() {
        let a = a.readonly();
        if a.as_slice().is_ok() {
            Rows::Borrowed(a)
        } else {
            Rows::Owned(a.as_array().iter().copied().collect())
        }
    } else if let Ok(a) = x.cast::<PyArray2<f16>>() {
        Rows::Owned(a.readonly().as_array().iter().map(|v| v.to_f32()).collect())
    } else if let Ok(a) = x.cast::<PyArray2<f64>>() {
        Rows::Owned(a.readonly().as_array().iter().map(|&v| v as f32).collect())
    } else {
        return Err(value_error(format!(
            "X must be float32, float16 or float64, got {}",
            describe(x)
        )));
    };
    Ok(Matrix { rows, n, dim })
}

/// A 1-D integer (or boolean) array as i64; floats and other dtypes are refused rather than
/// rounded.
fn integers(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let np = v.py().import("numpy")?;
    let array = np.call_method1("asarray", (v,))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = array.getattr("ndim")?.extract()?;
    if ndim != 1 || !matches!(kind.as_str(), "i" | "u" | "b") {
        return Err(value_error(format!(
            "{name} must be a 1-D integer array, got {}",
            describe(&array)
        )));
    }
    let array = array.call_method1("astype", ("int64",))?;
    let array = array.cast::<PyArray1<i64>>()?.readonly();
    Ok(array.as_array().to_vec())
}

/// Bags from X and `bag_offsets` (bag i owns rows offsets[i]..offsets[i+1]).
fn offsets(offsets: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<usize>> {
    let raw = integers("bag_offsets", offsets)?;
    if let Some(i) = raw.iter().position(|&o| o < 0 || o as usize > rows) {
        return Err(value_error(format!(
            "bag_offsets[{i}] = {} is outside 0..={rows} (the rows of X)",
            raw[i]
        )));
    }
    Ok(raw.into_iter().map(|o| o as usize).collect())
}

fn bags(x: &Bound<'_, PyAny>, bag_offsets: &Bound<'_, PyAny>) -> PyResult<Bags> {
    let m = matrix(x)?;
    let offsets = offsets(bag_offsets, m.n)?;
    let dim = m.dim;
    Bags::new(dim, m.into_vec(), offsets).map_err(value_error)
}

/// ±1 bag labels; {0, 1} and booleans are read as {-1, +1}.
fn labels(y: &Bound<'_, PyAny>, n_bags: usize) -> PyResult<Vec<i8>> {
    let raw = integers("y", y)?;
    if raw.len() != n_bags {
        return Err(value_error(format!(
            "y has {} labels for {n_bags} bags",
            raw.len()
        )));
    }
    let zero_one = !raw.contains(&-1);
    raw.iter()
        .enumerate()
        .map(|(i, &v)| match (v, zero_one) {
            (1, _) => Ok(1),
            (-1, false) | (0, true) => Ok(-1),
            _ => Err(value_error(format!(
                "y[{i}] = {v}: labels must be -1/1 or 0/1"
            ))),
        })
        .collect()
}

fn training_set(
    x: &Bound<'_, PyAny>,
    bag_offsets: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    intra: Option<&Bound<'_, PyAny>>,
) -> PyResult<TrainingSet> {
    let bags = bags(x, bag_offsets)?;
    let labels = labels(y, bags.len())?;
    let set = match intra {
        None => TrainingSet::with_last_known(bags, labels, pstat_probe::KNOWN_POSITIVES),
        Some(intra) => {
            let raw = integers("intra", intra)?;
            if let Some(i) = raw.iter().position(|&v| v != 0 && v != 1) {
                return Err(value_error(format!(
                    "intra[{i}] = {}, expected 0 or 1 (known positive instance)",
                    raw[i]
                )));
            }
            TrainingSet::new(bags, labels, raw.iter().map(|&v| v == 1).collect())
        }
    };
    set.map_err(value_error)
}

fn not_fitted(name: &str) -> PyErr {
    PyAttributeError::new_err(format!(
        "this {name} is not fitted yet: call fit(X, bag_offsets, y) first"
    ))
}

/// Shared by both probe classes: scoring, labels and the fitted attributes.
fn scores<'py>(
    py: Python<'py>,
    probe: &TrainedProbe,
    x: &Bound<'py, PyAny>,
    bag_offsets: &Bound<'py, PyAny>,
) -> PyResult<Vec<f32>> {
    let m = matrix(x)?;
    if m.dim != probe.dim() {
        return Err(value_error(format!(
            "X has {} features but the probe was fitted on {}",
            m.dim,
            probe.dim()
        )));
    }
    let offsets = offsets(bag_offsets, m.n)?;
    let values = m.values();
    pstat_probe::bags::check_layout(m.dim, values, &offsets).map_err(value_error)?;
    let d = m.dim;
    Ok(py.detach(|| {
        offsets
            .windows(2)
            .map(|w| probe.score(&values[w[0] * d..w[1] * d]))
            .collect()
    }))
}

/// sklearn's `coef_`/`intercept_`: the probe's decision on one instance row x is
/// x·coef_ + intercept_ in the input space (the stored direction acts on standardized rows).
fn input_space(probe: &TrainedProbe) -> (Vec<f64>, f64) {
    let coef: Vec<f64> = probe
        .direction
        .iter()
        .zip(&probe.scaler.scale)
        .map(|(w, s)| w / s)
        .collect();
    let shift: f64 = coef
        .iter()
        .zip(&probe.scaler.mean)
        .map(|(c, m)| c * m)
        .sum();
    (coef, probe.bias - shift)
}

fn labels_of(scores: &[f32]) -> Vec<i64> {
    scores
        .iter()
        .map(|&s| i64::from(TrainedProbe::label(s)))
        .collect()
}

fn load_probe(path: PathBuf, kind: Probe) -> PyResult<TrainedProbe> {
    let probe = TrainedProbe::load(&path).map_err(value_error)?;
    if probe.kind() != kind {
        return Err(value_error(format!(
            "{}: is a {} probe, not {}",
            path.display(),
            probe.kind(),
            kind
        )));
    }
    Ok(probe)
}

/// The sAwMIL probe (sparse-aware multiple-instance SVM): a bag is a statement, its instances
/// are the statement's token activations; a bag's score is the maximum instance score.
#[pyclass(module = "pstat", name = "SAwMIL")]
struct SAwMil {
    /// Regularization C used when `search` is False.
    #[pyo3(get, set, name = "C")]
    c: f64,
    /// Choose C from `C_grid` by k-fold cross-validation on average precision (one-SE rule).
    #[pyo3(get, set)]
    search: bool,
    #[pyo3(get, set, name = "C_grid")]
    c_grid: Vec<f64>,
    #[pyo3(get, set)]
    cv_folds: usize,
    #[pyo3(get, set)]
    cv_bag_limit: usize,
    #[pyo3(get, set)]
    train_bag_limit: usize,
    #[pyo3(get, set)]
    max_bag_size: usize,
    #[pyo3(get, set)]
    seed: u64,
    probe: Option<TrainedProbe>,
    cv: Option<CSearch>,
}

impl SAwMil {
    fn params(&self) -> SawMilParams {
        SawMilParams {
            c: (!self.search).then_some(self.c),
            c_grid: self.c_grid.clone(),
            cv_folds: self.cv_folds,
            cv_bag_limit: self.cv_bag_limit,
            train_bag_limit: self.train_bag_limit,
            max_bag_size: self.max_bag_size,
            seed: self.seed,
            ..SawMilParams::default()
        }
    }

    fn fitted(&self) -> PyResult<&TrainedProbe> {
        self.probe.as_ref().ok_or_else(|| not_fitted("SAwMIL"))
    }
}

#[pymethods]
impl SAwMil {
    #[new]
    #[pyo3(signature = (C = 1.0, search = true, C_grid = None, cv_folds = None, cv_bag_limit = None, train_bag_limit = None, max_bag_size = None, seed = None))]
    #[allow(non_snake_case, clippy::too_many_arguments)]
    fn new(
        C: f64,
        search: bool,
        C_grid: Option<Vec<f64>>,
        cv_folds: Option<usize>,
        cv_bag_limit: Option<usize>,
        train_bag_limit: Option<usize>,
        max_bag_size: Option<usize>,
        seed: Option<u64>,
    ) -> Self {
        let d = SawMilParams::default();
        SAwMil {
            c: C,
            search,
            c_grid: C_grid.unwrap_or(d.c_grid),
            cv_folds: cv_folds.unwrap_or(d.cv_folds),
            cv_bag_limit: cv_bag_limit.unwrap_or(d.cv_bag_limit),
            train_bag_limit: train_bag_limit.unwrap_or(d.train_bag_limit),
            max_bag_size: max_bag_size.unwrap_or(d.max_bag_size),
            seed: seed.unwrap_or(d.seed),
            probe: None,
            cv: None,
        }
    }

    /// Fit on bags: X [instances, features], bag_offsets [bags + 1], y [bags] (±1 or 0/1),
    /// intra [instances] known-positive mask (default: the last 2 instances of each bag).
    #[pyo3(signature = (X, bag_offsets, y, intra = None))]
    #[allow(non_snake_case)]
    fn fit<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        intra: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let set = training_set(X, bag_offsets, y, intra)?;
        let params = slf.params();
        let report = py.detach(|| params.fit_report(&set)).map_err(value_error)?;
        slf.probe = Some(report.probe);
        slf.cv = report.search;
        Ok(slf)
    }

    /// Bag scores [bags] (float32): the maximum over a bag's instances of x·coef_ + intercept_.
    #[pyo3(signature = (X, bag_offsets))]
    #[allow(non_snake_case)]
    fn decision_function<'py>(
        &self,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let s = scores(py, self.fitted()?, X, bag_offsets)?;
        Ok(PyArray1::from_vec(py, s))
    }

    /// Bag labels [bags]: 1 where the score is > 0, else -1.
    #[pyo3(signature = (X, bag_offsets))]
    #[allow(non_snake_case)]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let s = scores(py, self.fitted()?, X, bag_offsets)?;
        Ok(PyArray1::from_vec(py, labels_of(&s)))
    }

    /// Weights [features] in the input space (x·coef_ + intercept_ is an instance's score).
    #[getter]
    fn coef_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, input_space(self.fitted()?).0))
    }

    #[getter]
    fn intercept_(&self) -> PyResult<f64> {
        Ok(input_space(self.fitted()?).1)
    }

    /// The C of the final fit (chosen by the search, or the fixed C).
    #[getter(C_)]
    fn chosen_c(&self) -> PyResult<f64> {
        Ok(self.fitted()?.c.expect("sAwMIL probes carry C"))
    }

    /// Fraction of known-positive instances after capping (the stage-1 selection share).
    #[getter]
    fn eta_(&self) -> PyResult<f64> {
        Ok(self.fitted()?.eta.expect("sAwMIL probes carry eta"))
    }

    /// Unit direction in standardized space, as stored in a probe file (`w`).
    #[getter]
    fn direction_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.direction.clone()))
    }

    /// Bias in standardized space, as stored in a probe file (`b`).
    #[getter]
    fn bias_(&self) -> PyResult<f64> {
        Ok(self.fitted()?.bias)
    }

    #[getter]
    fn scaler_mean_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.scaler.mean.clone()))
    }

    #[getter]
    fn scaler_scale_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.scaler.scale.clone()))
    }

    /// The C search: {"C": [...], "mean_average_precision": [...], "se": [...]}, or None when
    /// C was fixed.
    #[getter]
    fn cv_results_<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.fitted()?;
        let Some(cv) = &self.cv else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("C", cv.scores.iter().map(|s| s.c).collect::<Vec<_>>())?;
        d.set_item(
            "mean_average_precision",
            cv.scores.iter().map(|s| s.mean).collect::<Vec<_>>(),
        )?;
        d.set_item("se", cv.scores.iter().map(|s| s.se).collect::<Vec<_>>())?;
        Ok(Some(d))
    }

    /// Write the probe as safetensors, the file `pstat sawmil fit --out` writes.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.fitted()?.save(&path).map_err(value_error)
    }

    /// A fitted SAwMIL from a probe file (`pstat sawmil fit --out`, or `save`).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let probe = load_probe(path, Probe::Sawmil)?;
        let mut model = SAwMil::new(
            probe.c.unwrap_or(1.0),
            false,
            None,
            None,
            None,
            None,
            None,
            None,
        );
        model.probe = Some(probe);
        Ok(model)
    }

    fn __repr__(&self) -> String {
        if self.search {
            format!("SAwMIL(search=True, C_grid={:?})", self.c_grid)
        } else {
            format!("SAwMIL(C={}, search=False)", self.c)
        }
    }
}

/// The Mass-Mean probe: the difference of class means of standardized last-token
/// activations, optionally scaled by a pooled shrunk inverse covariance; a bag's score is its
/// last instance's score.
#[pyclass(module = "pstat", name = "MassMean")]
struct MassMean {
    /// Scale the mean difference by the pooled OAS-shrunk inverse covariance.
    #[pyo3(get, set)]
    covariance: bool,
    probe: Option<TrainedProbe>,
}

impl MassMean {
    fn fitted(&self) -> PyResult<&TrainedProbe> {
        self.probe.as_ref().ok_or_else(|| not_fitted("MassMean"))
    }
}

#[pymethods]
impl MassMean {
    #[new]
    #[pyo3(signature = (covariance = true))]
    fn new(covariance: bool) -> Self {
        MassMean {
            covariance,
            probe: None,
        }
    }

    /// Fit on bags: X [instances, features], bag_offsets [bags + 1], y [bags] (±1 or 0/1);
    /// only each bag's last instance is used.
    #[pyo3(signature = (X, bag_offsets, y))]
    #[allow(non_snake_case)]
    fn fit<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let set = training_set(X, bag_offsets, y, None)?;
        let params = MassMeanParams {
            with_covariance: slf.covariance,
        };
        let probe = py.detach(|| params.fit(&set)).map_err(value_error)?;
        slf.probe = Some(probe);
        Ok(slf)
    }

    /// Bag scores [bags] (float32): the last instance's x·coef_ + intercept_.
    #[pyo3(signature = (X, bag_offsets))]
    #[allow(non_snake_case)]
    fn decision_function<'py>(
        &self,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let s = scores(py, self.fitted()?, X, bag_offsets)?;
        Ok(PyArray1::from_vec(py, s))
    }

    /// Bag labels [bags]: 1 where the score is > 0, else -1.
    #[pyo3(signature = (X, bag_offsets))]
    #[allow(non_snake_case)]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        X: &Bound<'py, PyAny>,
        bag_offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let s = scores(py, self.fitted()?, X, bag_offsets)?;
        Ok(PyArray1::from_vec(py, labels_of(&s)))
    }

    #[getter]
    fn coef_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, input_space(self.fitted()?).0))
    }

    #[getter]
    fn intercept_(&self) -> PyResult<f64> {
        Ok(input_space(self.fitted()?).1)
    }

    #[getter]
    fn direction_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.direction.clone()))
    }

    #[getter]
    fn bias_(&self) -> PyResult<f64> {
        Ok(self.fitted()?.bias)
    }

    #[getter]
    fn scaler_mean_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.scaler.mean.clone()))
    }

    #[getter]
    fn scaler_scale_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.fitted()?.scaler.scale.clone()))
    }

    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.fitted()?.save(&path).map_err(value_error)
    }

    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let probe = load_probe(path, Probe::MassMean)?;
        Ok(MassMean {
            covariance: true,
            probe: Some(probe),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "MassMean(covariance={})",
            if self.covariance { "True" } else { "False" }
        )
    }
}

fn booleans(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
    let raw = integers(name, v)?;
    if let Some(i) = raw.iter().position(|&v| v != 0 && v != 1) {
        return Err(value_error(format!(
            "{name}[{i}] = {}, expected a boolean",
            raw[i]
        )));
    }
    Ok(raw.into_iter().map(|v| v == 1).collect())
}

/// Retractions and expansions between a baseline and a perturbed belief set over the same
/// held-out True statements (P-StaT §3.3), with percentile bootstrap intervals.
#[pyfunction]
#[pyo3(signature = (baseline_true, perturbed_true, resamples = 1000, seed = 42))]
fn stability<'py>(
    py: Python<'py>,
    baseline_true: &Bound<'py, PyAny>,
    perturbed_true: &Bound<'py, PyAny>,
    resamples: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let baseline = booleans("baseline_true", baseline_true)?;
    let perturbed = booleans("perturbed_true", perturbed_true)?;
    if baseline.len() != perturbed.len() {
        return Err(value_error(format!(
            "baseline_true has {} statements but perturbed_true has {}",
            baseline.len(),
            perturbed.len()
        )));
    }
    if baseline.is_empty() {
        return Err(value_error("no held-out True statements to evaluate"));
    }
    let comparison = BeliefComparison {
        held_out: (0..baseline.len()).map(|i| i.to_string()).collect(),
        baseline,
        perturbed,
    };
    let row = py.detach(|| {
        stability_row(
            RowKey::default(),
            &comparison,
            Bootstrap { resamples, seed },
        )
    });
    let d = PyDict::new(py);
    d.set_item("n_baseline_true", row.n_baseline_true)?;
    d.set_item("n_baseline_not_true", row.n_baseline_not_true)?;
    d.set_item("retractions", row.retractions)?;
    d.set_item("expansions", row.expansions)?;
    d.set_item("retraction_rate", row.retraction_rate)?;
    d.set_item("retraction_rate_lo", row.retraction_rate_lo)?;
    d.set_item("retraction_rate_hi", row.retraction_rate_hi)?;
    d.set_item("expansion_rate", row.expansion_rate)?;
    d.set_item("expansion_rate_lo", row.expansion_rate_lo)?;
    d.set_item("expansion_rate_hi", row.expansion_rate_hi)?;
    d.set_item("flag", row.flag)?;
    Ok(d)
}

#[pymodule]
fn _pstat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SAwMil>()?;
    m.add_class::<MassMean>()?;
    m.add_function(wrap_pyfunction!(stability, m)?)?;
    Ok(())
}
