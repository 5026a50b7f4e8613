# One run rule per app, made from the app registry (scalestudy.apps.registry.APPS): every point of
# every app is the same job, `python -m scalestudy run-point`, below once. What differs
# per app is only which studies it matches, its conda environment (apps/<pkg>/env.yaml), the
# site modules of the cluster file's `app_modules.<app>`, and its made inputs.
# The results directory, cluster and interpreter are written into the command, not made
# params: params are a rerun trigger, and only the point's definition may rerun it.
RUN_POINT_SHELL = (
    job_shell("scalestudy run-point") + " --point {params.point:q} --walltime-s {resources.walltime_s}"
    f" --cluster {shell_word(CLUSTER.name)} --queue {{resources.queue:q}} --results-dir {shell_word(LAYOUT.results)}"
    " --metrics {output.metrics:q} --log {log:q}"
    f" --order-seed {STUDY.settings.order_seed:d}"
)


rule keep_record:
    # Before a changed (or retried) point reruns: its record, log and launch script are copied to
    # history/<tag>/ with definition.json, the definition they measured (scalestudy/results/
    # history.py). The note is an input of the point's run job, so the point reruns after it,
    # with or without metadata.
    output:
        LAYOUT.kept("{study}", "{point}", "{tag}"),
    log:
        LAYOUT.kept("{study}", "{point}", "{tag}", KEEP_LOG),
    wildcard_constraints:
        tag="[^/]+",
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        history.keep(output[0], PLAN.point(wildcards.study, wildcards.point), CLUSTER.name, log[0])


for APP in APPS.values():
    # Where jobs cannot import what the app needs (HOOMD-blue is not on PyPI), its made inputs
    # are not planned, and every point ends `failed` at once with the reason (the runner
    # checks again inside the job).
    APP_MODULES = list(CLUSTER.app_modules.get(APP.name, ()))

    rule:
        name:
            run_rule(APP.name)
        input:
            of_wildcards(run_rules.run_inputs(PLAN, APP)) if RUN.jobs_can_import(APP.python_module, APP_MODULES) else [],
        # launch.sh is written beside metrics.json; one declared output per job keeps big DAGs cheap.
        output:
            metrics=LAYOUT.metrics("{study}", "{point}"),
        log:
            LAYOUT.stdout("{study}", "{point}"),
        # The point's definition, the one param (a change reruns it); the rest of the command
        # is fixed per workflow (python_module_shell).
        params:
            point=point_json,
        wildcard_constraints:
            study=run_rules.study_pattern(PLAN, APP),
        # The run order (seeded, round by round): the ready point of highest priority runs first.
        priority:
            of_wildcards(run_rules.run_priority(PLAN))
        # Points of a pack (a study's `pack:`, each round's) share one batch job on a cluster.
        # Without packs no group: Snakemake would call the function for every job it plans.
        group:
            pack_group if run_rules.packs_any(PLAN) else None
        conda:
            APP.conda_env
        envmodules:
            *APP_MODULES,
        resources:
            **resources_of_wildcards(run_rules.run_resources(PLAN, APP)),
        shell:
            RUN_POINT_SHELL


checkpoint repeats_round:
    # Repeats until clear, in one invocation (`repeats: {min, max, ci}`): after each round of a
    # study's points, the next round is decided from the records made so far; the study's
    # table waits for the round that adds none (planning.tables: aggregate_inputs, write_next_round).
    input:
        round_inputs,
    output:
        LAYOUT.round_file("{study}", "{round}"),
    log:
        LAYOUT.study_log("{study}", "round-{round}"),
    wildcard_constraints:
        round="[1-9][0-9]*",
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        tables.write_next_round(PLAN, wildcards.study, int(wildcards.round), output[0], log[0])
