from tests.study_factory import (  # noqa: F401 - fixtures
    _confirmed_template,
    _oracle_template,
    confirmed_study,
    stored_study,
)
