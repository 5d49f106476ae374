"""Settings: the loader every command shares (typed dataclasses, overrides, validation),
bounded YAML input, and the trainer's Config schema.

May import: the root modules; config.py also reads the names that envs/, estimators/,
step/ and runs/ register (environments, methods, losses, hint placements, trackers).
"""
