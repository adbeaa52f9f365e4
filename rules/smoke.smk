# The smallest real-cluster smoke test, kind and kubernetes backends (docs/KIND_SMOKE.md):
# `snakemake --cores 1 smoke --config backend=kind`. Two pods read back at every level, a
# throttled burst, two scrapes of the kubelet's cAdvisor, one load run by pod IP, a pin and
# its restore, nothing left; `throttlelab smoke` (throttlelab/experiments/smoke.py) runs them
# through the backend interface. It drives the host's Docker engine and a cluster: no conda env.


rule smoke:
    input:
        clusters=smoke_inputs,
    output:
        report=layout.SMOKE_REPORT.format(backend=BACKEND),
    log:
        layout.SMOKE_LOG.format(backend=BACKEND),
    resources:
        experiment_slot=1,
    params:
        backend=BACKEND,
        settings=backend_settings_arg,
        runtime=DESIGN.runtime,
    shell:
        "throttlelab smoke --backend {params.backend} {params.settings} --runtime {params.runtime}"
        " --out {output.report} 2>&1 | tee {log} >&2"
