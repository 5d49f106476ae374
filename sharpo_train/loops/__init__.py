"""The three loops that drive a policy: RL training (trainer.py, its settings
train_config.py and the resume rules resume.py), supervised warm start (sft.py, its demonstrations read by demo_records.py) and
evaluation (evaluate.py).
"""

# the analysis room's step hooks (credit quality, saved batches) are registered here, so
# every way of running the trainer has them; loops/trainer.py itself imports no analysis
# module (step/hooks.py)
from ..analysis import step_hooks  # noqa: F401,E402  (registers)
