"""Run directories: what may be one, links, lock, checkpoints, metrics trackers."""
