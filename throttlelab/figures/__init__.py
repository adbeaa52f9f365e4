"""The report's figures: tidy tables in, a matplotlib Figure out, SVG for the page.

registry.py   every figure once: its experiment, tables, captions, category and functions
              (light: the Snakemake rules import it while parsing)
style.py      colours, axes helpers, data selection and the method sentence every figure shares
jobs_figures.py, weights_figures.py, services_figures.py   the figures (and captions) of each family of experiments
              (the catalogue's family; the lab's experiments and ours alike)
svg.py        a Figure as inline SVG with ids unique on the page
draw.py       `throttlelab figure`: figures of the registry from their tables (one file, or a folder)
"""
