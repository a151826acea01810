"""Chistikov, Englert & Lazic 2023 (NeurIPS), "Learning a neuron by a shallow ReLU network: dynamics and
implicit bias for correlated inputs" (SCIENCE.md S11): Figure 1, Figure 2, Theorem 7, Theorem 8 (Sec. 7,
appendix G) and appendix I.

- `data`: `TeacherNeuron` (the teacher-neuron data of Sec. 8, data name "teacher_neuron"), `TwoTeachers`
  (appendix I, "two_teachers"); `families`: `ChistikovFamily`, the two data families of appendix G with known sign
  of M ("chistikov_family");
- `reference`: the paper's measurement M and the Z-matrix condition;
- `theorems`: `ChistikovTheorem7` (`theorem7`), `ChistikovTheorem8` (`theorem8`), `CensusTheorem7` (Theorem 7
  over trials, `census`), their shared helpers (`common`);
- `metrics`: what only this paper reads: the census over trials (`census_trials`), frozen neurons (`frozen`),
  the plateau of Figure 2 (`plateau`); the census of neurons and the readings of "active" are core final
  metrics (`implicitbias.metrics.census`, `implicitbias.metrics.readings`);
- `experiments`: chistikov2023-fig1 (`fig1`, with the readings of "active" in `readings`),
  chistikov2023-fig1-census and chistikov2023-census-dtype (`census`), chistikov2023-fig2 (`fig2`),
  chistikov2023-min-norm (`min_norm`), chistikov2023-fig1-paper-protocol (`protocol`),
  chistikov2023-two-teachers (`two_teachers`).

Its many experiments make it a subpackage per kind (`theorems/`, `experiments/`, `metrics/`); a paper with one
experiment is three modules (`data.py`, `theorems.py`, `experiments.py`), as `implicitbias.papers.vardi2021`.
"""
