"""Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry & Srebro 2020 (COLT), "Kernel and rich regimes in
overparametrized models" (SCIENCE.md S6): Theorem 1, Sec. 4-5.

- `theorems`: `WoodworthLimit` (the Q_alpha limit), `MirrorFlowPath` (the flow as mirror flow); `claims`: the
  claims of the kernel-to-rich transition;
- `experiments`: woodworth2020-kernel-rich.
"""
