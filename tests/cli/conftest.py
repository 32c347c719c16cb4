import pytest


@pytest.fixture(scope="session")
def bad_dir(tmp_path_factory):
    """Files of every kind a user might hand over, two tiny trained runs and damaged copies (tests/bad_inputs.py)."""
    from bad_inputs import make_bad_dir

    return make_bad_dir(tmp_path_factory.mktemp("bad"))
