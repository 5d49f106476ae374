"""The RL step's pieces (docs/training.md, "One step"): rollout, the StepBatch, scoring,
teacher rows, credit rules, segments, policy losses and the update.

May import: the root modules (errors, io, tags, hint), envs/ (base, turn_prompt), models/.
"""
