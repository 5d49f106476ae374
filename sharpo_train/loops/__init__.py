"""The three loops that drive a policy: RL training (trainer.py, its settings
train_config.py and the resume rules resume.py), supervised warm start (sft.py) and
evaluation (evaluate.py).

May import: every room except recipes/, commands/ and integrations/.
"""
