"""The JSON Schema and the key reference are generated from the models; the checked-in copies must
match."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tuner.cli import main
from tuner.study.models import StudyFile
from tuner.study.reference import REFERENCE_PATH, SCHEMA_PATH, outdated, reference_text, schema_text
from tuner.targets.registry import TARGET_KINDS


def test_checked_in_schema_and_reference_are_up_to_date() -> None:
    stale = outdated()
    assert not stale, \
           f"{', '.join(map(str, stale))} out of date: run `python -m tuner.study.reference`"
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()
    assert REFERENCE_PATH.read_text(encoding="utf-8") == reference_text()


def test_reference_names_every_key_of_every_section() -> None:
    text = reference_text()
    for section, field in StudyFile.model_fields.items():
        assert f"## `[{section}]`" in text
        model = field.annotation
        for key in getattr(model, "model_fields", {}):
            assert f"| `{key}` |" in text, (section, key)
    for kind in TARGET_KINDS:
        assert f'### `kind = "{kind}"`' in text


def test_schema_command_prints_the_schema() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema == json.loads(schema_text())
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"study", "target", "search"}
