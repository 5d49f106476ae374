"""The RL step's pieces (docs/training.md, "One step"): rollout, the StepBatch, scoring,
teacher rows, credit rules, segments, policy losses and the update.
"""
