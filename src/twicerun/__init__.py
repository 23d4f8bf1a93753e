"""twicerun: run a batch pipeline several times and report, per step, how often it disagreed
with itself.

A pipeline file needs nothing from this package unless it declares something about a
step, in which case it writes `from twicerun import step`.
"""

from twicerun.errors import InvalidStep as InvalidStep
from twicerun.pipeline.declarations import step as step

__version__ = "0.1.0"

__all__ = ["InvalidStep", "__version__", "step"]
