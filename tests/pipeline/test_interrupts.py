"""Ctrl-C during ``steinax.sample`` (issue 56): at any time, in any stage (compilations included), the process raises
:class:`~steinax.pipeline.SampleInterrupted` carrying what was done, ``ok=False``, and exits normally. The processes
and the rule are those of ``experiments/trust/interrupts.py`` (20 times there; 5 here)."""

import pytest
from experiment_loader import load

experiment = load("trust/interrupts.py")


@pytest.mark.slow  # six fresh processes of about 15 s each
def test_sigint_at_five_random_times_gives_a_partial_result(tmp_path):
    assert experiment.main(["--times", "5", "--seed", "1", "--workers", "1", "--out", str(tmp_path)]) == 0


def test_the_rule_reads_a_process_report():
    good = {"returncode": 0, "kind": "SampleInterrupted", "ok": False, "finite": True, "draws": [100, 2]}
    assert experiment.passed(good)
    assert not experiment.passed({**good, "returncode": -11})  # died of SIGSEGV
    assert not experiment.passed({**good, "kind": "KeyboardInterrupt"})  # a bare one: nothing kept
    assert not experiment.passed({**good, "ok": True})
