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


def _quick_with(tmp_path, line: str, replacement: str) -> Path:
    """The quick profile with one of its lines replaced, as mine.yaml."""
    text = (CONFIG / "profiles" / "quick.yaml").read_text()
    assert line in text
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace(line, replacement))
    return path


def _profile_with(tmp_path, variant_repeats: str) -> Path:
    line = "    variant_repeats: {nolimit: 5, limit2: 6, limit1: 6, limit1-2threads: 6}\n"
    return _quick_with(tmp_path, line, variant_repeats)


def test_a_variant_repeats_name_that_is_no_variant_is_named_with_the_variants(tmp_path):
    path = _profile_with(tmp_path, "    variant_repeats: {nolimit: 5, limit3: 6}\n")
    with pytest.raises(ConfigError) as err:
        load_design({"profile": str(path)}, CONFIG)
    assert str(err.value) == (
        "profile mine.yaml: experiments.E2a.variant_repeats: limit3 is not a variant of E2a; "
        "name some of nolimit, limit2, limit1, limit500m, limit1-2threads"
    )


def test_variant_repeats_below_one_are_refused_by_the_schema(tmp_path):
    path = _profile_with(tmp_path, "    variant_repeats: {nolimit: 0}\n")
    with pytest.raises(ConfigError, match="variant_repeats"):
        load_design({"profile": str(path)}, CONFIG)


def test_without_variant_repeats_every_variant_runs_the_experiments_repeats(tmp_path):
    exp = load_design({"profile": str(_profile_with(tmp_path, ""))}, CONFIG).experiments["E2a"]
    assert {exp.repeats_of(v) for v in exp.variants} == {exp.repeats} == {10}


def _quick_with_x6_look(tmp_path, first_look: str) -> Path:
    line = "    variant_repeats: {closed-500m-g2: 5, closed-500m-g1: 5}\n    first_look: 5\n"
    return _quick_with(tmp_path, line, line.replace("first_look: 5", first_look))


def test_a_first_look_splits_every_variants_repeats_in_two_stages(tmp_path):
    exp = load_design({"profile": "quick"}, CONFIG).experiments["X6"]
    first, second = exp.runs(1), exp.runs(2)
    assert sorted(first + second) == sorted(exp.runs()) and not set(first) & set(second)
    assert {r for _, r in first} == set(range(5)) and {r for _, r in second} == set(range(5, 9))
    # the closed-loop arms' 5 repeats all fall in the first stage
    assert not [v for v, _ in second if v.startswith("closed")]
    assert exp.look_fraction == pytest.approx(5 / 9)


def test_without_a_first_look_every_run_is_in_the_first_stage(tmp_path):
    exp = load_design({"profile": str(_quick_with_x6_look(tmp_path, ""))}, CONFIG).experiments["X6"]
    assert exp.first_look is None and exp.runs(1) == exp.runs() and exp.runs(2) == []
    assert exp.look_fraction == 1.0


def test_a_first_look_at_or_past_the_most_repeated_variant_is_named_with_the_fix(tmp_path):
    path = _quick_with_x6_look(tmp_path, "first_look: 9")
    with pytest.raises(ConfigError) as err:
        load_design({"profile": str(path)}, CONFIG)
    assert str(err.value) == (
        "profile mine.yaml: experiments.X6.first_look: 9 is not below the 9 repeats of its most repeated variant; "
        "give a smaller number, or leave first_look out for one look after every run"
    )


def test_a_first_look_below_two_is_refused_by_the_schema(tmp_path):
    with pytest.raises(ConfigError, match="first_look"):
        load_design({"profile": str(_quick_with_x6_look(tmp_path, "first_look: 1"))}, CONFIG)


def test_repeats_set_on_the_command_line_measure_in_one_stage():
    design = load_design({"profile": "quick", "repeats": 3}, CONFIG)
    assert all(exp.first_look is None for exp in design.experiments.values())
