"""Run checks that experiments pass as their `validate_runs`: each refuses, before anything trains, runs whose
setting the experiment's theorems cannot speak about, with a `ConfigError` that names the field, the value and what
is allowed.

- `check_positive_alpha`: diagonal networks from u = v = alpha 1 need alpha > 0;
- `check_separable_runs`: the max-margin theorems need data separable through the origin;
- `check_factorization_run(s)`: a matrix factorisation needs alpha > 0 and the size of the observed matrix.
"""

from __future__ import annotations

from implicitbias._spec import ConfigError
from implicitbias.data import MatrixCompletion, MatrixSensing, RazinCohen
from implicitbias.models import MatrixFactorization, MulticlassLinear
from implicitbias.reference import NonSeparableDataError, check_separable, multiclass_svm
from implicitbias.runs.execute import dataset_of

__all__ = ["check_factorization_run", "check_factorization_runs", "check_positive_alpha", "check_separable_runs"]


def check_positive_alpha(runs) -> None:
    """Refuse alpha <= 0 before anything trains (diagonal networks from u = v = alpha 1: alpha = 0 is a saddle where
    gradient flow never moves, alpha < 0 flips the parametrisation): the `validate_runs` of the S6 experiments."""
    for spec in runs:
        if not spec.init_scale > 0:
            raise ConfigError(f"init_scale = {spec.init_scale!r} is not allowed: expected alpha > 0 (init u = v = "
                              "alpha 1; at alpha = 0 the flow sits on a saddle and never moves)")


def check_separable_runs(runs) -> None:
    """Refuse, before anything trains, data that are not linearly separable through the origin (the theorems
    compare with a max-margin predictor, which then does not exist), naming the points that cannot be separated:
    the `validate_runs` of the max-margin experiments."""
    seen = set()
    for spec in runs:
        if spec.data_key() in seen:
            continue
        seen.add(spec.data_key())
        data = dataset_of(spec)
        try:
            if data.task == "multiclass":
                model = spec.model
                classes = model.classes if isinstance(model, MulticlassLinear) else data.y.max() + 1
                multiclass_svm(data.X, data.y.astype(int), int(classes))
            else:
                check_separable(data.X, data.y)
        except NonSeparableDataError as exc:
            raise ConfigError(f"data = {spec.data.model_dump()} (data seed {spec.data_seed}) is not allowed: "
                              f"{exc}") from None


def check_factorization_run(spec) -> None:
    """Refuse a matrix-factorisation run that cannot mean what it says: alpha <= 0 (W = 0 is a saddle point of
    every factorisation of depth >= 2, gradient flow never leaves it) or a factorisation of another size than
    the observed matrix."""
    model, data = spec.model, spec.data
    if not isinstance(model, MatrixFactorization):
        return
    if not spec.init_scale > 0:
        raise ConfigError(f"init_scale = {spec.init_scale!r} is not allowed: expected alpha > 0 (W = 0 is a saddle "
                          "point of the factorisation; gradient flow never leaves it)")
    d = 2 if isinstance(data, RazinCohen) else data.d if isinstance(data, MatrixSensing | MatrixCompletion) else None
    if d is not None and model.dim != d:
        raise ConfigError(f"model.dim = {model.dim} is not allowed: expected data.d = {d} (the factorisation must "
                          "be as large as the observed matrix)")


def check_factorization_runs(runs) -> None:
    """`check_factorization_run` on every run (an S8 experiment's `validate_runs`)."""
    for spec in runs:
        check_factorization_run(spec)
