"""Reports built on a run directory (docs/run_directory.md): the credit page of one group
(`sharpo explain`), learning curves from metrics.jsonl, and Tables 1-2 style results."""
from .records import (CreditRecordError, find_mixed_group, is_mixed_group, list_credit_steps,
                      load_credit_record, read_metrics)
from .tables import FAMILIES, aggregate_runs, format_mean_std, results_markdown

__all__ = ["CreditRecordError", "find_mixed_group", "is_mixed_group", "list_credit_steps",
           "load_credit_record", "read_metrics", "FAMILIES", "aggregate_runs",
           "format_mean_std", "results_markdown"]
