# Stage 4 of a translation run (focalcal.pipeline.translation): temperature scaling fitted on
# its validation tokens from token_logits.npz (never the model), beam-search decodes of the
# test set at each of the config's decode_temperatures (one job per run: the model and test set
# are loaded once for the whole grid, which on a CPU is most of a small model's decode), one
# more decode per fitted temperature (BLEU after scaling), and the run's metrics.csv joining
# token metrics and BLEU, read by the study table like any run's.
# None of them is in the run's cluster group: each run's grid and each calibrated decode is a
# submission of its own, so the runs decode in parallel across nodes.

from focalcal.pipeline.translation import calibrated_decodes, grid_decodes

DECODE_TEMPERATURES = [float(t) for t in config["decode_temperatures"]]
CALIBRATOR_KEYS = one_of(key for keys in PLAN.calibrators.values() for key in keys)


rule calibrate_tokens:
    input:
        profile=paths.token_logits(RUN),
    output:
        **kept(
            params=f"{paths.calibration_dir(RUN)}/{paths.CALIBRATION_PARAMS}",
            metrics=f"{paths.calibration_dir(RUN)}/{paths.TOKEN_METRICS}",
            curve=f"{paths.calibration_dir(RUN)}/{paths.TOKEN_CURVE}",
        ),
    log:
        paths.log("calibrate_tokens", RUN),
    benchmark:
        paths.benchmark("calibrate_tokens", RUN)
    wildcard_constraints:
        dataset=TRANSLATION_DATASETS,
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        calibrators=lambda wildcards: PLAN.calibrators[PLAN.run(wildcards).path],
        ece_bins=config["ece_bins"],
        temperatures=DECODE_TEMPERATURES,
    script:
        "../scripts/calibrate_tokens.py"


# The finished run's history.csv (written when training ends) stands for its checkpoint. One
# job decodes the run's whole grid; asking for one temperature's file makes the grid's job.
rule decode:
    input:
        data=ancient(DATA_READY),
        run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        history=paths.run_file(RUN, paths.HISTORY),
    output:
        **kept(
            decodes=[paths.translation_decode(RUN, t) for t in DECODE_TEMPERATURES],
            hypotheses=[
                paths.translation_hypotheses(RUN, t) for t in DECODE_TEMPERATURES
            ],
        ),
    log:
        paths.log("decode", RUN),
    benchmark:
        paths.benchmark("decode", RUN)
    wildcard_constraints:
        dataset=TRANSLATION_DATASETS,
        model=TRAINED_MODELS,
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=run_resource("runtime"),
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
        temperatures=DECODE_TEMPERATURES,
    script:
        "../scripts/decode.py"


rule decode_calibrated:
    input:
        data=ancient(DATA_READY),
        run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        history=paths.run_file(RUN, paths.HISTORY),
        calibration=f"{paths.calibration_dir(RUN)}/{paths.CALIBRATION_PARAMS}",
    output:
        **kept(
            result=paths.calibrated_decode(RUN),
            hypotheses=paths.calibrated_hypotheses(RUN),
        ),
    log:
        paths.log("decode_calibrated", f"{RUN}/{{calibrator}}"),
    benchmark:
        paths.benchmark("decode_calibrated", f"{RUN}/{{calibrator}}")
    wildcard_constraints:
        dataset=TRANSLATION_DATASETS,
        model=TRAINED_MODELS,
        calibrator=CALIBRATOR_KEYS,
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=run_resource("runtime"),
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
    script:
        "../scripts/decode.py"


rule translation_metrics:
    input:
        token_metrics=f"{paths.calibration_dir(RUN)}/{paths.TOKEN_METRICS}",
        curve=f"{paths.calibration_dir(RUN)}/{paths.TOKEN_CURVE}",
        decodes=lambda wildcards: list(
            grid_decodes(PLAN.run(wildcards).path, DECODE_TEMPERATURES).values()
        ),
        calibrated=lambda wildcards: [
            path
            for path in calibrated_decodes(PLAN, PLAN.run(wildcards)).values()
            if path
        ],
    output:
        **kept(
            metrics=f"{paths.calibration_dir(RUN)}/{paths.METRICS}",
            sweep=f"{paths.calibration_dir(RUN)}/{paths.TEMPERATURE_SWEEP}",
        ),
    log:
        paths.log("translation_metrics", RUN),
    wildcard_constraints:
        dataset=TRANSLATION_DATASETS,
    conda:
        "../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        decodes=lambda wildcards: grid_decodes(
            PLAN.run(wildcards).path, DECODE_TEMPERATURES
        ),
        calibrated=lambda wildcards: calibrated_decodes(PLAN, PLAN.run(wildcards)),
    script:
        "../scripts/translation_metrics.py"
