"""The timeline is ``kefu.observe.timeline``; benchmarks/fast_path.py still imports
STAGE_OF_MARK from here (drop this module once it imports it from there)."""

from kefu.observe.timeline import STAGE_OF_MARK

__all__ = ["STAGE_OF_MARK"]
