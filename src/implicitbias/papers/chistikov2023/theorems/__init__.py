"""Chistikov et al. 2023's theorems: Theorem 7 (`theorem7`), Theorem 8 (`theorem8`), Theorem 7 over trials
(`census`), and the summaries they share with Boursier et al. 2022 (`common`)."""

from implicitbias.papers.chistikov2023.theorems.theorem7 import ChistikovTheorem7
from implicitbias.papers.chistikov2023.theorems.theorem8 import ChistikovTheorem8

#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [ChistikovTheorem7, ChistikovTheorem8]
