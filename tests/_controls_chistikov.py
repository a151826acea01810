"""Controls of Chistikov et al.'s Theorems 7 and 8 (S11), of Theorem 7 read on the census of active neurons, and
of Boursier et al.'s theorem on orthogonal inputs (S12): a negative and a positive control for every prediction
(see tests/_controls.py).

Every cell is hand-built (no training) and consistent: the final parameters are a network, the recorded metrics
are computed from them (the recorded "max_angle" as a run records it: over every active neuron), and the recorded
final loss is the loss of that network. A negative control changes one thing of the nominal cell of
tests/test_theorem_table.py (built by tests/test_negative_controls_chistikov.py) the way a run that violates the
prediction would end: a loss curve that stalls (with the network that stalled), a neuron that does not align, a
neuron that carries weight but no longer takes part, an imbalance that grew. The positive control is the nominal
cell unless given.

Two predictions of Theorem 8 are statements about the data alone that the paper proves (the Z-matrix condition
implies M < 0; the sign of M decides whether the rank-1 interpolators have the minimum norm). On data the
reference computes correctly they cannot fail: they are checks of the reference solvers (M by enumeration, the
convex minimum norm) against the paper's lemmas. Their negative controls are a reference that returns numbers
contradicting the lemma (`WrongReference`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from _controls import Control
from implicitbias.metrics.neurons import max_angle_pair
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.families import ChistikovFamily
from implicitbias.papers.chistikov2023.theorems.theorem8 import ChistikovTheorem8
from implicitbias.reference import min_norm_relu_interpolator
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import RunContext
from test_negative_controls_chistikov import LAMS, _context, _orthogonal_cell

#: a plateau above the cells' stopping rule 1e-10: the loss of a run that stalls
PLATEAU = 1e-8
#: the census' grid (its experiment: lambda from 4^-4 down): at 4^-4 the alignment cone c lambda = 0.39 rad is
#: narrower than the off-bundle neurons' angles, so an unaligned neuron can be told apart at every lambda
CENSUS_LAMS = [4.0**-k for k in range(4, 9)]


# -- networks -------------------------------------------------------------------------------------------------
def _unit(v):
    return v / np.linalg.norm(v)


def _toward(ds, angle):
    """The unit vector at `angle` (rad) from v* in the plane of v* and the input nearest to v*: a neuron along it
    is active on that input whenever |angle - angle(v*, x)| < pi/2."""
    v = _unit(ds.info["v_star"])
    x = ds.X[np.argmax(ds.X @ v / np.linalg.norm(ds.X, axis=1))]
    e = _unit(x - (x @ v) * v)
    return math.cos(angle) * v + math.sin(angle) * e


def _network(ds, spread, *, extra=(), scale=1.0, imbalance=0.0):
    """Final parameters (W, a): a bundle of two neurons at +-spread/2 about one direction b, and the `extra`
    neurons (unit direction u, weight c = |a| ||w||, sign s: w = sqrt(c) u, a = s sqrt(c), balanced).

    The bundle interpolates scale x the teacher: with every neuron active on every input (each direction within
    pi/2 - spread/2 of every x_i) N(X) = X (sum_j a_j w_j) = scale X v*, so b = scale v* minus the extra neurons'
    a_j w_j (those active on every input) and each bundle neuron carries ||b|| / (2 cos(spread/2)). `imbalance`
    delta: the bundle's a_j times (1 + delta), its w_j divided by it (the output unchanged)."""
    v = ds.info["v_star"]
    target = scale * v
    rows, outer = [], []
    for u, c, s in extra:
        rows.append(math.sqrt(c) * u)
        outer.append(s * math.sqrt(c))
        if np.all(ds.X @ u > 0):
            target = target - s * c * u
    b = _unit(target)
    e = np.linalg.qr(np.stack([b, np.eye(b.size)[np.argmin(np.abs(b))]], axis=1))[0][:, 1]
    size = math.sqrt(np.linalg.norm(target) / (2.0 * math.cos(spread / 2)))
    bundle = [size * (math.cos(spread / 2) * b + sign * math.sin(spread / 2) * e) for sign in (1, -1)]
    W = np.stack([*(w / (1 + imbalance) for w in bundle), *rows])
    a = np.array([size * (1 + imbalance)] * 2 + outer)
    return W, a


def _spread(t, lam):
    """The nominal bundle's spread: 0.3 lambda, 10% wider per trial (Figure 1: proportional to lambda)."""
    return 0.3 * lam * (1 + 0.1 * t)


def _replace(ctx, **variables):
    return RunContext(ctx.runs, ctx.results.assign(**variables), ctx.data)


