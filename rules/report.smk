# Stage 4: figures, the self-contained HTML report, and the published archive.
# Everything here reads the tidy tables (the environment too: environment.csv), so
# re-plotting or re-rendering never reruns an experiment, and the report never opens
# a raw log (it links them; the archive packs them). Outputs are marked report(), so
# `snakemake --report report.html` works as well as our own page.
#
# The figures are the registry's (throttlelab/figures/registry.py, a light module
# read here while parsing): one job draws those of the experiments this profile
# runs, all in one process, into the report's figures folder.

import json
import shlex
from pathlib import Path

# Each (backend, profile) has its own report; results/report/index.html is the page a user
# opens first: the latest run's report, linking to the others.
FRONT_PAGE = layout.FRONT_PAGE
REPORT_DIR = layout.report_dir(BACKEND, PROFILE_NAME)
REPORT_LOGS = layout.REPORT_LOGS.format(backend=BACKEND)
FIGURES_DIR = layout.figures_dir(BACKEND, PROFILE_NAME)
# The figures folder when this profile's experiments have figures (a profile may have none: then no
# job draws them, and the page has none).
PROFILE_FIGURES = [FIGURES_DIR] if profile_figures() else []
# Snakemake's config (with --config overrides) as one shell word: the report and
# the archive load the same design from it, and a changed setting reruns them. The runs
# a comparison reads are no setting of a run: changing them renders no report again.
CONFIG_JSON = shlex.quote(json.dumps({k: v for k, v in config.items() if k != "compare"}, sort_keys=True))
ARCHIVE = layout.archive(BACKEND, PROFILE_NAME)


report: "../report/workflow.rst"


# Every figure of the profile, drawn in one process (the imports paid once, not once a figure):
# the union of their tables as inputs (named as `throttlelab figure --table` takes them), each figure
# FIGURES_DIR/<figure>.svg with its caption beside it, <figure>.caption.html. In Snakemake's report each
# SVG of the folder is one entry, its caption and category its own: the pattern's `figure` wildcard
# picks them (figure.rst includes the caption the job wrote, the text our page prints under the figure).
rule draw_figures:
    input:
        unpack(figure_tables),
    output:
        figures=report(
            directory(FIGURES_DIR),
            patterns=["{figure}.svg"],
            caption="../report/captions/figure.rst",
            category=figure_category,
        ),
    log:
        f"{REPORT_LOGS}/draw_figures.log",
    params:
        figures=figure_args,
        tables=table_args,
    shell:
        "throttlelab figure {params.figures} {params.tables} --out-dir {output.figures} > {log} 2>&1"


rule render_report:
    input:
        figures=PROFILE_FIGURES,
        # the page shows the profile's text (its description): editing the file reruns the page
        profile=DESIGN.profile_path,
        tables=[
            *rules.parse_runs.output,
            *rules.compute_stats.output,
            *rules.evaluate_findings.output,
        ],
    output:
        html=report(
            f"{REPORT_DIR}/index.html",
            caption="../report/captions/report.rst",
            category="Report",
        ),
        findings=report(
            f"{REPORT_DIR}/findings_table.csv",
            caption="../report/captions/findings.rst",
            category="Tables",
        ),
        estimates=report(
            f"{REPORT_DIR}/estimates_table.csv",
            caption="../report/captions/estimates.rst",
            category="Tables",
        ),
        front_page=FRONT_PAGE,
    log:
        f"{REPORT_LOGS}/render_report.log",
    params:
        tables=input_folder("tables"),
        # the raw logs are linked from the page, never read: not inputs of this rule
        raw_root=layout.raw_root(BACKEND),
        # the figures folder beside the page, not the folder of its first figure: a run whose experiments
        # have no figure has none
        figures=lambda wildcards, output: str(Path(output.html).parent / layout.FIGURES_FOLDER),
        config=CONFIG_JSON,
    shell:
        "throttlelab report --tables {params.tables} --raw-root {params.raw_root}"
        " --figures {params.figures} --config-json {params.config} --out {output.html}"
        ' --findings-table {output.findings} --estimates-table {output.estimates} --project "$THROTTLELAB_PROJECT"'
        " --front-page {output.front_page} > {log} 2>&1"


rule pack_report:
    input:
        report=rules.render_report.output,
        figures=PROFILE_FIGURES,
        tables=rules.render_report.input.tables,
        raw=raw_logs,
        looks=LOOK_FILES,
        # the archive packs the design it was made from: editing the profile repacks it
        profile=DESIGN.profile_path,
    output:
        archive=ARCHIVE,
        checksum=f"{ARCHIVE}.sha256",
    log:
        f"{REPORT_LOGS}/pack_report.log",
    params:
        report_dir=input_folder("report"),
        tables=input_folder("tables"),
        # the root the raw logs' paths inside it hang from (raw/<experiment>/<variant>/rep<k>.jsonl)
        raw_root=input_folder("raw", levels=len(Path(layout.RAW_LOG_IN_ROOT).parts)),
        config=CONFIG_JSON,
    shell:
        f"throttlelab publish --results {layout.RESULTS}"
        " --report {params.report_dir}"
        " --tables {params.tables} --raw-root {params.raw_root} --config-json {params.config}"
        ' --out {output.archive} --project "$THROTTLELAB_PROJECT" > {log} 2>&1'


rule report:
    input:
        rules.render_report.output,


rule publish:
    input:
        rules.pack_report.output,


# Several runs on one page (throttlelab/report/compare_page.py): this checkout's run folders and published
# archives (config `compare`). It reads each run's tables as they are: they are named by absolute path, which
# no rule's output matches, so Snakemake never goes and remakes a run (nor measures one) to compare it; a
# table rewritten since the page renders it again.
COMPARE = config.get("compare") or {}
COMPARE_RUNS = layout.compare_runs(Path(layout.RESULTS), COMPARE.get("runs"))
COMPARE_ARCHIVES = [str(Path(p).resolve()) for p in COMPARE.get("archives") or []]


rule compare:
    input:
        tables=[
            str((Path(folder) / "tables" / name).resolve())
            for folder in COMPARE_RUNS
            for name in ("findings.csv", "checks.csv", "setup.csv")
            if name == "findings.csv" or (Path(folder) / "tables" / name).is_file()
        ],
        archives=COMPARE_ARCHIVES,
    output:
        page=layout.COMPARE_PAGE,
    log:
        layout.job_log("compare"),
    params:
        runs=" ".join(f"--run {shlex.quote(folder)}" for folder in COMPARE_RUNS),
        archives=" ".join(f"--archive {shlex.quote(path)}" for path in COMPARE_ARCHIVES),
        reports=layout.REPORT_ROOT,
    shell:
        "throttlelab compare {params.runs} {params.archives} --out {output.page}"
        ' --reports {params.reports} --project "$THROTTLELAB_PROJECT" 2>&1 | tee {log} >&2'
