"""`python -m sharpo_train.integrations.verl_main OVERRIDES...`: verl 0.9.1's
``python -m verl.trainer.main_ppo OVERRIDES...`` with the overrides checked first, in the
launching process (docs/integrations.md, verl).

verl checks its settings only inside its Ray task runner: a typo (``trainer.totl_epochs``,
``+algorithm.sharpo.lamda``) surfaced after Ray had started, 33-39 s into the launch
(issue 47). Here, before Ray or a model:

1. the overrides are composed with verl's own Hydra config (``ppo_trainer.yaml``, strict
   keys: an unknown verl key is Hydra's error), without importing verl itself;
2. with ``algorithm.adv_estimator=sharpo``, ``engine_settings.check_config(config, "verl")``,
   the check ``SharpoTrainerMixin.__init__`` runs again later (unknown keys with a
   did-you-mean, look-alike sections, values, the GAE ``algorithm.lam`` warning);

3. an explicit ``actor_rollout_ref.{model,actor}.use_fused_kernels=false`` is kept: with
   ``algorithm.sharpo.fused_logprobs`` unset, ``+algorithm.sharpo.fused_logprobs=false`` is
   added to the command line (``engine_settings.fused_choice``; set both the other way
   round: refused);

a refusal is one line on stderr, exit 2. Then verl's ``main_ppo.main`` runs with the same
command line, exactly as ``python -m verl.trainer.main_ppo`` would. verl-agent's launch
script does the same check (engine_settings' command) before its data step.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Optional, Sequence

ENTRY = "verl.trainer.main_ppo"


def verl_config_dir() -> str:
    """verl's Hydra config folder (verl/trainer/config), found without importing verl."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("verl is not installed: pip install -c constraints-verl.txt '.[verl]'")
    return os.path.join(list(spec.submodule_search_locations)[0], "trainer", "config")


def compose(overrides: Sequence[str]):
    """The config ``main_ppo`` would run with these overrides (verl's ppo_trainer.yaml)."""
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=verl_config_dir(), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


def check(overrides: Sequence[str]) -> Optional[str]:
    """None when the overrides compose and their SHARPO settings pass, else the one-line
    reason (Hydra's error, or the settings error naming the key)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = compose(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        return " ".join(str(exc).split())
    if config.algorithm.get("adv_estimator") != "sharpo":
        return None
    from sharpo_train.integrations.engine_settings import check_config
    try:
        check_config(config, "verl")
    except (TypeError, ValueError) as exc:
        return " ".join(str(exc).split())
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Check the overrides, then run verl's ``main_ppo.main`` on them; 2 when refused."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    from sharpo_train.integrations.engine_settings import fused_choice
    try:                                    # an explicit use_fused_kernels=false stays off
        overrides = fused_choice(overrides)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    why = check(overrides)
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    from verl.trainer import main_ppo

    sys.argv = [ENTRY, *overrides]          # @hydra.main reads the command line
    main_ppo.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
