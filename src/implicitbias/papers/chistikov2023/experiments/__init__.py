"""Chistikov et al. 2023's experiments, one module per figure or study: Figure 1 (`fig1`, its readings of
"active" in `readings`), Figure 1 over 50 trials and under float32 (`census`), Figure 2 (`fig2`), Theorem 8
(`min_norm`), Figure 1 under the paper's GD protocol (`protocol`), appendix I (`two_teachers`)."""

from implicitbias.papers.chistikov2023.experiments import census, fig1, fig2, min_norm, protocol, two_teachers

#: the experiments of this paper, in the order `implicitbias list` shows them (entry-point group
#: `implicitbias.experiments`)
EXPERIMENTS = [*fig1.EXPERIMENTS, *census.EXPERIMENTS, *fig2.EXPERIMENTS, *min_norm.EXPERIMENTS,
               *protocol.EXPERIMENTS, *two_teachers.EXPERIMENTS]
