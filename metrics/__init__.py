"""Task metrics, agreement (robustness / fairness), slices, bootstrap and profiling summaries.

Pure computation on Dynaboard's 0-100 scale: no I/O, no logging. The registry of task
metrics is in :mod:`metrics.metric`.
"""
