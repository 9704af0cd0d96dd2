"""The container every loader returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """A loaded benchmark: inputs, targets and their names.

    Attributes
    ----------
    name : str
        Registry name of the source dataset, plus the variant (e.g. ``"usps:3-vs-5:train"``).
    X : ndarray of shape (n, d)
        Inputs, float64. Missing values (only in ``airquality``) are NaN.
    y : ndarray of shape (n,)
        Targets: float64 for regression; int64 class indices ``0..K-1`` for classification.
    feature_names : tuple of str
        One name per column of ``X``.
    target_name : str
        What ``y`` measures.
    class_names : tuple of str or None
        For classification, ``class_names[k]`` names class ``y == k``; ``None`` for regression.
    extras : Mapping of str to ndarray
        Further per-row arrays (length n), e.g. one-hot labels or original codes; read-only mapping.
    outcome_extras : tuple of str
        Names of extras that belong with the outcome (a censoring indicator), written beside ``y`` in the
        data of a model.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_name: str
    class_names: tuple[str, ...] | None = None
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    outcome_extras: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))
        unknown = [name for name in self.outcome_extras if name not in self.extras]
        if unknown:
            raise ValueError(f"{self.name}: outcome_extras {unknown} are not among the extras")

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        """Number of input columns."""
        return int(self.X.shape[1])

    def class_counts(self) -> dict[str, int]:
        """Rows per class, by class name (classification datasets only)."""
        if self.class_names is None:
            raise ValueError(f"{self.name} is not a classification dataset")
        counts = np.bincount(self.y, minlength=len(self.class_names))
        return {name: int(count) for name, count in zip(self.class_names, counts)}

    def subset(self, rows, name: str | None = None) -> Dataset:
        """The dataset restricted to ``rows`` (an index array or boolean mask), extras included."""
        return replace(
            self,
            name=name or self.name,
            X=self.X[rows],
            y=self.y[rows],
            extras={key: value[rows] for key, value in self.extras.items()},
        )

    def to_frame(self):
        """A :class:`pandas.DataFrame` with the feature columns, the extras and the target last."""
        import pandas as pd

        frame = pd.DataFrame(self.X, columns=list(self.feature_names))
        for key, value in self.extras.items():
            if value.ndim == 1:
                frame[key] = value
        frame[self.target_name] = self.y
        return frame
