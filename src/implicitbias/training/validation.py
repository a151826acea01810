"""Checks on the inputs of `train` that run before anything is compiled."""

from __future__ import annotations

from implicitbias._spec import ConfigError

LOSSES_OF_TASK = {"classification": "logistic or exponential", "regression": "square", "multiclass": "cross_entropy"}


def validate_inputs(model, datasets, loss, method, stop) -> None:
    """Raise ConfigError, naming the field, for data sets that are invalid, of another task than the loss, of
    different shapes, or that the method refuses (`Method.check_model`, `Method.check_data`)."""
    for k, ds in enumerate(datasets):
        where = "data" if len(datasets) == 1 else f"data[{k}]"
        try:
            ds.validate()
        except ConfigError as exc:
            raise ConfigError(str(exc) if len(datasets) == 1 else f"{where}: {exc}") from None
        task = loss.task
        if ds.task != task:
            raise ConfigError(
                f"loss.name = {loss.name!r} is not allowed for {where} with task {ds.task!r}: expected a "
                f"{ds.task} loss ({LOSSES_OF_TASK[ds.task]})"
            )
        if ds.X.shape != datasets[0].X.shape:
            raise ConfigError(f"{where}.X has shape {ds.X.shape}, expected {datasets[0].X.shape} like data[0]")
    method.check_model(model, loss)
    method.check_data(datasets[0].X.shape[0])
