"""twicerun: repeat a DuckDB pipeline on identical input and measure, per step, how often its
answer changed.

A pipeline file needs nothing from this package unless it declares something about a
step, in which case it writes `from twicerun import step`.
"""

from twicerun._version import __version__ as __version__
from twicerun.errors import InvalidStep as InvalidStep
from twicerun.pipeline.declarations import step as step

__all__ = ["InvalidStep", "__version__", "step"]
