# Stage 4: fit every calibrator a run's studies ask for, on its validation logits, and
# measure each on the test logits. Reads logits.npz only: calibration never retrains.
# One job per run (not per calibrator): each job pays a torch import, which would dominate
# the default config's budget at one job per (run, calibrator).


rule calibrate:
    input:
        logits=paths.run_file(RUN, paths.LOGITS),
    output:
        **kept(
            params=f"{paths.calibration_dir(RUN)}/{paths.CALIBRATION_PARAMS}",
            metrics=f"{paths.calibration_dir(RUN)}/{paths.METRICS}",
        ),
    log:
        paths.log("calibrate", RUN),
    benchmark:
        paths.benchmark("calibrate", RUN)
    wildcard_constraints:
        dataset=LOGITS_DATASETS,
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
