"""Training: one `train` entry point; GD, SGD, normalised GD, mirror descent and gradient flow are
interchangeable methods, each owning its stepping (`implicitbias.training.methods`)."""

from implicitbias.training.methods import (
    GD,
    SGD,
    AnyMethod,
    GradientFlow,
    HyperbolicEntropy,
    Lp,
    MirrorDescent,
    NormalizedGD,
)
from implicitbias.training.stopping import Status, Stop
from implicitbias.training.train import train

__all__ = ["GD", "SGD", "AnyMethod", "GradientFlow", "HyperbolicEntropy", "Lp", "MirrorDescent", "NormalizedGD",
           "Status", "Stop", "train"]
