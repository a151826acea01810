"""Every prediction of every theorem has a negative and a positive control, and both come out as they must.

The predictions are those each theorem reports on its nominal instance of the theorem table
(tests/test_theorem_table.py::TABLE); the controls are collected from tests/_controls_*.py (see
tests/_controls.py). A prediction without a control, or a control that names no prediction, fails here, so a new
prediction cannot land without the run that would show it failing.
"""

from __future__ import annotations

import pytest

from _controls import Control, collect
from test_theorem_table import TABLE, _theorem

CONTROLS = collect()


def _theorem_of(control: Control):
    return control.theorem_factory() if control.theorem_factory is not None else _theorem(control.theorem)


def _prediction(verdicts, control: Control):
    found = [v for v in verdicts if v.kind == "prediction" and control.prediction in v.statement]
    assert len(found) == 1, (f"{control.id}: the fragment must name exactly one prediction; found "
                             f"{[v.statement for v in found] or 'none among ' + str([v.statement for v in verdicts])}")
    return found[0]


def _assumptions_hold(verdicts, control: Control, which: str):
    bad = [v.line() for v in verdicts if v.kind == "assumption" and v.outcome != "holds"]
    assert not bad, f"{control.id}: the {which} control must meet every assumption: {bad}"


def _statements(name: str) -> list[str]:
    row = TABLE[name]
    return [v.statement for v in _theorem(name).check(row.nominal()) if v.kind == "prediction"]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_prediction_has_exactly_one_control(name):
    statements = _statements(name)
    mine = [c for c in CONTROLS if c.theorem == name]
    missing = [s for s in statements if not any(c.prediction in s for c in mine)]
    assert not missing, f"{name}: predictions without controls (add them to a tests/_controls_*.py): {missing}"
    doubled = [s for s in statements if sum(c.prediction in s for c in mine) > 1]
    assert not doubled, f"{name}: predictions with more than one control: {doubled}"
    stale = [c.prediction for c in mine if c.positive is None and not any(c.prediction in s for s in statements)]
    assert not stale, (f"{name}: controls naming no prediction of the nominal instance (a prediction reported only "
                       f"on other cells needs its own positive control): {stale}")


def test_every_control_names_a_theorem_of_the_table():
    assert not [c.id for c in CONTROLS if c.theorem not in TABLE]


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.id)
def test_negative_control_fails(control: Control):
    verdicts = _theorem_of(control).check(control.negative())
    _assumptions_hold(verdicts, control, "negative")
    v = _prediction(verdicts, control)
    assert v.outcome == "fails", f"{control.id}: the negative control must fail: {v.line()}"


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.id)
def test_positive_control_holds(control: Control):
    ctx = control.positive() if control.positive is not None else TABLE[control.theorem].nominal()
    verdicts = _theorem_of(control).check(ctx)
    _assumptions_hold(verdicts, control, "positive")
    v = _prediction(verdicts, control)
    assert v.outcome == "holds", f"{control.id}: the positive control must hold: {v.line()}"
