"""The analysis: raw logs -> tidy tables -> per-run metrics and estimates -> findings.

    tidy.py        raw logs -> the tidy tables of docs/TABLES.md (runs.csv's param_* columns,
                   environment.csv), validated while read
    stats.py       the statistics of docs/STATISTICS.md (estimates, comparisons, Holm, verdicts)
    metrics/       per-run metrics (one module per family) and their estimates across repeats
    findings/      the lab's claims as data (one module per family) and their evaluation
    formatting.py  numbers as the figures and the report print them
    commands.py    `throttlelab tables | stats | findings`

It reads raw logs and tables only, never the measuring code (pyproject's import contracts).
"""
