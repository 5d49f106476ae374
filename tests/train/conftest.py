"""WebShop fixtures for tests/train (envs/ and loops/): the catalogue and goals,
loaded once per session."""
from pathlib import Path

import pytest

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
