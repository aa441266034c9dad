# Stage 3-4 for segmentation runs (hossain2021): a trained run's test-fold scores (IoU,
# Hausdorff distance, pixel accuracy, pixel ECE), a few test images with their masks for the
# qualitative figure, and the run's record (run.json: device, time, versions) for the run
# inventory. The training job stages them; this job publishes them, or evaluates from the
# checkpoint when they are missing or stale. Segmentation runs are evaluated, not calibrated;
# deleting a run's evaluation re-makes it without retraining.

from focalcal.pipeline.plan import segmentation_bins


rule evaluate_segmentation:
    input:
        data=ancient(DATA_READY),
        run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        history=paths.run_file(RUN, paths.HISTORY),
    output:
        **kept(
            metrics=f"{paths.evaluation_dir(RUN)}/{paths.METRICS}",
            samples=f"{paths.evaluation_dir(RUN)}/{paths.SAMPLES}",
            info=f"{paths.evaluation_dir(RUN)}/{paths.RUN_INFO}",
        ),
    log:
        paths.log("evaluate_segmentation", RUN),
    benchmark:
        paths.benchmark("evaluate_segmentation", RUN)
    wildcard_constraints:
        model=TRAINED_MODELS,
    group:
        RUN_GROUP
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=30,
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
        n_bins=segmentation_bins(config),
    script:
        "../scripts/evaluate_segmentation.py"
