"""The RL step's pieces: rollout, scoring, segments, tags, credit rules, teacher rows."""
