# Stage 4: fit every calibrator a run's studies ask for, on its validation logits, and
# measure each on the test logits. Reads logits.npz only: calibration never retrains.
# One job per run (not per calibrator): each job pays a torch import, which would dominate
# the default config's budget at one job per (run, calibrator).


rule calibrate:
    input:
        logits=f"results/runs/{RUN}/logits.npz",
    output:
        params=f"results/calibration/{RUN}/calibration.json",
        metrics=f"results/calibration/{RUN}/metrics.csv",
    log:
        f"results/logs/calibrate/{RUN}.log",
    benchmark:
        f"results/benchmarks/calibrate/{RUN}.tsv"
    group:
        RUN_GROUP
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
        gres=run_resource("gres"),  # the same as its group's training job (runs sharing a GPU)
    params:
        calibrators=lambda wildcards: PLAN.calibrators[PLAN.run(wildcards).path],
        ece_bins=config["ece_bins"],
    script:
        "../scripts/calibrate.py"
