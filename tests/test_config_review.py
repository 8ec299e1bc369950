"""The review, speed and tracker settings: defaults, every source, and values that cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import ConfigError


def _load(tmp_path: Path, text: str = "", env: dict | None = None):
    config = tmp_path / "c.yaml"
    config.write_text(text)
    return load_settings({"root": "sandbox", "state_dir": str(tmp_path)}, config_path=config,
                         env=env or {}, cwd=tmp_path)  # fmt: skip


def test_defaults_and_where_they_come_from(tmp_path):
    review = _load(tmp_path).review
    assert (review.disable, review.speed_threshold, review.speed_min_nights) == ((), 1.10, 3)
    assert review.tracker_max_requests == 250 and "module: mps" in review.tracker_query
    settings = _load(tmp_path, "speed:\n  threshold: 1.25\nreview:\n  disable: [fast-math]\n",
                     env={"MPS_PIPELINE_TRACKER_MAX_REQUESTS": "40"})  # fmt: skip
    assert settings.review.speed_threshold == 1.25
    assert settings.review.disable == ("fast-math",)
    assert settings.review.tracker_max_requests == 40
    assert settings.sources["tracker.max_requests"].origin == "MPS_PIPELINE_TRACKER_MAX_REQUESTS"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("speed:\n  threshold: 0.9\n", "'speed.threshold' .*: must be a ratio of at least 1.0"),
        ("speed:\n  min_nights: 1\n", "'speed.min_nights' .*: must be at least 2"),
        ("tracker:\n  max_requests: 0\n", "'tracker.max_requests' .*: must be at least 1"),
        ("review:\n  disable: [3]\n", "'review.disable' .*: must list review check ids"),
        ("review:\n  disabled: []\n", "did you mean 'review.disable'"),
    ],
)
def test_values_that_cannot_work_are_refused(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)
