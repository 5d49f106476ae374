"""The three loops that drive a policy: RL training (trainer.py), supervised warm start
(sft.py) and evaluation (evaluate.py).

May import: every room except recipes/, commands/ and integrations/.
"""
