"""Recipes: the phases of an end-to-end experiment and the two commands that compose them.

    phases.py    sft, rl, eval, report: one function each, explicit inputs and outputs; what
                 differs per environment (its tasks, demos, env.* keys, defaults) is its
                 RecipeSpec (``env_recipe(demo.env)``: envs/<name>/recipe.py, from its
                 EnvSpec); ``PhaseLog`` (RUN/pipeline.json) records
                 finished phases so a rerun skips them and resumes the RL run from its last
                 checkpoint
    recipe_config.py  the recipes' settings: DemoConfig (the env-neutral ``demo.<key>``),
                 CompareConfig; ``settings_class`` joins an environment's own ``demo.<key>``
                 (its RecipeSpec.settings, e.g. the generated games' size); the
                 ``--methods`` / ``--seeds`` parsers (parse_method, parse_methods)
    overrides.py the override routing (demo.*, sft.*, trainer keys) and ``PipelinePlan``,
                 read through the one settings engine (sharpo_train/settings/loader.py)
    demo.py      `sharpo demo`:    games|goals -> demos -> sft -> eval -> rl -> eval -> report
    compare.py   `sharpo compare`: one warm start, then every method x seed, one table

Evaluation of a checkpoint is ``sharpo_train.loops.evaluate.evaluate_checkpoint`` (the same call
`sharpo eval` and the trainer use); markdown and plots are written by ``sharpo_train.analysis.report``.
"""
from .compare import run_compare
from .demo import run_demo
from .overrides import PipelinePlan, parse_demo_settings, split_overrides
from .recipe_config import parse_methods, parse_seeds

__all__ = ["run_demo", "run_compare", "parse_methods", "parse_seeds", "PipelinePlan",
           "parse_demo_settings", "split_overrides"]
