"""Exact credit labels of corridor rollouts (docs/credit_quality.md): the environment
knows which turns were decisive and which door was right there, so no planner is needed.
The labeller has the interface analysis/credit_auc.py asks of every environment's labeller."""
from __future__ import annotations
from . import label_episodes


class DecisiveLabeller:
    """``label_episodes(episodes)`` -> [N][turns]: True (a lamp turn, the right door),
    False (a lamp turn, a wrong door or an invalid action), None (no lamp; an episode
    ended by a fault)."""

    def __init__(self):
        self.stats = {"episodes": 0}

    def label_episodes(self, episodes) -> list[list]:
        self.stats["episodes"] += len(episodes)
        return label_episodes(episodes)

    def close(self) -> None:
        pass
