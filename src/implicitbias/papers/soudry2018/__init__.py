"""Soudry, Hoffer, Nacson, Gunasekar & Srebro 2018 (JMLR), "The implicit bias of gradient descent on separable
data", with its SGD, normalised-GD and multiclass companions (SCIENCE.md S4): Figure 1 and Theorem 3.

- `theorems`: `SoudryTheorem3`, `NacsonSGD`, `NacsonNormalizedGD`, `SoudryMulticlass` (`theorems.limits`), the
  figure's claims (`theorems.claims`) and their shared fits (`theorems.common`);
- `experiments`: soudry2018-logistic.
"""
