"""Near-orthogonality of a data set: the data conditions of Frei et al. 2023 (Theorem 3.2; S1) and
Kou, Chen, Gu 2023 (their data condition; S3), computed from the Gram matrix."""

from __future__ import annotations

import dataclasses

import numpy as np

from implicitbias._spec import ConfigError


@dataclasses.dataclass(frozen=True)
class NearOrthogonality:
    """Norms, inner products and both sides of the two data conditions.

    Frei et al. 2023, Theorem 3.2:  R_min^2 >= 3 gamma^-3 R^2 n max_{i != j} |<x_i, x_j>|
    (frei_lhs >= frei_rhs; None without gamma). frei_gamma_min is the smallest leaky slope gamma for
    which it holds ((3 R^2 n max|<x_i,x_j>| / R_min^2)^(1/3); it holds for no gamma in (0, 1] if > 1).
    Kou et al. 2023:  ||x_i||^2 >= C n max_{k != i} |<x_i, x_k>| for every i. kou_C_max is the largest C
    for which it holds, min_i ||x_i||^2 / (n max_{k != i} |<x_i, x_k>|); kou_lhs, kou_rhs are both sides
    at the binding point i (the argmin of that ratio), for the given C (None without C).
    With n = 1 there is no pair: max_inner = 0 and both conditions hold for every constant.
    """

    n: int
    R_min: float
    R_max: float
    R: float
    max_inner: float
    frei_lhs: float
    frei_gamma_min: float
    kou_C_max: float
    kou_index: int
    gamma: float | None = None
    frei_rhs: float | None = None
    frei_holds: bool | None = None
    C_kou: float | None = None
    kou_lhs: float | None = None
    kou_rhs: float | None = None
    kou_holds: bool | None = None

    def lines(self) -> list[str]:
        """The conditions as "quantity >= bound: holds/fails (numbers)" lines."""
        out = [
            f"R_min = {self.R_min:.6g}, R_max = {self.R_max:.6g}, "
            f"max_(i!=j) |<x_i,x_j>| = {self.max_inner:.6g}"
        ]
        if self.gamma is not None:
            out.append(
                f"Frei Thm 3.2: R_min^2 >= 3 gamma^-3 R^2 n max|<x_i,x_j>|: "
                f"{'holds' if self.frei_holds else 'fails'} ({self.frei_lhs:.6g} vs {self.frei_rhs:.6g}, "
                f"gamma = {self.gamma}; holds for gamma >= {self.frei_gamma_min:.4g})"
            )
        if self.C_kou is not None:
            out.append(
                f"Kou: ||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|: {'holds' if self.kou_holds else 'fails'} "
                f"({self.kou_lhs:.6g} vs {self.kou_rhs:.6g} at i = {self.kou_index}, C = {self.C_kou}; "
                f"holds for C <= {self.kou_C_max:.4g})"
            )
        return out


def near_orthogonality(X, gamma: float | None = None, C_kou: float | None = None) -> NearOrthogonality:
    """Evaluate the near-orthogonality conditions of Frei et al. (Thm 3.2) and Kou et al. on the rows of X."""
    if gamma is not None and not 0.0 < gamma <= 1.0:
        raise ConfigError(f"gamma = {gamma!r} is not allowed: expected a leaky slope in (0, 1]")
    if C_kou is not None and not C_kou > 0.0:
        raise ConfigError(f"C_kou = {C_kou!r} is not allowed: expected a constant > 0")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ConfigError(f"X has shape {X.shape}: expected a non-empty (n, d) array")
    n = X.shape[0]
    G = X @ X.T
    sq = np.diag(G).copy()
    off = np.abs(G)
    np.fill_diagonal(off, 0.0)
    row_max = off.max(axis=1) if n > 1 else np.zeros(n)
    max_inner = float(row_max.max())
    R_min, R_max = float(np.sqrt(sq.min())), float(np.sqrt(sq.max()))
    R = R_max / R_min if R_min > 0 else np.inf
    frei_lhs = R_min**2
    need = 3.0 * R**2 * n * max_inner
    frei_gamma_min = float(np.cbrt(need / frei_lhs)) if frei_lhs > 0 else np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(row_max > 0, sq / (n * row_max), np.inf)
    i = int(np.argmin(ratio))
    out = dict(
        n=n, R_min=R_min, R_max=R_max, R=R, max_inner=max_inner, frei_lhs=frei_lhs,
        frei_gamma_min=frei_gamma_min, kou_C_max=float(ratio[i]), kou_index=i,
    )  # fmt: skip
    if gamma is not None:
        rhs = 3.0 * gamma**-3 * R**2 * n * max_inner
        out.update(gamma=gamma, frei_rhs=float(rhs), frei_holds=bool(frei_lhs >= rhs))
    if C_kou is not None:
        rhs = C_kou * n * row_max[i]
        out.update(C_kou=C_kou, kou_lhs=float(sq[i]), kou_rhs=float(rhs), kou_holds=bool(sq[i] >= rhs))
    return NearOrthogonality(**out)
