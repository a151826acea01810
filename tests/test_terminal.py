"""The terminal summary a run prints: a screenful by default, every row with --verbose, colour only on request."""

import re

from implicitbias.reports import summarize

THEOREMS = ("Frei et al. 2023, Thm 3.2", "Kou et al. 2023, Thm 1 (rank of W under gradient descent, leaky ReLU)",
            "Chistikov et al. 2023, Thm 2", "Lyu and Li 2020, Thm 4.4")
CELLS = ("n=20", "n=40")
FAILED = {("Kou et al. 2023, Thm 1 (rank of W under gradient descent, leaky ReLU)", "n=40", 1),
          ("Chistikov et al. 2023, Thm 2", "n=20", 3), ("Lyu and Li 2020, Thm 4.4", "n=40", 0)}
ANSI = re.compile(r"\x1b\[")


def check(theorem, cell, kind, k, outcome):
    statement = f"{kind} {k} of {theorem.split(',')[0]} in {cell}: a statement long enough to be cut at eighty columns"
    return {"cell": cell, "theorem": theorem, "kind": kind, "statement": statement, "measured": 1.0, "relation": "<=",
            "bound": 2.0, "outcome": outcome, "note": "", "line": f"[{kind}] {statement}: {outcome}"}


def forty_checks() -> list[dict]:
    """4 theorems x 2 cells x (1 assumption + 4 predictions); the Frei cell n=40 misses its assumption."""
    rows = []
    for theorem in THEOREMS:
        for cell in CELLS:
            out_of_scope = theorem.startswith("Frei") and cell == "n=40"
            rows.append(check(theorem, cell, "assumption", 0, "fails" if out_of_scope else "holds"))
            for k in range(4):
                outcome = ("outside_scope" if out_of_scope else "fails" if (theorem, cell, k) in FAILED
                           else "not_evaluated" if k == 2 and cell == "n=20" else "holds")
                rows.append(check(theorem, cell, "prediction", k, outcome))
    return rows


def test_default_summary_is_a_screenful_naming_each_failed_prediction():
    checks = forty_checks()
    assert len(checks) == 40
    paths = {"report": "runs/x/report.html", "results": "runs/x/results.nc"}
    text = summarize(checks, paths=paths)
    lines = text.splitlines()
    assert len(lines) <= 20 and all(len(line) <= 80 for line in lines)
    assert all(line.strip() for line in lines)
    assert not ANSI.search(text)
    for theorem, cell, k in FAILED:
        statement = check(theorem, cell, "prediction", k, "fails")["statement"]
        assert any(line.lstrip().startswith("fails") and statement[:40] in line and f"[{cell}]" in line
                   for line in lines), (statement, text)
    frei = next(line for line in lines if line.strip().startswith("Frei"))
    assert frei.endswith("(2 cells): 3 holds · 4 outside scope · 1 not evaluated")
    assert "outside scope (an assumption is not met)" in text
    kou = next(line for line in lines if line.strip().startswith("Kou"))
    assert kou.endswith("6 holds · 1 fails · 1 not evaluated") and "…" in kou  # the name gives way, not the counts
    assert lines[-2:] == ["report:  runs/x/report.html", "results: runs/x/results.nc"]
    long_path = "runs/" + "deep/" * 30 + "report.html"
    assert summarize(checks, paths={"report": long_path}).endswith(long_path)  # a path is never cut


def test_long_failure_lists_are_capped():
    checks = [check(THEOREMS[0], f"n={n}", "prediction", 0, "fails") for n in range(30)]
    lines = summarize(checks, width=100).splitlines()
    assert len(lines) <= 20 and sum(line.lstrip().startswith("fails") for line in lines) == 8
    assert lines[-1] == "  ... and 22 more; --verbose lists every row"
    assert "30 fails" in lines[1] and "(30 cells)" in lines[1]


def test_verbose_lists_every_row_and_colour_is_opt_in():
    checks = forty_checks()
    text = summarize(checks, verbose=True)
    for c in checks:
        assert f"{c['theorem']} [{c['cell']}] {c['line']}" in text
    assert text.index("Assumptions:") < text.index("Predictions:") < text.index("predictions per theorem:")
    assert not ANSI.search(text)
    coloured = summarize(checks, color=True)
    assert ANSI.search(coloured)
    assert ANSI.sub("", re.sub(r"\x1b\[[0-9;]*m", "", coloured)) == summarize(checks)


def test_a_failed_assumption_is_named_when_no_prediction_shows_it():
    checks = [check(THEOREMS[0], "n=20", "assumption", 0, "fails"), check(THEOREMS[0], "n=20", "prediction", 0, "holds")]
    assert f"  {THEOREMS[0]}: 1 holds; 1 assumption fails" in summarize(checks).splitlines()


def test_no_checks_and_all_holding():
    assert summarize([]) == "no theorem checks"
    holding = [check(THEOREMS[0], "n=20", "prediction", k, "holds") for k in range(3)]
    assert summarize(holding).splitlines() == ["predictions per theorem:", f"  {THEOREMS[0]}: 3 holds",
                                               "no prediction fails or falls outside scope"]
