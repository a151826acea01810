"""Controls for every prediction of every theorem (issue 24: a structure that stops weak checks coming back).

A `Control` names one prediction of one theorem (by a fragment of its statement) and gives the cell on which it
must fail (the negative control) and, where the theorem table's nominal instance is not one, a cell on which it
must hold (the positive control). On both, every assumption of the theorem holds, so the outcome is the
prediction's own: a negative control that came out "outside scope" would prove nothing.

The controls live in `tests/_controls_*.py` modules, one per family of theorems, each with a module-level list
`CONTROLS`; `tests/test_prediction_controls.py` collects them, requires one for every prediction that a theorem
reports on its nominal instance of tests/test_theorem_table.py::TABLE, and runs them all. A prediction without
controls fails the suite.
"""

from __future__ import annotations

import dataclasses
import importlib
import pathlib
from collections.abc import Callable

from implicitbias.theorems.base import RunContext, Theorem


@dataclasses.dataclass(frozen=True)
class Control:
    """The controls of one prediction.

    theorem: the Theorem subclass's name (a row of the theorem table).
    prediction: a fragment of the prediction's statement, found in exactly one of the theorem's predictions.
    negative: builds the cell on which the prediction must be reported "fails" (every assumption holding).
    positive: builds a cell on which it must be reported "holds"; None: the table's nominal instance.
    theorem_factory: builds the theorem object (with the constants the experiment sets); None: the table's.
    old_threshold: for a control added by issue 24, the old check and why it passed this negative control
        (e.g. "slope < 0 accepted a rate of t^-0.5"); empty for controls of checks that were already strict.
    """

    theorem: str
    prediction: str
    negative: Callable[[], RunContext]
    positive: Callable[[], RunContext] | None = None
    theorem_factory: Callable[[], Theorem] | None = None
    old_threshold: str = ""

    @property
    def id(self) -> str:
        return f"{self.theorem}: {self.prediction}"


def collect() -> list[Control]:
    """Every control of every `tests/_controls_*.py` module."""
    out: list[Control] = []
    for path in sorted(pathlib.Path(__file__).parent.glob("_controls_*.py")):
        out.extend(importlib.import_module(path.stem).CONTROLS)
    return out
