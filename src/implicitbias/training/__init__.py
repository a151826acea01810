"""Training: one `train` entry point; GD, SGD, normalised GD and gradient flow are interchangeable."""

from implicitbias.training.methods import GD, SGD, AnyMethod, GradientFlow, NormalizedGD
from implicitbias.training.stopping import Status, Stop
from implicitbias.training.train import train

__all__ = ["GD", "SGD", "AnyMethod", "GradientFlow", "NormalizedGD", "Status", "Stop", "train"]
