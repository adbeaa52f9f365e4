"""throttlelab: re-run a CPU-throttling lab and report it honestly."""
