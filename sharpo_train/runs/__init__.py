"""What a run directory holds and guarantees (docs/run_directory.md): which folders may be a
run, the writer lock, the files inside it, checkpoints and resume, metrics.jsonl and
trackers, the per-step credit records (what a resume may change: loops/resume.py).
"""
