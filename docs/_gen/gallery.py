"""The gallery of the documentation build: each catalogued experiment's quick variant, run during the build.

Every experiment runs in its own process, exactly as a user runs it (`python -m implicitbias run NAME --quick
--out DIR --no-progress`), so a crash or a stuck solver in one cannot take the build down, and its figures
(DIR/figures/*.png), verdicts (DIR/checks.json) and log are read back from DIR.

Environment (all optional):

- IMPLICITBIAS_DOCS_GALLERY: "all" (default) runs every experiment; "fast" the two whose quick variants were
  measured fastest in runtimes.json (what CI builds); "none" runs nothing; a comma-separated list of names
  runs those.
- IMPLICITBIAS_DOCS_GALLERY_DIR: where the runs are written and kept (default: a temporary folder removed
  after the build, so that every figure is computed by the build).  With a kept folder, a second build
  resumes: finished runs are loaded, figures and checks drawn again from them.
- IMPLICITBIAS_DOCS_WORKERS: --workers of each run (default: the command's own, one worker per core).
- IMPLICITBIAS_DOCS_JOBS: experiments run at the same time (default 1).
- IMPLICITBIAS_DOCS_TIMEOUT: seconds one experiment may take (default 900).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ENV_MODE = "IMPLICITBIAS_DOCS_GALLERY"
FAST_COUNT = 2
#: the command that computes every figure, as the pages and the README give it
FULL_COMMAND = 'pip install -e ".[docs]" && mkdocs build --strict'


@dataclasses.dataclass
class Outcome:
    """What the build's quick run of one experiment left: its exit code, wall time, figures and checks."""

    name: str
    exit_code: int | None
    wall_s: float
    figures: dict[str, bytes]
    checks: list[dict]
    log_tail: str

    @property
    def ok(self) -> bool:
        # 0: done; 3: some run diverged or raised, and the others were drawn (the page says so)
        return self.exit_code in (0, 3)


def mode() -> str:
    return os.environ.get(ENV_MODE, "all").strip() or "all"


def selected(names: list[str], measurements: dict) -> list[str]:
    """The experiments whose quick variant this build runs, in catalogue order."""
    value = mode()
    if value in ("all", "full"):
        return list(names)
    if value in ("none", "off", "0"):
        return []
    if value == "fast":
        order = sorted(names, key=lambda n: ((measurements.get(n) or {}).get("quick") or {}).get("wall_s", float("inf")))
        return [n for n in names if n in order[:FAST_COUNT]]
    wanted = [w.strip() for w in value.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise SystemExit(f"{ENV_MODE}={value!r}: {', '.join(unknown)} not in the catalogue "
                         f"(expected all, fast, none or names among {', '.join(names)})")
    return [n for n in names if n in wanted]


def _run_one(name: str, root: Path, repo: Path) -> Outcome:
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "implicitbias", "run", name, "--quick", "--out", str(out), "--no-progress"]
    workers = os.environ.get("IMPLICITBIAS_DOCS_WORKERS")
    if workers:
        command += ["--workers", workers]
    timeout = float(os.environ.get("IMPLICITBIAS_DOCS_TIMEOUT", "900"))
    start = time.perf_counter()
    log = out.parent / f"{name}.log"
    with open(log, "w") as handle:
        try:
            code: int | None = subprocess.run(command, cwd=repo, stdout=handle, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    wall = time.perf_counter() - start
    figures = {p.stem: p.read_bytes() for p in sorted((out / "figures").glob("*.png"))}
    checks_file = out / "checks.json"
    try:
        checks = json.loads(checks_file.read_text()) if checks_file.is_file() else []
    except (OSError, json.JSONDecodeError):
        checks = []
    tail = log.read_text(errors="replace")[-1500:] if log.is_file() else ""
    return Outcome(name, code, wall, figures, checks, tail)


def run_gallery(names: list[str], root: Path, repo: Path, say) -> dict[str, Outcome]:
    """Run the quick variant of each of `names` under `root`, `IMPLICITBIAS_DOCS_JOBS` at a time."""
    jobs = max(1, int(os.environ.get("IMPLICITBIAS_DOCS_JOBS", "1")))
    outcomes: dict[str, Outcome] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_run_one, name, root, repo): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            outcome = future.result()
            outcomes[outcome.name] = outcome
            say(f"gallery: {outcome.name} --quick: exit {outcome.exit_code}, {outcome.wall_s:.1f} s, "
                f"{len(outcome.figures)} figures ({len(outcomes)}/{len(names)})")
    return outcomes
