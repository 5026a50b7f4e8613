# LitGPT fine-tuning: one job per point, and (local study only) the offline
# stand-ins for Llama-2-7b and its data.


rule litgpt_tiny_assets:
    output:
        weights=f"{RESULTS}/assets/litgpt-tiny/checkpoint/lit_model.pth",
        config=f"{RESULTS}/assets/litgpt-tiny/checkpoint/model_config.yaml",
        tokenizer=f"{RESULTS}/assets/litgpt-tiny/checkpoint/tokenizer.json",
        tokenizer_config=f"{RESULTS}/assets/litgpt-tiny/checkpoint/tokenizer_config.json",
        data=f"{RESULTS}/assets/litgpt-tiny/alpaca.json",
    params:
        shape=config.get("assets", {}).get("litgpt_tiny", {}),
    log:
        f"{RESULTS}/assets/litgpt-tiny/make.log",
    localrule: True
    run:
        from scalestudy.apps.litgpt_assets import make_tiny_assets_from_config

        make_tiny_assets_from_config(output, params.shape, log[0])


rule run_litgpt:
    input:
        run_inputs("litgpt"),
    # launch.sh is written beside metrics.json; one declared output per job keeps big DAGs cheap.
    output:
        metrics=f"{RUN_DIR}/metrics.json",
    log:
        f"{RUN_DIR}/stdout.log",
    params:
        point=point_json,
        cluster=CLUSTER.name,
        package=PACKAGE_DIR,
        python=job_python(),
    wildcard_constraints:
        study=study_pattern("litgpt"),
    conda:
        "../../envs/litgpt.yaml"
    resources:
        **RUN_RESOURCES,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy run-point"
        " --point {params.point:q} --walltime-s {resources.walltime_s} --cluster {params.cluster:q}"
        " --queue {resources.queue:q}"
        " --metrics {output.metrics:q} --log {log:q}"
