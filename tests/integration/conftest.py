"""Integration tests use the real offline encoder and real data from BENCH_DATA_DIR."""

import pytest

from bench.data import data_dir


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def real_data():
    if not (data_dir() / "glue" / "SST-2" / "train.tsv").is_file():
        pytest.skip("BENCH_DATA_DIR has no glue/SST-2 (point it at ../shared/data)")
