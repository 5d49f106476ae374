"""Settings: the one loader every command's settings go through (typed dataclasses, YAML
with ``base:``, ``key=value`` overrides, range checks) and bounded YAML input. Each
command's own settings live beside it (the trainer's ``Config``: loops/train_config.py).

Importing it needs no torch.
"""
