"""The pipeline room: loading a pipeline file, finding its steps, and their declarations."""

from twicerun.pipeline.declarations import StepDeclaration, declaration_of, step
from twicerun.pipeline.loader import Pipeline, Step, load_pipeline

__all__ = ["Pipeline", "Step", "StepDeclaration", "declaration_of", "load_pipeline", "step"]
