"""Type stubs of the compiled module ``pstat._pstat`` (crates/pstat-py)."""

from os import PathLike
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

_Rows = npt.NDArray[Union[np.float32, np.float16, np.float64]]
_Ints = npt.ArrayLike
_Path = Union[str, PathLike]

class SAwMIL:
    """sAwMIL: sparse-aware multiple-instance SVM; a bag is a statement, its instances the
    statement's token activations, a bag's score the maximum instance score.

    ``search=True`` chooses C from ``C_grid`` by ``cv_folds``-fold cross-validation on average
    precision (one-standard-error rule); ``search=False`` fits with ``C``. Bags longer than
    ``max_bag_size`` are capped (known positives kept); the final fit uses the first
    ``train_bag_limit`` bags, each CV fit the first ``cv_bag_limit`` of its fold.
    """

    C: float
    search: bool
    C_grid: List[float]
    cv_folds: int
    cv_bag_limit: int
    train_bag_limit: int
    max_bag_size: int
    seed: int

    def __init__(
        self,
        C: float = 1.0,
        search: bool = True,
        C_grid: Optional[Sequence[float]] = None,
        cv_folds: Optional[int] = None,
        cv_bag_limit: Optional[int] = None,
        train_bag_limit: Optional[int] = None,
        max_bag_size: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> None: ...
    def fit(
        self, X: _Rows, bag_offsets: _Ints, y: _Ints, intra: Optional[_Ints] = None
    ) -> "SAwMIL":
        """X [instances, features] (float32/float16 used as is, float64 cast to float32),
        bag_offsets [bags + 1] (bag i owns rows offsets[i]:offsets[i+1]), y [bags] in {-1, 1} or
        {0, 1}, intra [instances] known-positive mask (default: the last 2 rows of each bag)."""
    def decision_function(self, X: _Rows, bag_offsets: _Ints) -> npt.NDArray[np.float32]:
        """Bag scores: the maximum over a bag's rows of x @ coef_ + intercept_."""
    def predict(self, X: _Rows, bag_offsets: _Ints) -> npt.NDArray[np.int64]:
        """1 where the bag score is > 0, else -1."""
    @property
    def coef_(self) -> npt.NDArray[np.float64]:
        """Weights in the input space: x @ coef_ + intercept_ is a row's score."""
    @property
    def intercept_(self) -> float: ...
    @property
    def C_(self) -> float:
        """C of the final fit (chosen by the search, or the fixed C)."""
    @property
    def eta_(self) -> float:
        """Share of known-positive instances after capping (stage-1 selection share)."""
    @property
    def direction_(self) -> npt.NDArray[np.float64]:
        """Unit direction in standardized space (the probe file's ``w``)."""
    @property
    def bias_(self) -> float:
        """Bias in standardized space (the probe file's ``b``)."""
    @property
    def scaler_mean_(self) -> npt.NDArray[np.float64]: ...
    @property
    def scaler_scale_(self) -> npt.NDArray[np.float64]: ...
    @property
    def cv_results_(self) -> Optional[Dict[str, List[float]]]:
        """``{"C", "mean_average_precision", "se"}`` of the search; None when C was fixed."""
    def save(self, path: _Path) -> None:
        """Write the probe file that ``pstat sawmil fit --out`` writes (safetensors)."""
    @staticmethod
    def load(path: _Path) -> "SAwMIL":
        """A fitted probe from a probe file."""

class MassMean:
    """Mass-Mean: difference of the class means of standardized last-token activations,
    scaled by the pooled OAS-shrunk inverse covariance when ``covariance``; a bag's score is
    its last row's score."""

    covariance: bool

    def __init__(self, covariance: bool = True) -> None: ...
    def fit(self, X: _Rows, bag_offsets: _Ints, y: _Ints) -> "MassMean": ...
    def decision_function(self, X: _Rows, bag_offsets: _Ints) -> npt.NDArray[np.float32]: ...
    def predict(self, X: _Rows, bag_offsets: _Ints) -> npt.NDArray[np.int64]: ...
    @property
    def coef_(self) -> npt.NDArray[np.float64]: ...
    @property
    def intercept_(self) -> float: ...
    @property
    def direction_(self) -> npt.NDArray[np.float64]: ...
    @property
    def bias_(self) -> float: ...
    @property
    def scaler_mean_(self) -> npt.NDArray[np.float64]: ...
    @property
    def scaler_scale_(self) -> npt.NDArray[np.float64]: ...
    def save(self, path: _Path) -> None: ...
    @staticmethod
    def load(path: _Path) -> "MassMean": ...

def stability(
    baseline_true: _Ints,
    perturbed_true: _Ints,
    resamples: int = 1000,
    seed: int = 42,
) -> Dict[str, Union[int, float, str, None]]:
    """Retractions and expansions over the same held-out True statements: ``baseline_true[i]``
    and ``perturbed_true[i]`` say whether statement i is judged True under the baseline Θ0 and
    under the perturbation Θ. Returns the columns of stability.csv: ``n_baseline_true``,
    ``n_baseline_not_true``, ``retractions``, ``expansions``, ``retraction_rate`` (+ ``_lo``,
    ``_hi``: 95% percentile bootstrap interval), ``expansion_rate`` (+ ``_lo``, ``_hi``) and
    ``flag`` (``small_baseline`` when fewer than 20 baseline-True statements). An undefined
    rate (empty denominator) is None."""
