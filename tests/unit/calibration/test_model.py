"""The decision's models and thresholds: fitted, chosen for a target, stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kefu.calibration.model import Calibration, Logistic, Point, Stage, point_at
from kefu.calibration.prior import load_prior


def test_a_logistic_model_learns_which_side_is_right() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(400, 2))
    labels = x[:, 0] + 0.05 * rng.normal(size=400) > 0.5  # the second feature is noise
    model = Logistic.fit(x, labels)
    low, high = model.probability(np.array([[0.1, 0.5], [0.9, 0.5]]))
    assert low < 0.1
    assert high > 0.9
    assert abs(model.weights[0]) > 5 * abs(model.weights[1])


def test_a_feature_is_never_weighed_against_its_sign() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=(400, 3))
    # In this sample the third feature (say, a word the knowledge base never uses)
    # goes with right answers; its sign says it may only lower P(right).
    labels = x[:, 0] + 0.5 * x[:, 2] + 0.05 * rng.normal(size=400) > 0.75
    free = Logistic.fit(x, labels)
    assert free.weights[2] > 0
    signed = Logistic.fit(x, labels, signs=(+1, 0, -1))
    assert signed.weights[2] == 0.0  # left out, the others fitted again
    assert signed.weights[0] > 0
    assert signed.weights[1] != 0.0  # a feature without a sign is fitted as before
    # A sign its best weight agrees with changes nothing.
    assert Logistic.fit(x, labels, signs=(+1, 0, +1)) == free


def test_the_highest_probability_bounds_every_value_of_the_unread_features() -> None:
    rng = np.random.default_rng(2)
    bounds = ((0.0, 1.0), (0.0, 3.0), (0.0, 1.0))
    for _ in range(50):
        weights = tuple(map(float, rng.normal(size=5)))
        # A fitted scale is positive; one of either sign checks the bound goes by w / scale.
        scales = rng.choice([-1.0, 1.0], 5) * rng.uniform(0.1, 2, 5)
        model = Logistic((0.3,) * 5, tuple(map(float, scales)), weights, 0.2)
        known = tuple(map(float, rng.uniform(0, 1, 2)))
        highest = model.highest(known, bounds)
        unread = rng.uniform([0, 0, 0], [1, 3, 1], size=(200, 3))
        corners = np.array([[a, b, c] for a in (0, 1) for b in (0, 3) for c in (0, 1)])
        for rest in (*unread, *corners):
            assert model.probability((*known, *rest))[0] <= highest + 1e-12
        # and it is reached, at a corner
        assert max(model.probability((*known, *c))[0] for c in corners) == highest


def test_the_operating_point_serves_where_p_reaches_the_target() -> None:
    # First look: three right at 0.97, one wrong at 0.9; second look: what the first
    # declines, one right at 0.96 and one wrong at 0.6.
    first = Stage(np.array([0.97, 0.97, 0.97, 0.9, -1.0, -1.0]), np.array([1, 1, 1, 0, 0, 0], bool))
    second = Stage(np.array([0.5, 0.5, 0.5, 0.5, 0.96, 0.6]), np.array([1, 1, 1, 0, 1, 0], bool))
    point = point_at(first, second, answerable=5, target=0.95)
    assert (point.first, point.second) == (0.95, 0.95)
    assert (point.served, point.precision, point.coverage) == (4, 1.0, 4 / 5)
    loose = point_at(first, second, answerable=5, target=0.55)
    assert (loose.served, loose.precision) == (6, 4 / 6)
    never = point_at(first, second, answerable=5, target=0.99)
    assert (never.served, never.precision, never.coverage) == (0, 1.0, 0.0)


def test_a_calibration_is_stored_and_read_back(tmp_path: Path) -> None:
    model = Logistic((0.5,), (0.2,), (3.0,), -1.0)
    point = Point(0.7, 0.7, 0.96, 0.5, 10)
    elsewhere = {"precision": 0.95, "coverage": 0.3}
    calibration = Calibration("abc", 0.95, model, None, point, (point,), {"reworded": 3}, elsewhere)
    path = tmp_path / "calibration.json"
    calibration.save(path)
    assert Calibration.load(path) == calibration
    assert calibration.first_serves([0.9])[0]
    assert not calibration.second_serves([0.9])[0]  # no second model: never serves
    path.write_text("{torn", encoding="utf-8")
    assert Calibration.load(path) is None
    assert Calibration.load(tmp_path / "missing.json") is None


def test_a_calibration_of_another_method_is_fitted_again(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    model = Logistic((0.5,), (0.2,), (3.0,), -1.0)
    point = Point(0.7, 0.7, 0.96, 0.5, 10)
    Calibration("abc", 0.95, model, model, point, (point,), method="probes-0").save(path)
    assert Calibration.load(path) is None


def test_the_shipped_prior_weighs_the_looks_and_says_what_it_kept_elsewhere() -> None:
    prior = load_prior()
    assert len(prior.first.weights) == 11  # score, lead, lexical, dense + 7 findings
    # cosine, lead, lead over passages, the answer's cosine, lead and whether it leads + 7
    assert len(prior.second.weights) == 13
    assert "dev.csv" in prior.fitted_on
    at_95 = prior.measured_elsewhere(0.95)
    assert at_95 is not None
    assert 0.9 <= at_95.precision <= 1.0
    assert 0 < at_95.coverage < 1
    assert prior.measured_elsewhere(0.123) is None
    # A higher promised precision never serves more.
    served = [point.served for point in prior.elsewhere]
    assert served == sorted(served, reverse=True)
