"""The metrics only Chistikov et al. 2023's experiments read: the census over trials (`census_trials`), frozen
neurons (`frozen`) and the exit from Figure 2's plateau (`plateau`)."""
