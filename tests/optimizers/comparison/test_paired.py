import pytest

from memtrace_opt.optimizers.comparison.paired import paired_delta, sign_test


def test_sign_test_exact_values() -> None:
    assert sign_test(6, 0) == pytest.approx(2 / 64)  # six fixed, none broken: the fewest for p < 0.05
    assert sign_test(0, 6) == sign_test(6, 0)
    assert sign_test(5, 1) == pytest.approx(2 * 7 / 64)
    assert sign_test(1, 0) == 1.0 and sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    with pytest.raises(ValueError):
        sign_test(-1, 2)


def test_paired_delta_names_fixed_and_broken_questions() -> None:
    before = {"a": False, "b": True, "c": True, "d": False, "only-before": True}
    after = {"a": True, "b": False, "c": True, "d": False, "only-after": False}
    paired = paired_delta(before, after)
    assert paired.n == 4 and paired.fixed == ("a",) and paired.broken == ("b",)
    assert paired.delta == 0.0 and paired.low < 0 < paired.high and paired.p_value == 1.0


def test_two_more_right_in_twenty_is_not_told_from_noise() -> None:
    before = {f"q{i}": i < 5 for i in range(20)}
    after = {f"q{i}": i < 7 for i in range(20)}  # +10 points: two fixed, none broken
    paired = paired_delta(before, after)
    assert paired.delta == pytest.approx(0.10) and len(paired.fixed) == 2
    assert paired.low == 0.0 and paired.high > 0.10 and paired.p_value == 0.5
    assert paired == paired_delta(before, after)  # seeded: the same interval every time
    assert paired.cells() == ("+2 / -0", f"[+0, {paired.high * 100:+.0f}] p=0.50")


def test_a_change_on_every_question_has_a_zero_width_interval() -> None:
    before = {f"q{i}": False for i in range(12)}
    paired = paired_delta(before, {q: True for q in before})
    assert (paired.low, paired.delta, paired.high) == (1.0, 1.0, 1.0)
    assert paired.p_value == pytest.approx(2 / 2 ** 12)
    assert paired_delta({}, {}).n == 0
    with pytest.raises(ValueError):
        paired_delta(before, before, level=1.5)
