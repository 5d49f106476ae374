"""The map of where SHARPO helps on the corridor (benchmarks/map.py;
benchmarks/results/map_summary.md): grid (cells, units, bookkeeping), runner (one unit), warm (the
warm start's diagnosis), stats (a cell's numbers), figures (heat maps), report (the table)."""