def _cell(spec, seeds, lams, network, *, plateau=None):
    """The cell over (trial, lambda) of `network(ds, trial, lam) -> (W, a)` on spec's data (one trial per seed),
    through the nominal cells' `_context`; the recorded max angle is over every active neuron (as the recorder's).
    plateau: the loss curve stalls at this value (the network passed should be the one that stalled there)."""
    data = [spec.generate(seed) for seed in seeds]
    params = {(t, lam): network(data[t], t, lam) for t in range(len(seeds)) for lam in lams}
    ctx = _context(params, data, spec, lams, len(seeds))
    ck = ctx.results.sizes["checkpoint"]
    angles = [max_angle_pair(W, a, ds.X)[0] for W, a, ds in
              zip(ctx.results["theta.W"].values, ctx.results["theta.a"].values, ctx.data)]
    ctx = _replace(ctx, max_angle=(("run", "checkpoint"), np.repeat(np.array(angles)[:, None], ck, axis=1)))
    if plateau is not None:
        ctx = _replace(ctx, loss=(("run", "checkpoint"), np.maximum(ctx.results["loss"].values, plateau)))
    return ctx


def _stalled_scale(ds, plateau):
    """The scale s of the teacher that a bundle N = s [X v*]_+ fits with loss `plateau`: (1 - s)^2 L_0 = plateau."""
    return 1.0 - math.sqrt(plateau / float(ds.y @ ds.y / (2 * ds.n)))


def _teacher(network, lams=LAMS):
    """A cell on the nominal instance's data (TeacherNeuron(d=4), two trials: one within the proofs' angle bound
    pi/4, one beyond it)."""
    return _cell(TeacherNeuron(d=4), [0, 1000], lams, network)


def _dead(ds, weight):
    """A neuron of the given weight along -v*: inactive on every input (<v*, x_i> > 0), so it does not change the
    output; a neuron that grew and then left every input's half-space."""
    return (-_unit(ds.info["v_star"]), weight, 1.0)


# -- Chistikov et al., Theorem 7 ------------------------------------------------------------------------------
def t7_stalled():
    """The loss stalls at 1e-8, above the stopping rule; the network is the bundle that fits the teacher at that
    loss."""
    def net(ds, t, lam):
        return _network(ds, _spread(t, lam), scale=_stalled_scale(ds, PLATEAU))
    return _cell(TeacherNeuron(d=4), [0, 1000], LAMS, net, plateau=PLATEAU)


def t7_unaligned_light_neuron():
    """A negative-sign neuron that stays active on one input at 1 rad from v*, of norm 1e-3 lambda (a share
    1e-6 lambda^2 of sum_k |a_k| ||w_k||, below the "carries weight" share 1e-6): it sets the recorded max angle
    (flat in lambda), not the weighted one."""
    return _teacher(lambda ds, t, lam: _network(ds, _spread(t, lam), extra=[(_toward(ds, 1.0), (1e-3 * lam) ** 2, -1.0)]))


def t7_flat_bundle():
    """The bundle's spread does not shrink with lambda: 0.2 rad (10% wider per trial) at every lambda. The recorded
    angle is at least the weighted one, so it fails too."""
    return _teacher(lambda ds, t, lam: _network(ds, 0.2 * (1 + 0.1 * t)))


def t7_dead_weight():
    """A neuron carrying weight 1/4 that is inactive on every input (it grew, then left): the output is the
    teacher's, the angles and the loss are the nominal ones, but ||theta||^2 = 2 (1 + 1/4) and
    ||W||_* = sqrt(5/4) (W is rank 1: the dead neuron lies along -v*). The old rank-1 bound passed it (it forgave
    all the weight outside the bundle: gaps 0.25 <= 0.507 and 0.118 <= 0.757); `chistikov_common.rank_one_bound` no
    longer forgives inactive neurons that carry weight."""
    return _teacher(lambda ds, t, lam: _network(ds, _spread(t, lam), extra=[_dead(ds, 0.25)]))


def t7_imbalance():
    """The balancedness drifts: the bundle ends with a_j = (1 + 5e-5) ||w_j|| (|a_j^2 - ||w_j||^2| ~ 1e-4, the
    recorded curve rising from 0 at init), 25 times the bound 2 rtol max ||theta||^2 = 4e-6 of gradient flow."""
    ctx = _teacher(lambda ds, t, lam: _network(ds, _spread(t, lam), imbalance=5e-5))
    W, a = ctx.results["theta.W"].values, ctx.results["theta.a"].values
    final = np.max(np.abs(a**2 - np.sum(W**2, axis=2)), axis=1)
    ramp = np.linspace(0.0, 1.0, ctx.results.sizes["checkpoint"])
    return _replace(ctx, balancedness_max=(("run", "checkpoint"), final[:, None] * ramp[None, :]))


