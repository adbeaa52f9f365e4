# Stage 2: every (experiment, variant, repeat) is one job writing one raw log.
# Raw logs are not protected(): a changed variant must be able to rerun (see README).


if BACKEND != "vm":

    # The calibration step (throttlelab/model/calibration.py): short pilot runs before the measured runs,
    # recorded (results/<backend>/calibration/, each raw log's meta.calibration) and never analysed.
    rule calibrate_host:
        input:
            binaries=layout.binary_paths(),
            images=PLATFORM.images(),
        output:
            quiet=layout.HOST_CALIBRATION,
        log:
            layout.HOST_CALIBRATION_LOG,
        priority: PLAN.calibration_priority
        resources:
            experiment_slot=1,
        params:
            duration=DESIGN.disturbance["quiet_calibration_s"],
            max_other_share=DESIGN.disturbance["max_other_share"],
        shell:
            "throttlelab calibrate host --backend {wildcards.backend} --duration-s {params.duration}"
            " --max-other-share {params.max_other_share}"
            " --out {output.quiet} 2>&1 | tee {log} >&2"

    rule calibrate_service:
        input:
            binaries=layout.binary_paths(),
            images=PLATFORM.images(),
            clusters=pilot_cluster_inputs,
        output:
            pilot=layout.PILOT,
        log:
            layout.PILOT_LOG,
        priority: PLAN.calibration_priority
        resources:
            experiment_slot=1,
        params:
            spec=pilot_spec,
            binaries=binary_args,
            node_cpus=node_cpus_arg,
            runtime=DESIGN.runtime,
            seed=DESIGN.seed,
            backend=backend_settings_arg,
        shell:
            "throttlelab calibrate service --backend {wildcards.backend} --experiment {wildcards.experiment}"
            " --spec '{params.spec}' --runtime {params.runtime} --seed {params.seed} {params.node_cpus}"
            " {params.binaries} {params.backend} --out {output.pilot} 2>&1 | tee {log} >&2"

    rule run_experiment:
        input:
            binaries=layout.binary_paths(),
            images=PLATFORM.images(),
            clusters=cluster_inputs,
            pilot=pilot_input,
            quiet=quiet_input,
        output:
            raw=layout.RAW_LOG,
        log:
            layout.RUN_LOG,
        priority: run_priority
        resources:
            experiment_slot=1,
        params:
            spec=variant_spec,
            binaries=binary_args,
            node_cpus=node_cpus_arg,
            runtime=DESIGN.runtime,
            seed=DESIGN.seed,
            backend=backend_settings_arg,
            max_other_share=DESIGN.disturbance["max_other_share"],
            retries=DESIGN.disturbance["retries"],
            calibration=calibration_args,
        shell:
            "throttlelab run --backend {wildcards.backend} --experiment {wildcards.experiment}"
            " --variant {wildcards.variant} --repeat {wildcards.rep} --spec '{params.spec}'"
            " --runtime {params.runtime} --seed {params.seed} {params.node_cpus} {params.binaries} {params.backend}"
            " --max-other-share {params.max_other_share} --retries {params.retries} {params.calibration}"
            " --out {output.raw} 2>&1 | tee {log} >&2"

    # An experiment measured in two stages (its profile's first_look, docs/STATISTICS.md §6): the first look
    # judges the first stage's runs at its own level and writes whether the rest are measured. A checkpoint:
    # the rules that read the raw logs list the second stage only once it is written (rules/common.smk).
    checkpoint look:
        input:
            raw=look_input,
        output:
            look=layout.LOOK,
        log:
            layout.LOOK_LOG,
        priority: look_priority
        params:
            fraction=look_fraction,
            confidence=DESIGN.confidence,
            left_out=PLAN.left_out_arg(),
        shell:
            "throttlelab look --experiment {wildcards.experiment} --raw {input.raw} --fraction {params.fraction}"
            " --confidence {params.confidence} --left-out {params.left_out} --out {output.look} 2>&1 | tee {log} >&2"

else:
    # The vm backend: one job per experiment, all its variants and repeats in ONE guest
    # (throttlelab/experiments/batch.py), so a boot is paid per experiment, not per run; the
    # variants' parameters are a param, so editing one reruns its experiment's batch only.
    for _experiment in DESIGN.experiments:

        rule:
            name:
                f"run_batch_{_experiment}"
            input:
                binaries=layout.binary_paths(),
                images=PLATFORM.images(),  # vm: {kubernetes: true}: the real node's images and cluster tools
            output:
                raw=PLAN.raw_logs(_experiment),
            log:
                layout.BATCH_LOG.format(backend="vm", experiment=_experiment),
            resources:
                experiment_slot=1,
            params:
                experiment=_experiment,
                plan=PLAN.batch_plan(_experiment),
                vm=PLATFORM.vm_settings_arg(),
            shell:
                f"throttlelab vm-batch --experiment {{params.experiment}} --results {layout.backend_dir('vm')}"
                " --vm {params.vm} --plan {params.plan} 2>&1 | tee {log} >&2"


for _experiment in DESIGN.experiments:

    rule:
        name:
            f"raw_{_experiment}"
        input:
            lambda wildcards, experiment=_experiment: experiment_raw_logs(experiment),


rule raw:
    input:
        raw=raw_logs,
        looks=LOOK_FILES,


# Before any job runs (never on a dry run): what the jobs about to run need from this host, for every
# backend (throttlelab/experiments/preflight.py); stops at once with everything that is missing.
onstart:
    backend_preflight()
