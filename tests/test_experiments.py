"""Every experiment script runs end to end in a tiny setting (they must not rot).

Each script's ``main(argv)`` is called with small sizes and ``--out`` in a temporary folder;
the test checks that it wrote its CSV (and figure) there. The numbers are not checked here:
the scripts' full runs and their results are in docs/experiments.md.
"""

import os

import matplotlib
import pytest

from experiment_loader import load
from steinax.datasets import DatasetNotFoundError

matplotlib.use("Agg")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments")

TINY = {
    "blr/accuracy_vs_iteration.py": ["--dataset", "pima", "--splits", "1", "--checkpoints", "2", "4", "--particles", "5"],
    "bnn/sgld_step_grid.py": ["--step-sizes", "1e-5", "--splits", "100", "--steps", "20", "--methods", "sgld"],
    "bnn/boston_gap.py": ["--splits", "1", "--checkpoints", "2", "4", "--particles", "4"],
    "diagnostics/control_variates_coverage.py": ["--reps", "2", "--draws", "120", "--targets", "skewed_t5", "beta_binomial"],
    "diagnostics/control_variates_tails.py": ["--reps", "4", "--draws", "124"],
    "diagnostics/control_variates_gamma.py": ["--reps", "3", "--draws", "120"],
    "guides/tuning.py": ["--quick"],
    "diagnostics/compress_biased_chain.py": ["--log4n", "3", "--seeds", "1"],
    "diagnostics/ksdagg_calibration.py": ["--reps", "2", "--power-reps", "2", "--phis", "0.0", "--shifts", "0.3",
                                          "--draws", "100", "--chains", "2", "--bootstrap", "50"],
    "diagnostics/nested_rhat_calibration.py": ["--reps", "2", "--chains", "32", "--draws", "10"],
    "diagnostics/convergence_rule.py": ["--reps", "2", "--chains", "16", "--max-steps", "200", "--d", "2",
                                        "--rho", "0.5"],
    "diagnostics/dependent_bootstrap.py": ["--reps", "2", "--phis", "0.5", "--chains", "2", "--draws", "20", "--bootstrap", "20"],
    "kcc_sd/bnn_map_difference.py": ["--widths", "1", "2", "--trials", "1", "--particles", "4", "--steps", "2"],
    "kcc_sd/cc_svgd_dimension.py": ["--dims", "2", "--trials", "1", "--particles", "10", "--steps", "5"],
    "kcc_sd/discrepancy_dimension.py": ["--dims", "1", "3", "--n", "30", "--seeds", "1"],
    "kcc_sd/exact_samples.py": ["--ns", "20", "40", "--d", "2", "--seeds", "1"],
    "kcc_sd/gof_calibration.py": ["--reps", "2", "--power-reps", "2", "--n", "20", "--d", "2", "--bootstrap", "20", "--shifts", "0.0", "1.0"],
    "kcc_sd/nontight.py": ["--ns", "4", "8", "--d", "2"],
    "kcc_sd/opvi_linear_regression.py": ["--dims", "2", "--iterations", "2", "--samples", "10", "--observations", "20", "--seeds", "1"],
    "kcc_sd/sgld_step_size.py": ["--step-sizes", "1e-5", "--hidden", "2", "--chains", "2", "--burn-in", "10", "--samples", "20", "--keep", "10"],
    "matrix_svgd/logistic_regression.py": ["--dataset", "pima", "--splits", "1", "--checkpoints", "2", "4", "--particles", "4",
                                           "--grid", "0.01", "--psgld-grid", "1e-3"],
    "matrix_svgd/toys.py": ["--seeds", "1", "--steps", "10", "--every", "5", "--grid", "0.3", "--targets", "gmm,sine", "--reference", "100"],
    "mk_svgd/gaussian_2d.py": ["--runs", "1", "--particles", "20", "--steps", "5"],
    "stein_gp/regression.py": ["--datasets", "challenger", "--splits", "2", "--particles", "2", "--steps", "5",
                               "--baseline-steps", "10"],
    "unfold/gmm.py": ["--trials", "2", "--select-trials", "1", "--iterations", "10", "--particles", "10", "--T", "2",
                      "--batch", "2", "--du-epochs", "1", "--cdu-epochs", "1", "--fixed-grid", "1", "--rmsprop-grid", "0.1",
                      "--reference", "50"],
    "stein_gp/regression_levels.py": ["--datasets", "challenger,machine", "--splits", "2", "--steps", "5"],
    "stein_gp/classification.py": ["--datasets", "hepatitis", "--splits", "1", "--particles", "2", "--steps", "5",
                                   "--baseline-steps", "10", "--map-steps", "5", "--nuts-warmup", "5",
                                   "--nuts-samples", "10"],
    "stein_gp/air_quality.py": ["--days", "20", "--inits", "1", "--particles", "20", "--steps", "3", "--inducing", "20",
                                "--batch", "50", "--map-steps", "3", "--nuts-warmup", "3", "--nuts-samples", "5",
                                "--nuts-max-tree-depth", "2", "--grid", "10"],
    "kcc_sd/bnn_search.py": ["--val-seeds", "1", "--test-seeds", "1", "--steps", "5", "--bandwidths", "1",
                             "--rates", "0.01"],
    "kcc_sd/opvi_search.py": ["--dims", "2", "--observations", "100", "--lrs", "0.1", "--samples", "10", "--seeds", "1"],
    "unfold/gmm_ablation.py": ["--quick", "--particles", "10", "--reference", "50", "--T", "2"],
    "unfold/models.py": ["--task", "blr", "--dataset", "pima", "--trials", "1", "--select", "1", "--iterations", "5",
                         "--particles", "5", "--du-epochs", "1", "--cdu-epochs", "1", "--fixed-grid", "1e-5",
                         "--rmsprop-grid", "1e-2", "--test-rows", "50"],
    "posteriors/make_references.py": ["--posteriors", "eight_schools_centered", "--chains", "2",
                                      "--warmup", "50", "--samples", "50"],
    "posteriors/diagnostic_calibration.py": ["--posteriors", "banana", "--subsets", "5"],
    "posteriors/sample_suite.py": ["--posteriors", "banana", "--seeds", "1", "--nuts-seeds", "1", "--in-process",
                                   "--nuts-min-ess", "50", "--nuts-warmup", "100"],
    "posteriors/new_users.py": ["--models", "hills_tfp", "--seeds", "1", "--reference-samples", "200",
                                "--nuts-min-ess", "50"],
    "posteriors/importance_correction.py": ["--posteriors", "banana", "--seeds", "1"],
    "posteriors/compile_share.py": ["--posteriors", "banana"],
    "posteriors/gpu_estimate.py": ["--posteriors", "banana", "--chains", "16"],
    "posteriors/yardstick.py": ["--posteriors", "banana", "--chains", "16", "--steps", "20", "--warmup", "30",
                                "--in-process"],
    "posteriors/straggler_calibration.py": ["--posteriors", "banana", "lake_huron_trend", "--subsets", "5"],
    "trust/cost_ledger.py": ["--posteriors", "eight_schools_noncentered", "--particles", "10"],
    "trust/interrupts.py": ["--times", "2"],
    "trust/known_answers.py": ["--cases", "student_t3"],
    "trust/separated_modes.py": ["--cases", "half:0", "--spreads", "10", "--particles", "20"],
    "posteriors/reparam.py": ["--posteriors", "eight_schools_centered", "--seeds", "0", "--particles", "8",
                              "--max-steps", "50", "--learn-steps", "20"],
    "posteriors/held_out.py": ["--models", "beta_binomial_pareto", "--methods", "svgd", "--particles", "20",
                               "--max-steps", "500", "--nuts-warmup", "50", "--nuts-samples", "50"],
}


def test_every_experiment_has_a_tiny_setting():
    scripts = sorted(
        os.path.relpath(os.path.join(d, f), ROOT)
        for d, _, files in os.walk(ROOT) for f in files if f.endswith(".py") and not f.startswith("_")
    )
    assert scripts == sorted(TINY)


@pytest.mark.slow  # about 2.5 min of CPU in all: run by CI's slow-test step (on two workers)
@pytest.mark.parametrize("script", sorted(TINY))
def test_experiment_runs_tiny(script, tmp_path, capsys):
    module = load(script)
    try:
        module.main(TINY[script] + ["--out", str(tmp_path)])
    except DatasetNotFoundError as exc:  # an optional Debian data package (PM10) that is not installed here
        pytest.skip(str(exc))
    except ImportError as exc:  # the optional extra steinax[compress] (goodpoints), where it could not be built
        if "the steinax `compress` extra" not in str(exc):
            raise
        pytest.skip(str(exc))
    out = capsys.readouterr().out
    assert "==" in out  # the settings banner is printed beside the numbers
    written = os.listdir(tmp_path)
    assert any(f.endswith(".csv") for f in written), written
    assert any(f.endswith(".png") for f in written), written
