# From metrics.json files to tidy tables. Cheap: always run on the login node.
#
# With --config partial=true the tables are built from whatever has finished, and
# nothing is submitted: the metrics files are not inputs then (no run job enters
# the DAG); a fingerprint of the finished ones is a param, so each new result
# rebuilds the tables. Points without metrics.json are listed as "not run yet".


rule aggregate:
    input:
        metrics=[] if PARTIAL else run_metrics,
    output:
        report(
            f"{RESULTS}/{{study}}/runs.csv",
            caption="../report/runs.rst",
            category="{study}",
            subcategory="tables",
        ),
    params:
        finished=finished_fingerprint if PARTIAL else "",
    log:
        f"{RESULTS}/{{study}}/logs/aggregate.log",
    localrule: True
    run:
        from scalestudy.analysis import aggregate, write_table

        write_table(aggregate([], expected=expected_runs(wildcards.study)), output[0])


rule scaling:
    input:
        f"{RESULTS}/{{study}}/runs.csv",
    output:
        scaling=report(
            f"{RESULTS}/{{study}}/scaling.csv",
            caption="../report/scaling.rst",
            category="{study}",
            subcategory="tables",
        ),
        variants=report(
            f"{RESULTS}/{{study}}/variants.csv",
            caption="../report/variants-table.rst",
            category="{study}",
            subcategory="tables",
        ),
    params:
        budget_su=lambda wildcards: SWEEP.studies[wildcards.study].get("budget_su"),
    log:
        f"{RESULTS}/{{study}}/logs/scaling.log",
    localrule: True
    run:
        from scalestudy.analysis import read_table, scaling, variants, write_table

        table = scaling(read_table(input[0]), budget_su=params.budget_su)
        write_table(table, output.scaling)
        write_table(variants(table), output.variants)
