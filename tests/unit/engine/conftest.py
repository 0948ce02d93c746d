from tests.study_factory import _oracle_template, stored_study  # noqa: F401 - fixtures
