"""``steinax.sample`` on separated modes (issue 56): from a start that reaches every mode the answer is right or
``ok=False``, every time; from any start the message says what the warm start searched. The five cases and the rule
are those of ``experiments/trust/separated_modes.py`` (its rows are run here)."""

import pytest
from experiment_loader import load

experiment = load("trust/separated_modes.py")

CASES = [("half", 0), ("half", 1), ("tenth", 0), ("tenth", 1), ("three", 0)]


@pytest.mark.slow  # ten sample calls, about 1 min: CI's slow pass
@pytest.mark.parametrize("name, seed", CASES)
@pytest.mark.parametrize("spread", [1.0, 10.0])
def test_right_or_not_ok_and_the_search_is_stated(name, seed, spread):
    row = experiment.run_case(name, seed, spread)
    assert "L-BFGS starts" in row["message"] and "a mode no start reached is unseen" in row["message"]
    if spread >= 10.0:  # every mode is within the search's reach: every optimum found, the answer right
        assert row["optima"] == len(experiment.CASES[name][1])
        assert row["ok"] and row["right"], row
