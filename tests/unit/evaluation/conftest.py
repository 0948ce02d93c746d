from tests.engine_fixtures import _no_designed_start, _oracle_template, stored_study  # noqa: F401 - fixtures
