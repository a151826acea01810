"""Checks on the inputs of `train` that run before anything is compiled."""

from __future__ import annotations

from implicitbias._spec import ConfigError
from implicitbias.training.methods import SGD


def validate_inputs(model, datasets, loss, method, stop) -> None:
    for k, ds in enumerate(datasets):
        where = "data" if len(datasets) == 1 else f"data[{k}]"
        try:
            ds.validate()
        except ConfigError as exc:
            raise ConfigError(str(exc) if len(datasets) == 1 else f"{where}: {exc}") from None
        task = "classification" if loss.is_classification else "regression"
        if ds.task != task:
            raise ConfigError(
                f"loss.name = {loss.name!r} is not allowed for {where} with task {ds.task!r}: expected a "
                f"{ds.task} loss ({'logistic or exponential' if ds.task == 'classification' else 'square'})"
            )
        if ds.X.shape != datasets[0].X.shape:
            raise ConfigError(f"{where}.X has shape {ds.X.shape}, expected {datasets[0].X.shape} like data[0]")
    n = datasets[0].X.shape[0]
    if isinstance(method, SGD) and method.batch_size > n:
        raise ConfigError(f"method.batch_size = {method.batch_size} is not allowed: expected at most n = {n}")
