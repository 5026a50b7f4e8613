# From metrics.json files to tidy tables. Cheap: always run on the login node.
#
# For `snakemake report` (or --config partial=true) the tables are built from whatever has
# finished, and nothing is submitted: the metrics files are not inputs then (no run job
# enters the DAG); a fingerprint of the finished ones is a param, so each new result
# rebuilds the tables. Points without metrics.json are listed as "not run yet"; the set of
# points is a param too, so a sweep that grows (more repeats) rebuilds them before any result.


rule aggregate:
    input:
        metrics=aggregate_inputs,
    output:
        report(
            LAYOUT.table("{study}", "runs"),
            caption="../report/runs.rst",
            category="{study}",
            subcategory="tables",
        ),
    params:
        finished=finished_fingerprint,
        # The set of points: a grown sweep rebuilds the tables and the report (`report` too).
        points=lambda wildcards: tables.points_digest(PLAN, wildcards.study),
    log:
        LAYOUT.study_log("{study}", "aggregate"),
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.analysis.records import write_runs_table

        write_runs_table(tables.expected_runs(PLAN, wildcards.study), output[0], log[0])


rule scaling:
    input:
        LAYOUT.table("{study}", "runs"),
    output:
        scaling=report(
            LAYOUT.table("{study}", "scaling"),
            caption="../report/scaling.rst",
            category="{study}",
            subcategory="tables",
        ),
        variants=report(
            LAYOUT.table("{study}", "variants"),
            caption="../report/variants-table.rst",
            category="{study}",
            subcategory="tables",
        ),
    params:
        budget_su=lambda wildcards: SETTINGS_OF[wildcards.study].budget_su,
        estimator=lambda wildcards: SETTINGS_OF[wildcards.study].estimator,
        repeats=lambda wildcards: SETTINGS_OF[wildcards.study].repeats_text,
        efficiency_threshold=lambda wildcards: SETTINGS_OF[wildcards.study].efficiency_threshold,
        predict_up_to=lambda wildcards: SETTINGS_OF[wildcards.study].predict_up_to,
    log:
        LAYOUT.study_log("{study}", "scaling"),
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.analysis.study_tables import write_study_tables

        write_study_tables(
            input[0], output.scaling, output.variants, log[0], budget_su=params.budget_su,
            estimator=params.estimator, repeats=params.repeats,
            efficiency_threshold=params.efficiency_threshold, predict_up_to=params.predict_up_to,
        )  # fmt: skip


rule ladder:
    # What a study's node ladders did (`nodes: {from, up_to, ...}`): each rung as judged, why the
    # ladder stopped, the SU it did not spend (planning.tables.ladder_state); after every round.
    input:
        metrics=aggregate_inputs,
    output:
        LAYOUT.ladder_file("{study}"),
    params:
        finished=finished_fingerprint,
        points=lambda wildcards: tables.points_digest(PLAN, wildcards.study),
    log:
        LAYOUT.study_log("{study}", "ladder"),
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        tables.write_ladder(PLAN, wildcards.study, output[0], log[0])
