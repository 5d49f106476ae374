"""Session fixtures for tests/train: WebShop's catalogue and goals (envs/ and loops/),
and two finished one-step runs of the synthetic smoke config (plain and LoRA) that tests
copy before they damage them, or only read."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
# one GRPO step, a checkpoint at it, no final evaluation: the smallest finished run
SMOKE_FAST = ["total_steps=1", "log.progress=false", "method=grpo", "rollout.max_new_tokens=8",
              "rollout.max_turns=2", "eval.at_end=false", "checkpoint.every=1"]


def _finished_run(tmp_path_factory, name: str, extra: list) -> Path:
    from sharpo_train.cli import main
    run = tmp_path_factory.mktemp(name) / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run}", *SMOKE_FAST, *extra]) == 0
    return run


@pytest.fixture(scope="session")
def done_run(tmp_path_factory) -> Path:
    """A finished one-step run (checkpoint step_000001, metrics, credit, config): copy it
    before changing anything in it."""
    return _finished_run(tmp_path_factory, "done", [])


@pytest.fixture(scope="session")
def lora_run(tmp_path_factory) -> Path:
    """done_run with a rank-4 LoRA adapter on q_proj/v_proj (skips without peft): copy it
    before changing anything in it."""
    pytest.importorskip("peft")
    return _finished_run(tmp_path_factory, "lora", ["model.lora.rank=4",
                                                    "model.lora.targets=[q_proj,v_proj]"])

# ---------------------------------------------------------------- WebShop fixtures
# The WebShop tests need the catalogue and goals (../shared/data/webshop or $WEBSHOP_DATA);
# without them they skip. A test module opts in with
#     pytestmark = pytest.mark.usefixtures("webshop_data")
# and reads the loaded world through the `world` fixture.

@pytest.fixture(scope="session")
def webshop_data() -> Path:
    """The WebShop data folder; skips the test when it is not found."""
    from sharpo_train.envs.webshop.data import WebShopDataError, resolve_data_dir
    try:
        return Path(resolve_data_dir())
    except WebShopDataError:
        pytest.skip("WebShop data (../shared/data/webshop or $WEBSHOP_DATA) not found")


@pytest.fixture(scope="session")
def world(webshop_data):
    """The WebShop world (catalogue, goals) loaded once from webshop_data."""
    from sharpo_train.envs.webshop.engine import get_world
    return get_world()
