"""pipeline/heap.py: the collector is paused inside, and left as it was found."""

from __future__ import annotations

import gc

import pytest

from pipeline.heap import collector_paused


def test_the_collector_is_off_inside_and_on_again_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("a reader's bug")
    assert gc.isenabled()


def test_a_caller_that_had_it_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