#: the old rank-1 bound forgave all the weight c_R of the neurons outside the bundle: c_R / s (||theta||^2) or
#: sum_R ||w_j|| / sqrt(s) (||W||_*), and kappa c_R / s more through e; its measured values on the dead-weight cells
DEAD_OLD = "the rank-1 bound forgave the weight outside the bundle, dead neurons included: "

CONTROLS = [
    Control("ChistikovTheorem7", "loss -> 0 exponentially", t7_stalled),
    Control("ChistikovTheorem7", "max angle between active neurons -> 0", t7_unaligned_light_neuron),
    Control("ChistikovTheorem7", "max angle between active neurons with |a_j|", t7_flat_bundle),
    Control("ChistikovTheorem7", "||W||_* -> sqrt(||v*||)", t7_dead_weight,
            old_threshold=DEAD_OLD + "sum_R ||w_j|| / sqrt(s) + kappa c_R / s: gap sqrt(5/4) - 1 = 0.118 <= 0.757"),
    Control("ChistikovTheorem7", "||theta||^2 -> 2 ||v*||", t7_dead_weight,
            old_threshold=DEAD_OLD + "c_R / s + kappa c_R / s: gap 0.25 <= 0.507"),
    Control("ChistikovTheorem7", "balancedness conserved", t7_imbalance),
]


# -- Chistikov et al., Theorem 8 ------------------------------------------------------------------------------
class WrongReference(ChistikovTheorem8):
    """Theorem 8 whose reference numbers (M, the convex minimum norm) are replaced, on a data set that carries
    info["wrong_reference"], by those it gives: a reference solver that contradicts the paper's lemmas."""

    def _ref(self, run, r) -> dict:
        return {**super()._ref(run, r), **run.data[r].info.get("wrong_reference", {})}


def _family(family, network=None, wrong=None):
    """The nominal Theorem 8 cell (ChistikovFamily(d=3), one trial, lambda = 4^-4, 4^-6, 4^-8) with `network`
    in place of the bundle, and the reference numbers `wrong` attached to the data (for `WrongReference`)."""
    spec = ChistikovFamily(family=family, d=3)
    ctx = _cell(spec, [0], [4.0**-4, 4.0**-6, 4.0**-8],
                network or (lambda ds, t, lam: _network(ds, _spread(t, lam))))
    if wrong is not None:
        ctx = RunContext(ctx.runs, ctx.results,
                         [dataclasses.replace(ds, info={**ds.info, "wrong_reference": wrong}) for ds in ctx.data])
    return ctx


def _min_norm_network(family):
    """(W, a) of the convex program's minimum-norm interpolator of the family's data (solved once: `reference.memo`)."""
    ds = ChistikovFamily(family=family, d=3).generate(0)

    def solve():
        res = min_norm_relu_interpolator(ds.X, ds.y)
        return res.W, res.a

    return memoized("min_norm_relu_network", array_key(ds.X, ds.y), {}, solve)


def t8_gf_at_the_minimum_norm():
    """M > 0 data; GF ends, at every lambda, at the minimum-norm interpolator of the convex program (a rank-2
    network below the rank-1 norm 2||v*||)."""
    return _family("m_positive", lambda ds, t, lam: _min_norm_network("m_positive"))


def t8_dead_weight():
    """M < 0 data; the bundle plus a neuron of weight 1/4 inactive on every input (as `t7_dead_weight`): learned
    ||theta||^2 = 2.5. The old rank-1 bound passed it (gap 0.25 <= 0.5)."""
    return _family("m_negative", lambda ds, t, lam: _network(ds, _spread(t, lam), extra=[_dead(ds, 0.25)]))


CONTROLS += [
    Control("ChistikovTheorem8", "Z-matrix condition holds => M < 0", lambda: _family("m_negative", wrong={"M": 0.1}),
            theorem_factory=WrongReference),
    Control("ChistikovTheorem8", "M < 0 => min-norm interpolators are rank-1",
            lambda: _family("m_negative", wrong={"min_norm": 1.9}), theorem_factory=WrongReference),
    Control("ChistikovTheorem8", "M > 0 => rank-1 is not min-norm", lambda: _family("m_positive", wrong={"min_norm": 2.0}),
            positive=lambda: _family("m_positive"), theorem_factory=WrongReference),
    Control("ChistikovTheorem8", "learned ||theta||^2 at the smallest lambda -> 2||v*||", t8_dead_weight,
            old_threshold=DEAD_OLD + "c_R / s + kappa c_R / s: gap 0.25 <= 0.5"),
    Control("ChistikovTheorem8", "M > 0 => GF does not find a min-norm interpolator", t8_gf_at_the_minimum_norm,
            positive=lambda: _family("m_positive")),
]


