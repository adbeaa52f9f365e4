"""The report: one self-contained HTML page from the tidy tables and figures, and the published archive.

page.py        the page's context and rendering; `throttlelab report | publish | verify` (main)
inputs.py      the tables it reads (the environment too: environment.csv), raw-log paths, the config
formatting.py  cells, settings and sizes as the page prints them
notes.py       paragraphs computed from the tables (S2 against E2b)
publish.py     the archive with its SHA-256 manifest and format version, and its verification
comparison.py  several runs: the matrix of findings by runs, where they disagree and why
compare_page.py  the comparison page from run folders and checked archives (`throttlelab compare`)
"""
