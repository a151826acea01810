"""Gunasekar, Lee, Soudry & Srebro 2018 (NeurIPS), "Implicit bias of gradient descent on linear convolutional
networks" (SCIENCE.md S6, S10): Theorem 2 on diagonal networks.

- `theorems`: `GunasekarDiagonal`, the direction of a depth-D diagonal network against the l_(2/D) max margin;
- `experiments`: gunasekar2018-diagonal.
"""
