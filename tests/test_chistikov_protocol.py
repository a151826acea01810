"""chistikov2023-fig1-paper-protocol: the config is the paper's protocol, its runs are batched across lambdas and
trials, the new exclusion rule of TeacherNeuron (max_data_angle), and the protocol sensitivity table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.experiments import get
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.experiments.fig1 import LAMBDAS, WEIGHTED
from implicitbias.papers.chistikov2023.experiments.protocol import (
    BASELINE,
    CHOICES,
    PAPER_STEPS,
    READING_METRICS,
    medians,
    sensitivity_rows,
)
from implicitbias.runs.spec import group_runs

NAME = "chistikov2023-fig1-paper-protocol"


def _part(runs, name):
    return [r for r in runs if r.part == name]


# -- the config is the paper's protocol -----------------------------------------------------------------------
def test_the_paper_part_trains_as_the_text_says():
    exp = get(NAME)
    runs = exp.runs(exp.resolve())
    paper = _part(runs, "paper")
    assert {r.method.kind for r in paper} == {"gd"} and {r.method.lr for r in paper} == {0.01}
    assert {(r.stop.loss_tol, r.stop.max_steps, r.stop.max_time) for r in paper} == {(1e-9, 20_000_000, None)}
    assert PAPER_STEPS == 20_000_000
    assert {r.model.width for r in paper} == {200}
    assert {r.model.init_scheme for r in paper} == {"balanced"} and {r.model.train_outer for r in paper} == {True}
    assert {r.trial for r in paper} == set(range(5))
    assert {r.data.d for r in paper} == {4, 16} and {r.data.scheme for r in paper} == {"centred", "uncentred"}
    assert sorted({r.init_scale for r in paper}, reverse=True) == LAMBDAS and len(LAMBDAS) == 16
    assert LAMBDAS[0] == 16.0 and LAMBDAS[-1] == 4.0**-13
    assert {r.data.max_data_angle for r in paper} == {math.pi / 2} and not any(r.data.include_x0 for r in paper)
    assert len(paper) == 2 * 2 * 16 * 5


def test_the_flow_part_has_the_same_members_as_the_paper_part():
    exp = get(NAME)
    runs = exp.runs(exp.resolve())
    member = lambda r: (r.data.scheme, r.data.d, r.init_scale, r.trial, r.seed, r.data_seed)  # noqa: E731
    paper, flow = _part(runs, "paper"), _part(runs, "flow")
    assert sorted(map(member, flow)) == sorted(map(member, paper))
    assert {r.method.kind for r in flow} == {"gf"}
    fig1 = get("chistikov2023-fig1").resolve()
    assert {(r.method, r.stop) for r in flow} == {(fig1.method, fig1.stop)}
    # every changed choice differs from the paper part in that choice only
    by = {member(r): r for r in paper}
    for name, field in (("converged", "stop"), ("pi4", "data"), ("x0", "data")):
        for r in _part(runs, name):
            base = by[member(r)]
            assert getattr(r, field) != getattr(base, field)
            other = "data" if field == "stop" else "stop"
            assert getattr(r, other) == getattr(base, other) and r.method == base.method and r.model == base.model


def test_lambdas_and_trials_are_batched_in_one_call():
    exp = get(NAME)
    groups = [g for g in group_runs(exp.runs(exp.resolve())) if g[0].part == "paper"]
    assert max(len(g) for g in groups) == 16 and sum(len(g) for g in groups) == 320
    for g in groups:
        assert len({r.static_key() for r in g}) == 1
        assert len({r.trial for r in g}) == 5 and len({r.data_key() for r in g}) == 5  # different data per trial
        assert len({r.init_scale for r in g}) > 1


def test_the_quick_variant_is_small():
    exp = get(NAME)
    runs = exp.runs(exp.resolve(quick=True))
    assert {r.data.d for r in runs} == {4} and {r.model.width for r in runs} == {50}
    assert max(r.stop.max_steps for r in runs if r.method.kind == "gd") <= 300_000
    assert len(runs) < 100


# -- TeacherNeuron.max_data_angle -------------------------------------------------------------------------------
def _angles(ds):
    v = ds.info["v_star"]
    return np.arccos(np.clip(ds.X @ v / np.linalg.norm(ds.X, axis=1), -1, 1))


@pytest.mark.parametrize("scheme", ["centred", "uncentred"])
def test_the_pi4_rule_keeps_every_angle_below_pi4(scheme):
    spec = TeacherNeuron(d=6, scheme=scheme, max_data_angle=math.pi / 4, max_redraws=100_000)
    for seed in range(8):
        assert np.max(_angles(spec.generate(seed))) < math.pi / 4
    # negative control: the default rule (pi/2) draws data with an angle beyond pi/4 for some of these seeds
    default = [np.max(_angles(TeacherNeuron(d=6, scheme=scheme).generate(s))) for s in range(8)]
    assert max(default) > math.pi / 4


def test_the_default_angle_changes_no_draw_and_no_identity():
    for seed in range(4):
        a = TeacherNeuron(d=8, scheme="uncentred").generate(seed)
        b = TeacherNeuron(d=8, scheme="uncentred", max_data_angle=math.pi / 2).generate(seed)
        np.testing.assert_array_equal(a.X, b.X)
        assert a.info["redraws"] == b.info["redraws"]
    assert "max_data_angle" not in TeacherNeuron(d=8).model_dump()
    assert TeacherNeuron(d=8, max_data_angle=math.pi / 4).model_dump()["max_data_angle"] == math.pi / 4
    # a spec written without the field reads back at the default, and one with pi/4 keeps it
    assert TeacherNeuron(**TeacherNeuron(d=8, max_data_angle=0.5).model_dump()).max_data_angle == 0.5


@pytest.mark.parametrize("bad", [2.0, 0.0, -0.1, math.pi / 2 + 1e-9, float("nan")])
def test_an_angle_out_of_range_is_refused(bad):
    with pytest.raises(ConfigError) as err:
        TeacherNeuron(d=4, max_data_angle=bad)
    assert "max_data_angle" in str(err.value) and repr(bad) in str(err.value)


def test_too_few_redraws_for_pi4_are_refused_naming_the_rule():
    # d = 16, centred: a draw meets pi/4 with probability ~2^-16, so 10 redraws are refused
    with pytest.raises(ConfigError, match="max_data_angle = 0.785398.*max_redraws = 10"):
        TeacherNeuron(d=16, max_data_angle=math.pi / 4, max_redraws=10).generate(0)


# -- the sensitivity table ----------------------------------------------------------------------------------------
def _row(part, scheme, d, lam, trial, angle, weighted, capped=False):
    return {"part": part, "scheme": scheme, "d": d, "lambda": lam, "trial": trial, "max_angle": angle,
            WEIGHTED: weighted, "final_loss": 0.0, "steps": 1, "capped": capped}


def _synthetic():
    rows = []
    for t, base in enumerate([1.0, 2.0, 3.0]):  # paper's medians: 2.0 (max angle) and 0.2 (weighted)
        for lam in (1e-2, 1e-4):
            rows.append(_row("paper", "uncentred", 4, lam, t, base, base / 10))
            rows.append(_row("flow", "uncentred", 4, lam, t, base * 4, 0.0))
            rows.append(_row("converged", "uncentred", 4, lam, t, base / 2, 0.0, capped=t == 0))
            rows.append(_row("pi4", "uncentred", 4, lam, t, base * 3, 0.0))
            rows.append(_row("x0", "uncentred", 4, lam, t, base / 8, 0.0))
        rows.append(_row("paper", "centred", 16, 1e-2, t, base, base))
        rows.append(_row("flow", "centred", 16, 1e-2, t, 0.0, 0.0))
    return rows


def test_the_sensitivity_table_has_a_baseline_and_one_row_per_changed_choice():
    table = sensitivity_rows(_synthetic())
    at = {(r["scheme"], r["d"], r["lambda"], r["choice"]): r for r in table}
    # uncentred d = 4: baseline + 5 choices + 6 readings of 'active' per lambda; centred d = 16: 3 + 6 rows
    assert len(table) == 2 * 12 + 9
    base = at[("uncentred", 4, 1e-2, "baseline")]
    assert base["is_paper"] and base["median_max_angle"] == 2.0 and base["ratio_to_baseline"] == 1.0
    expected = {"training method": 4.0, "stopping rule": 0.5, "active neuron": 0.1, "exclusion rule": 3.0,
                "x_0 in the training set": 1 / 8}
    for choice, ratio in expected.items():
        row = at[("uncentred", 4, 1e-2, choice)]
        assert not row["is_paper"]
        assert row["ratio_to_baseline"] == pytest.approx(ratio)
    assert at[("uncentred", 4, 1e-4, "stopping rule")]["capped"] == 1
    assert "ambiguous" in at[("uncentred", 4, 1e-2, "x_0 in the training set")]["paper_choice"]
    # where a part did not run (d = 16 has no changed choices) no row is made up
    assert {r["choice"] for r in table if r["d"] == 16} == {"baseline", "training method", "active neuron"} | {
        f"active neuron: {m[len('reading.'):]}" for m in READING_METRICS}
    assert at[("centred", 16, 1e-2, "training method")]["ratio_to_baseline"] == 0.0


def test_where_only_the_flow_ran_the_flow_is_the_baseline_of_the_readings_rows():
    rows = _synthetic()
    for t, (literal, share) in enumerate([(1.6, 1e-3), (1.7, 2e-3), (1.8, 4e-3)]):  # d = 1024: flow only
        rows.append({**_row("flow", "centred", 1024, 1e-2, t, literal, literal), "reading.share": share,
                     "reading.paper": share / 2})
    table = [r for r in sensitivity_rows(rows) if r["d"] == 1024]
    at = {r["choice"]: r for r in table}
    assert set(at) == {"baseline (flow)", "active neuron"} | {f"active neuron: {m[len('reading.'):]}"
                                                               for m in READING_METRICS}
    assert at["baseline (flow)"]["median_max_angle"] == 1.7 and not at["baseline (flow)"]["is_paper"]
    assert at["active neuron: share"]["ratio_to_baseline"] == pytest.approx(2e-3 / 1.7)
    assert at["active neuron: paper"]["median_max_angle"] == pytest.approx(1e-3)
    # a reading no run stored is nan, never a number made up
    assert math.isnan(at["active neuron: grown"]["median_max_angle"])
    # negative control: where GD ran, the flow is a changed choice, not the baseline
    assert "baseline (flow)" not in {r["choice"] for r in sensitivity_rows(_synthetic())}


def test_parts_can_be_selected_by_name_and_a_wrong_name_is_refused():
    config = get(NAME).resolve(overrides={"parts": ["flow_large"]})
    assert list(config.parts) == ["flow_large"]
    runs = get(NAME).runs(config)
    assert {r.part for r in runs} == {"flow_large"} and {r.data.d for r in runs} == {1024}
    assert {r.method.kind for r in runs} == {"gf"}
    with pytest.raises(ConfigError, match=r"parts = \['flowlarge'\] is not allowed: .*'flow_large'"):
        get(NAME).resolve(overrides={"parts": ["flowlarge"]})


def test_the_large_d_part_is_the_fig1_column_under_another_label():
    # --reuse copies chistikov2023-fig1's d = 1024 runs: they must be the same computations (not only similar)
    ours = get(NAME).runs(get(NAME).resolve(overrides={"parts": ["flow_large"]}))
    fig1 = [r for r in get("chistikov2023-fig1").runs(get("chistikov2023-fig1").resolve()) if r.data.d == 1024]
    assert len(ours) == len(fig1) == 160
    assert {r.compute_key() for r in ours} == {r.compute_key() for r in fig1}
    assert not {r.key() for r in ours} & {r.key() for r in fig1}  # their identities differ by the label only


def test_the_table_names_every_paper_choice():
    assert BASELINE[0] == "baseline" and "(the text)" in " ".join(c[2] for c in CHOICES)
    for choice, _setting, paper_choice, _source, _metric in CHOICES:
        assert paper_choice, choice
    assert [c[0] for c in CHOICES] == ["training method", "stopping rule", "active neuron",
                                       *(f"active neuron: {m[len('reading.'):]}" for m in READING_METRICS),
                                       "exclusion rule", "x_0 in the training set"]


def test_the_ratio_is_nan_where_the_baseline_is_zero():
    rows = [_row("paper", "centred", 4, 1.0, 0, 0.0, 0.0), _row("flow", "centred", 4, 1.0, 0, 0.3, 0.0)]
    table = {r["choice"]: r for r in sensitivity_rows(rows)}
    assert math.isnan(table["training method"]["ratio_to_baseline"])
    assert math.isnan(table["baseline"]["ratio_to_baseline"])


def test_medians_are_over_trials():
    med = medians(_synthetic())
    assert med[("paper", "uncentred", 4, 1e-2)]["max_angle"] == 2.0
    assert med[("paper", "uncentred", 4, 1e-2)]["trials"] == 3
    # negative control: a table built on the wrong metric gives another number
    assert med[("paper", "uncentred", 4, 1e-2)][WEIGHTED] != 2.0


def _gd_flow_rows(shift: float) -> list[dict]:
    """GD and flow rows of one cell per lambda; the flow's angle ~ lambda read at lambda x shift."""
    rows = []
    for lam in (4.0**-4, 4.0**-8):
        for trial in range(3):
            angle = 0.3 * lam * (1 + 0.01 * trial)
            rows.append({"part": "paper", "scheme": "centred", "d": 4, "lambda": lam, "trial": trial,
                         "max_angle": angle, WEIGHTED: angle, "capped": False})
            rows.append({"part": "flow", "scheme": "centred", "d": 4, "lambda": lam, "trial": trial,
                         "max_angle": angle * shift * 1.02, WEIGHTED: angle, "capped": False})
    return rows


def test_the_gd_flow_claim_holds_for_a_tracking_gd_and_fails_for_a_shifted_grid():
    from implicitbias.papers.chistikov2023.experiments.protocol import ProtocolClaims, gd_flow_gap

    bound = ProtocolClaims().gap
    gap, _ = gd_flow_gap(_gd_flow_rows(1.0))
    assert gap == pytest.approx(math.log(1.02)) and gap <= bound
    gap, where = gd_flow_gap(_gd_flow_rows(4.0))  # negative control: angles read one lambda step off
    assert gap > bound and "lambda" in where
    assert math.isnan(gd_flow_gap([r for r in _gd_flow_rows(1.0) if r["part"] == "paper"])[0])
