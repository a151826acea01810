"""Kou, Chen & Gu 2023 (NeurIPS), "Implicit bias of gradient descent for two-layer ReLU and leaky ReLU networks on
nearly-orthogonal data" (SCIENCE.md S3): the rates under GD.

- `theorems`: `KouTheorem` (stable rank, ||W||_F = Theta(log t), loss = Theta(1/t), margin spread);
- `experiments`: kou2023-rates.
"""
