"""Credit quality, the teacher probe, reports and `sharpo explain`."""
