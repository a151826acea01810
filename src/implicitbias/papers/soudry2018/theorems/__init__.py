"""Soudry et al. 2018's theorems and their companions (`limits`), the claims of Figure 1 (`claims`) and the fits
they share (`common`)."""

from implicitbias.papers.soudry2018.theorems.limits import (
    NacsonNormalizedGD,
    NacsonSGD,
    SoudryMulticlass,
    SoudryTheorem3,
)

#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [NacsonNormalizedGD, NacsonSGD, SoudryMulticlass, SoudryTheorem3]
