# Stage 4: figures, the self-contained HTML report, and the published archive.
# Everything here reads the tidy tables (and the raw logs' first, meta line), so
# re-plotting or re-rendering never reruns an experiment. Outputs are marked
# report(), so `snakemake --report report.html` works as well as our own page.

import json
import shlex
from pathlib import Path

REPORT_DIR = "results/report"
REPORT_LOGS = "results/logs/report"
TABLES_DIR = str(Path(rules.parse_runs.output.runs).parent)
RAW_ROOT = f"results/{BACKEND}/raw"
# Snakemake's config (with --config overrides) as one shell word: the report and
# the archive load the same design from it, and a changed setting reruns them.
CONFIG_JSON = shlex.quote(json.dumps(config, sort_keys=True))
ARCHIVE = f"results/throttlelab-report-{BACKEND}-{Path(DESIGN.profile).stem}.tar.gz"


report: "../report/workflow.rst"








PLOT_FIGURE = "{PY} -m throttlelab.figures.plots --figure {params.figure} {params.tables} --out {output.svg} > {log} 2>&1"


rule plot_completion_times:
    input:
        rounds=rules.parse_runs.output.rounds,
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e2a_completion"),
            caption="../report/captions/e2a_completion.rst",
            category="E2a burst job",
        ),
    log:
        f"{REPORT_LOGS}/plot_completion_times.log",
    params:
        figure="e2a_completion",
        tables=table_args,
        repeats=repeats_of("E2a"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_cgroup_counters:
    input:
        rounds=rules.parse_runs.output.rounds,
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e2a_counters"),
            caption="../report/captions/e2a_counters.rst",
            category="E2a burst job",
        ),
    log:
        f"{REPORT_LOGS}/plot_cgroup_counters.log",
    params:
        figure="e2a_counters",
        tables=table_args,
        repeats=repeats_of("E2a"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_gomaxprocs:
    input:
        metrics=rules.compute_stats.output.metrics,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e3_gomaxprocs"),
            caption="../report/captions/e3_gomaxprocs.rst",
            category="E3 GOMAXPROCS",
        ),
    log:
        f"{REPORT_LOGS}/plot_gomaxprocs.log",
    params:
        figure="e3_gomaxprocs",
        tables=table_args,
        repeats=repeats_of("E3"),
    shell:
        PLOT_FIGURE


rule plot_throttling:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("s1_throttling"),
            caption="../report/captions/s1_throttling.rst",
            category="S1 GOMAXPROCS and throttling",
        ),
    log:
        f"{REPORT_LOGS}/plot_throttling.log",
    params:
        figure="s1_throttling",
        tables=table_args,
        repeats=repeats_of("S1"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE




rule plot_weights_shares:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        share_expectations=rules.parse_runs.output.share_expectations,
    output:
        svg=report(
            figure_path("weights_shares"),
            caption="../report/captions/weights_shares.rst",
            category="E4/E5/E10 requests become weights",
        ),
    log:
        f"{REPORT_LOGS}/plot_weights_shares.log",
    params:
        figure="weights_shares",
        tables=table_args,
        repeats=repeats_of("E5"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_service_latency:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e2b_latency"),
            caption="../report/captions/e2b_latency.rst",
            category="E2b service under load",
        ),
    log:
        f"{REPORT_LOGS}/plot_service_latency.log",
    params:
        figure="e2b_latency",
        tables=table_args,
        repeats=repeats_of("E2b"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_replicas:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e7_replicas"),
            caption="../report/captions/e7_replicas.rst",
            category="E7 replicas or a raised limit",
        ),
    log:
        f"{REPORT_LOGS}/plot_replicas.log",
    params:
        figure="e7_replicas",
        tables=table_args,
        repeats=repeats_of("E7"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_busy_neighbor:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e8_neighbor"),
            caption="../report/captions/e8_neighbor.rst",
            category="E8 busy neighbor",
        ),
    log:
        f"{REPORT_LOGS}/plot_busy_neighbor.log",
    params:
        figure="e8_neighbor",
        tables=table_args,
        repeats=repeats_of("E8"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_monitoring:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("e6_monitoring"),
            caption="../report/captions/e6_monitoring.rst",
            category="E6 what monitoring sees",
        ),
    log:
        f"{REPORT_LOGS}/plot_monitoring.log",
    params:
        figure="e6_monitoring",
        tables=table_args,
        repeats=repeats_of("E6"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule plot_closed_loop:
    input:
        metrics=rules.compute_stats.output.metrics,
        estimates=rules.compute_stats.output.estimates,
        runs=rules.parse_runs.output.runs,
    output:
        svg=report(
            figure_path("s2_throughput"),
            caption="../report/captions/s2_throughput.rst",
            category="S2 threads and the cascade",
        ),
    log:
        f"{REPORT_LOGS}/plot_closed_loop.log",
    params:
        figure="s2_throughput",
        tables=table_args,
        repeats=repeats_of("S2"),
        confidence=DESIGN.confidence,
    shell:
        PLOT_FIGURE


rule render_report:
    input:
        figures=profile_figures(),
        tables=[
            *rules.parse_runs.output,
            *rules.compute_stats.output,
            *rules.evaluate_findings.output,
        ],
        raw=rules.raw.input,
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
    log:
        f"{REPORT_LOGS}/render_report.log",
    params:
        tables=TABLES_DIR,
        raw_root=RAW_ROOT,
        figures=f"{REPORT_DIR}/figures",
        config=CONFIG_JSON,
    shell:
        "{PY} -m throttlelab.report.page --tables {params.tables} --raw-root {params.raw_root}"
        " --figures {params.figures} --config-json {params.config} --out {output.html}"
        " --findings-table {output.findings} --estimates-table {output.estimates} --project {workflow.basedir} > {log} 2>&1"


rule pack_report:
    input:
        report=rules.render_report.output,
        figures=profile_figures(),
        tables=rules.render_report.input.tables,
        raw=rules.raw.input,
    output:
        archive=ARCHIVE,
        checksum=f"{ARCHIVE}.sha256",
    log:
        f"{REPORT_LOGS}/pack_report.log",
    params:
        report_dir=REPORT_DIR,
        tables=TABLES_DIR,
        raw_root=RAW_ROOT,
        config=CONFIG_JSON,
    shell:
        "{PY} -m throttlelab.report.page publish --results results --report {params.report_dir}"
        " --tables {params.tables} --raw-root {params.raw_root} --config-json {params.config}"
        " --out {output.archive} --project {workflow.basedir} > {log} 2>&1"


rule report:
    input:
        rules.render_report.output,


rule publish:
    input:
        rules.pack_report.output,
