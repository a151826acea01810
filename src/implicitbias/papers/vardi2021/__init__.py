"""Vardi & Shamir 2021 (COLT), "Implicit regularization in ReLU networks with the square loss" (SCIENCE.md S9):
the single neuron.

- `data`: `NeuronTeacher`, realisable data for one neuron with n < d (data name "neuron_teacher");
- `theorems`: `VardiLeakyNeuron`, `VardiReluNeuron`;
- `experiments`: vardi2021-single-neuron.

The shape to copy for a new paper (docs/howto/plugin.md), beside the plugin package examples/quadratic-net.
"""