# -- Boursier et al. 2022 -------------------------------------------------------------------------------------
def _boursier_gap(lam):
    """The nominal cell's relative gap to the minimum norm (exponent 0.367, within the predicted 2 (1 - r))."""
    return 0.5 * lam**0.367


def boursier_stalled():
    """The nominal cell whose loss stalls at 1e-8: every neuron scaled by sqrt(1 - rho), rho = sqrt(1e-8 / L_0),
    so that the output (1 - rho) y has that loss."""
    ctx = _orthogonal_cell(_boursier_gap)
    L0 = np.array([float(ds.y @ ds.y / (2 * ds.n)) for ds in ctx.data])
    shrink = np.sqrt(1.0 - np.sqrt(PLATEAU / L0))
    res = ctx.results
    W = res["theta.W"].values * shrink[:, None, None]
    a = res["theta.a"].values * shrink[:, None]
    ck = res.sizes["checkpoint"]
    nuclear = res["W.nuclear"].values * shrink[:, None]
    norm = np.sqrt(np.sum(W**2, axis=(1, 2)) + np.sum(a**2, axis=1))
    return _replace(ctx, **{"theta.W": (res["theta.W"].dims, W), "theta.a": (res["theta.a"].dims, a),
                            "W.nuclear": (("run", "checkpoint"), nuclear),
                            "param_norm": (("run", "checkpoint"), np.repeat(norm[:, None], ck, axis=1)),
                            "loss": (("run", "checkpoint"), np.maximum(res["loss"].values, PLATEAU))})


CONTROLS += [
    Control("BoursierOrthogonal", "loss -> 0 exponentially", boursier_stalled),
    Control("BoursierOrthogonal", "closed-form min", lambda: _orthogonal_cell(lambda lam: 0.05)),
]


# -- Theorem 7 on the census ----------------------------------------------------------------------------------
def _census(extra):
    """A cell on the census' lambda grid with one extra neuron per run, extra(ds, lam) -> (u, weight, sign)."""
    return _teacher(lambda ds, t, lam: _network(ds, _spread(t, lam), extra=[extra(ds, lam)]), CENSUS_LAMS)


def census_heavy_unaligned():
    """A negative-sign neuron carrying a share 1e-3 that is unaligned at every lambda but still aligning: at
    0.5 (lambda / 4^-4)^0.6 rad from v*, above the alignment cone 100 lambda everywhere (a positive one that
    heavy is a bundle of its own: `census_second_bundle`)."""
    return _census(lambda ds, lam: (_toward(ds, 0.5 * (lam / CENSUS_LAMS[0]) ** 0.6), 1e-3, -1.0))


def census_second_bundle():
    """A positive neuron carrying a share 1e-3 at 0.5 (lambda / 4^-4)^0.6 rad from v*: a second direction of the
    positive neurons carrying weight at every lambda below 4^-4 (further than 2 c lambda from the bundle)."""
    return _census(lambda ds, lam: (_toward(ds, 0.5 * (lam / CENSUS_LAMS[0]) ** 0.6), 1e-3, 1.0))


def census_stuck():
    """A light negative-sign neuron (norm 0.1 lambda) active on one input at 1 rad from v* at every lambda: unaligned
    at every lambda (so the fraction of trials with one does not grow), its angle not falling at all."""
    return _census(lambda ds, lam: (_toward(ds, 1.0), (0.1 * lam) ** 2, -1.0))


def census_late_unaligned():
    """A light negative-sign neuron that aligns, but slower than lambda: at 0.3 (lambda / 4^-4)^0.6 rad, inside
    the alignment cone 100 lambda at lambda = 4^-4, outside it at every smaller lambda (exponent 0.6 >= 1/2: not
    stuck)."""
    return _census(lambda ds, lam: (_toward(ds, 0.3 * (lam / CENSUS_LAMS[0]) ** 0.6), (0.1 * lam) ** 2, -1.0))


CONTROLS += [
    Control("CensusTheorem7", "unaligned neurons' share", census_heavy_unaligned),
    Control("CensusTheorem7", "form one bundle", census_second_bundle),
    Control("CensusTheorem7", "still aligns", census_stuck),
    Control("CensusTheorem7", "does not grow as lambda decreases", census_late_unaligned),
]
