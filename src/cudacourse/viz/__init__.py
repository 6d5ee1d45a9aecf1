"""Plots for the lessons, one module per topic (``cudacourse.viz.memory``, ...)."""
