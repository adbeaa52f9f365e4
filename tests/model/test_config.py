"""The design a config and its profile make (model/config.py): the experiments setting."""

from pathlib import Path

import pytest

from throttlelab.model.config import ConfigError, load_design

CONFIG = Path(__file__).resolve().parents[2] / "config"


def test_the_experiments_setting_keeps_only_those_in_the_profiles_order():
    whole = load_design({"profile": "quick"}, CONFIG)
    some = load_design({"profile": "quick", "experiments": ["X3", "E1"]}, CONFIG)
    assert list(some.experiments) == ["E1", "X3"]
    assert some.experiments["X3"] == whole.experiments["X3"]
    assert load_design({"profile": "quick", "experiments": None}, CONFIG).experiments == whole.experiments


def test_an_experiment_not_in_the_profile_is_named_with_the_ones_that_are():
    with pytest.raises(ConfigError) as err:
        load_design({"profile": "ci", "experiments": ["X2", "X9", "e1"]}, CONFIG)
    message = str(err.value)
    assert message.startswith("config experiments: X9, e1 are not in profile ci.yaml, whose experiments are E1, E2a")
    assert message.endswith("list some of those, or null for all")


@pytest.mark.parametrize("bad", [[], "X2", ["X2", "X2"]])
def test_the_experiments_setting_must_be_a_list_of_distinct_names(bad):
    with pytest.raises(ConfigError, match="experiments"):
        load_design({"profile": "ci", "experiments": bad}, CONFIG)
