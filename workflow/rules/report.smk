# Plots per study and the one HTML page over all studies.


rule plots:
    input:
        f"{RESULTS}/{{study}}/scaling.csv",
    output:
        metric=report(
            f"{RESULTS}/report/plots/{{study}}.metric.png",
            caption="../report/metric.rst",
            category="{study}",
            subcategory="plots",
        ),
        speedup=report(
            f"{RESULTS}/report/plots/{{study}}.speedup.png",
            caption="../report/speedup.rst",
            category="{study}",
            subcategory="plots",
        ),
        efficiency=report(
            f"{RESULTS}/report/plots/{{study}}.efficiency.png",
            caption="../report/efficiency.rst",
            category="{study}",
            subcategory="plots",
        ),
    log:
        f"{RESULTS}/{{study}}/logs/plots.log",
    localrule: True
    run:
        from scalestudy.analysis import read_table
        from scalestudy.plots import plot_study

        plot_study(read_table(input[0]), wildcards.study, dict(output))


rule report:
    input:
        runs=expand(f"{RESULTS}/{{study}}/runs.csv", study=STUDIES),
        scaling=expand(f"{RESULTS}/{{study}}/scaling.csv", study=STUDIES),
        plots=expand(f"{RESULTS}/report/plots/{{study}}.{{kind}}.png", study=STUDIES, kind=PLOT_KINDS),
    output:
        REPORT_HTML,
    log:
        f"{RESULTS}/report/report.log",
    localrule: True
    run:
        from scalestudy.report import build_from_files

        build_from_files(STUDIES, input.runs, input.scaling, input.plots, output[0])
