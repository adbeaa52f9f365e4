# Stage 3: raw logs -> tidy tables -> per-run metrics and estimates -> findings.
# Analysis reads only the raw logs, so re-analysing never reruns an experiment;
# the statistics settings are params, so changing them reruns only these jobs
# (and the report's), never run_experiment.

TABLES = layout.TABLES.format(backend=BACKEND)
ANALYSIS_LOGS = layout.ANALYSIS_LOGS.format(backend=BACKEND)


rule parse_runs:
    input:
        raw=raw_logs,
        looks=LOOK_FILES,
    output:
        runs=f"{TABLES}/runs.csv",
        rounds=f"{TABLES}/rounds.csv",
        reports=f"{TABLES}/reports.csv",
        headers=f"{TABLES}/headers.csv",
        readback=f"{TABLES}/readback.csv",
        summaries=f"{TABLES}/summaries.csv",
        requests=f"{TABLES}/requests.csv",
        share_samples=f"{TABLES}/share_samples.csv",
        share_expectations=f"{TABLES}/share_expectations.csv",
        podstats=f"{TABLES}/podstats.csv",
        target_stats=f"{TABLES}/target_stats.csv",
        environment=f"{TABLES}/environment.csv",
    log:
        f"{ANALYSIS_LOGS}/parse_runs.log",
    params:
        out_dir=output_folder("runs"),
    shell:
        "throttlelab tables --raw {input.raw} --out-dir {params.out_dir} 2>&1 | tee {log} >&2"


rule compute_stats:
    input:
        tables=rules.parse_runs.output,
    output:
        metrics=f"{TABLES}/metrics.csv",
        estimates=f"{TABLES}/estimates.csv",
        # what the report prints beside them (analysis/report_statistics.py): the page only renders
        contrasts=f"{TABLES}/contrasts.csv",
        interference=f"{TABLES}/interference.csv",
        load_generator=f"{TABLES}/load_generator.csv",
        # the run as a whole (backend, profile, runtime, kernel, CPUs): how `compare` heads its column
        setup=f"{TABLES}/setup.csv",
    log:
        f"{ANALYSIS_LOGS}/compute_stats.log",
    params:
        tables_dir=input_folder("tables"),
        confidence=DESIGN.confidence,
        seed=DESIGN.seed,
        profile=PROFILE_NAME,
    shell:
        "throttlelab stats --tables-dir {params.tables_dir}"
        " --metrics {output.metrics} --estimates {output.estimates}"
        " --contrasts {output.contrasts} --interference {output.interference}"
        " --load-generator {output.load_generator} --setup {output.setup} --profile {params.profile}"
        " --confidence {params.confidence} --seed {params.seed} 2>&1 | tee {log} >&2"


rule evaluate_findings:
    input:
        metrics=rules.compute_stats.output.metrics,
        runs=rules.parse_runs.output.runs,
        headers=rules.parse_runs.output.headers,
        looks=LOOK_FILES,
    output:
        findings=f"{TABLES}/findings.csv",
        checks=f"{TABLES}/checks.csv",
        # the model's numbers behind the thresholds, which the figures of our experiments draw
        predictions=f"{TABLES}/predictions.csv",
    log:
        f"{ANALYSIS_LOGS}/evaluate_findings.log",
    params:
        tables_dir=input_folder("runs"),
        experiments=" ".join(DESIGN.experiments),
        confidence=DESIGN.confidence,
        left_out=PLAN.left_out_arg(),
    shell:
        "throttlelab findings --tables-dir {params.tables_dir}"
        " --metrics {input.metrics} --experiments {params.experiments}"
        " --findings {output.findings} --checks {output.checks} --predictions {output.predictions}"
        " --confidence {params.confidence} --left-out {params.left_out} --looks {input.looks} 2>&1 | tee {log} >&2"


rule analysis:
    input:
        rules.parse_runs.output,
        rules.compute_stats.output,
        rules.evaluate_findings.output,
