"""The TRL versions ``sharpo_train.integrations.trl`` supports (docs/integrations.md, TRL).

``SharpoGRPOTrainer`` overrides private methods of TRL's ``GRPOTrainer``
(``_generate_and_score_completions``, ``_compute_loss``, ``_calculate_rewards``,
``_tool_call_loop``, ``_get_per_token_logps_and_entropies``), whose names and arguments TRL
changes between minor releases without notice; on another release the override would be
skipped or called wrongly, silently. So the version is checked when the module is
imported, before anything of TRL's trainer is: ``check_trl_version()`` raises ImportError
with one line naming the supported range and the install command.

    TRL_SUPPORTED   (lowest, first unsupported): trl >= 1.16.0, < 1.17 (the ``[trl]``
                    extra pins 1.16.0, the version the tests run)
"""
from __future__ import annotations

TRL_SUPPORTED = ("1.16.0", "1.17")


def supported_range() -> str:
    lo, hi = TRL_SUPPORTED
    return f"trl>={lo},<{hi}"


def check_trl_version(version: str | None = None) -> str:
    """The installed TRL version (or ``version``), or ImportError (one line) when it is
    outside ``TRL_SUPPORTED`` or TRL is not installed."""
    from packaging.version import InvalidVersion, Version

    hint = f"pip install -c constraints-cpu.txt '.[trl]' (sharpo's [trl] extra)"
    if version is None:
        try:
            from importlib.metadata import PackageNotFoundError, version as installed
            version = installed("trl")
        except PackageNotFoundError:
            raise ImportError(f"sharpo_train.integrations.trl needs TRL ({supported_range()}), "
                              f"which is not installed: {hint}") from None
    lo, hi = TRL_SUPPORTED
    try:
        v = Version(version)        # a pre-release of 1.17 is 1.17's code, not 1.16's
        ok = Version(lo) <= v and v.release < Version(hi).release
    except InvalidVersion:
        ok = False
    if not ok:
        raise ImportError(f"sharpo_train.integrations.trl supports {supported_range()} (it "
                          f"overrides private GRPOTrainer methods of those releases); found "
                          f"trl {version}: {hint}")
    return version
