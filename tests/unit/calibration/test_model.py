"""The decision's models and thresholds: fitted, chosen for a target, stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kefu.calibration.model import NEVER, Calibration, Logistic, Point, Stage, operating_point


def test_a_logistic_model_learns_which_side_is_right() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(400, 2))
    labels = x[:, 0] + 0.05 * rng.normal(size=400) > 0.5  # the second feature is noise
    model = Logistic.fit(x, labels)
    low, high = model.probability(np.array([[0.1, 0.5], [0.9, 0.5]]))
    assert low < 0.1
    assert high > 0.9
    assert abs(model.weights[0]) > 5 * abs(model.weights[1])


def test_the_operating_point_serves_the_most_at_the_target_precision() -> None:
    # First look: three right at 0.9, one wrong at 0.8; second look: what the first
    # declines, one right at 0.7 and one wrong at 0.6.
    first = Stage(np.array([0.9, 0.9, 0.9, 0.8, -1.0, -1.0]), np.array([1, 1, 1, 0, 0, 0], bool))
    second = Stage(np.array([0.5, 0.5, 0.5, 0.5, 0.7, 0.6]), np.array([1, 1, 1, 0, 1, 0], bool))
    point = operating_point(first, second, answerable=5, target=0.95)
    assert point.precision == 1.0
    assert point.coverage == 4 / 5  # 0.9s by the first look, the 0.7 by the second
    assert 0.8 < point.first <= 0.9
    assert 0.6 < point.second <= 0.7
    loose = operating_point(first, second, answerable=5, target=0.6)
    assert loose.served == 6
    assert loose.precision == 4 / 6


def test_a_target_no_threshold_reaches_serves_nothing() -> None:
    # The most probable candidate is wrong: any threshold that serves serves it.
    stage = Stage(np.array([0.9, 0.8]), np.array([False, True]))
    point = operating_point(stage, None, answerable=1, target=0.99)
    assert (point.first, point.served, point.coverage) == (NEVER, 0, 0.0)


def test_a_calibration_is_stored_and_read_back(tmp_path: Path) -> None:
    model = Logistic((0.5,), (0.2,), (3.0,), -1.0)
    point = Point(0.7, NEVER, 0.96, 0.5, 10)
    calibration = Calibration("abc", 0.95, model, None, point, (point,), {"reworded": 3})
    path = tmp_path / "calibration.json"
    calibration.save(path)
    assert Calibration.load(path) == calibration
    assert calibration.first_serves([0.9])[0]
    assert not calibration.second_serves([0.9])[0]  # no second model: never serves
    path.write_text("{torn", encoding="utf-8")
    assert Calibration.load(path) is None
    assert Calibration.load(tmp_path / "missing.json") is None
