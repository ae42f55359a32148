import io
import json
import zipfile

import pytest
from django.test import override_settings

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment, EnvironmentSource, EnvironmentStatus, Task
from apps.environments.services import (
    MAX_ZIP_MEMBERS,
    environment_import_text,
    environment_import_upload,
    environment_spec_filename,
    environment_spec_json,
    environments_export_zip,
)
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec

pytestmark = pytest.mark.django_db


def make_zip(members: dict[str, bytes | str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def dumps(spec: dict) -> bytes:
    return json.dumps(spec, indent=2).encode()


def nothing_saved():
    return not Environment.objects.exists() and not Task.objects.exists()


# --- success -------------------------------------------------------------------------------


def test_import_json_upload(project, author, example_spec):
    [environment] = environment_import_upload(
        project=project, user=author, filename="acme.json", content=dumps(example_spec)
    )
    assert environment.project == project
    assert environment.name == example_spec["name"]
    assert environment.status == EnvironmentStatus.DRAFT
    assert environment.source == EnvironmentSource.IMPORTED
    assert environment.created_by == author
    assert environment.tasks.count() == len(example_spec["tasks"])
    assert environment.spec_hash == engine_spec.spec_hash(example_spec)


def test_import_json_with_byte_order_mark(project, author, example_spec):
    content = b"\xef\xbb\xbf" + dumps(example_spec)
    [environment] = environment_import_upload(
        project=project, user=author, filename="bom.json", content=content
    )
    assert environment.name == example_spec["name"]


def test_import_zip_of_specs_in_order_skipping_folders_and_mac_junk(project, author, example_spec):
    second = {**example_spec, "name": "Second one"}
    content = make_zip(
        {
            "specs/a.json": dumps(example_spec),
            "specs/b.JSON": dumps(second),
            "__MACOSX/specs/._a.json": b"\x00\x05junk",
            "specs/.DS_Store": b"\x00\x00",
        }
    )
    environments = environment_import_upload(
        project=project, user=author, filename="batch.zip", content=content
    )
    assert [e.name for e in environments] == [example_spec["name"], "Second one"]
    assert Environment.objects.filter(project=project).count() == 2


def test_import_pasted_text(project, author, example_spec):
    environment = environment_import_text(
        project=project, user=author, text=json.dumps(example_spec)
    )
    assert environment.name == example_spec["name"]
    assert environment.spec_hash == engine_spec.spec_hash(example_spec)


def test_import_adds_unknown_capabilities_to_the_catalogue(project, author, example_spec):
    slugs = {slug for task in example_spec["tasks"] for slug in task.get("capabilities", [])}
    environment_import_text(project=project, user=author, text=json.dumps(example_spec))
    assert set(Capability.objects.filter(project=project).values_list("slug", flat=True)) == slugs


# --- JSON and document errors --------------------------------------------------------------


def test_json_syntax_error_names_line_and_column(project, author):
    text = '{\n  "schema": "coworkenv.environment/v1",\n  "name": "x" "domain": "y"\n}'
    with pytest.raises(ApplicationError) as caught:
        environment_import_text(project=project, user=author, text=text)
    assert caught.value.message == (
        "The pasted text is not valid JSON: line 3, column 15: Expecting ',' delimiter."
    )
    [problem] = caught.value.extra["problems"]
    assert problem["code"] == "json_syntax"
    assert (problem["line"], problem["column"]) == (3, 15)
    assert problem["message"] == "Expecting ',' delimiter"
    assert problem["file"] == "The pasted text"
    assert nothing_saved()


def test_json_syntax_error_in_an_upload_names_the_file(project, author):
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(
            project=project, user=author, filename="broken.json", content=b'{"a": [1, 2,]}'
        )
    assert caught.value.message == (
        "broken.json is not valid JSON: line 1, column 13: Expecting value."
    )
    assert nothing_saved()


def test_duplicate_keys_are_refused_and_nothing_is_saved(project, author, example_spec):
    text = json.dumps(example_spec).replace('"schema":', '"name": "Other", "schema":', 1)
    with pytest.raises(ApplicationError) as exc:
        environment_import_text(project=project, user=author, text=text)
    problem = exc.value.extra["problems"][0]
    assert problem["code"] == "json_syntax"
    assert problem["message"] == (
        "key 'name' appears twice in one object (parsers disagree which wins)"
    )
    assert nothing_saved()


def test_nan_is_not_json(project, author):
    with pytest.raises(ApplicationError, match="NaN is not a JSON value"):
        environment_import_text(project=project, user=author, text='{"weight": NaN}')


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "an array"), ('"spec"', "a string"), ("42", "a number"), ("null", "null")],
)
def test_a_document_that_is_not_an_object(project, author, text, kind):
    with pytest.raises(ApplicationError) as caught:
        environment_import_text(project=project, user=author, text=text)
    assert caught.value.message == (
        f"The pasted text holds {kind}, not a spec: a spec is one JSON object."
    )
    assert caught.value.extra["problems"][0]["code"] == "not_an_object"
    assert nothing_saved()


def test_schema_problems_carry_their_pointers(project, author, example_spec):
    example_spec["tasks"][0]["graders"][0]["weight"] = "heavy"
    example_spec["tasks"][0]["split"] = "holdout"
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(
            project=project, user=author, filename="bad.json", content=dumps(example_spec)
        )
    pointers = {p["pointer"] for p in caught.value.extra["problems"]}
    assert "/tasks/0/graders/0/weight" in pointers
    assert "/tasks/0/split" in pointers
    assert all(p["file"] == "bad.json" for p in caught.value.extra["problems"])
    assert caught.value.message.startswith("bad.json: The spec does not match")
    assert nothing_saved()


def test_not_utf8(project, author):
    with pytest.raises(ApplicationError, match=r"latin\.json is not UTF-8 text \(byte 11\)"):
        environment_import_upload(
            project=project, user=author, filename="latin.json", content=b'{"name": "\xe9t\xe9"}'
        )


def test_empty_paste(project, author):
    with pytest.raises(ApplicationError, match="the text is empty"):
        environment_import_text(project=project, user=author, text="  \n ")


def test_unsupported_file_type(project, author, example_spec):
    with pytest.raises(ApplicationError, match=r"spec\.yaml: upload a \.json spec or a \.zip"):
        environment_import_upload(
            project=project, user=author, filename="spec.yaml", content=b"name: x"
        )


def test_the_path_of_an_uploaded_name_is_dropped(project, author):
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(
            project=project, user=author, filename="C:\\Users\\me\\x.json", content=b"{"
        )
    assert caught.value.extra["problems"][0]["file"] == "x.json"


# --- size limits ---------------------------------------------------------------------------


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_oversize_upload_is_refused(project, author, example_spec):
    with pytest.raises(
        ApplicationError, match=r"big\.json is 1001 bytes; the limit is 1000 bytes\."
    ):
        environment_import_upload(
            project=project, user=author, filename="big.json", content=b" " * 1001
        )
    assert nothing_saved()


def test_oversize_upload_at_the_real_limit(project, author, settings):
    content = b"{" + b" " * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b"}"
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(
            project=project, user=author, filename="big.json", content=content
        )
    assert caught.value.extra["problems"][0]["code"] == "too_large"


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_oversize_paste_is_refused(project, author):
    with pytest.raises(ApplicationError, match="The pasted text is"):
        environment_import_text(project=project, user=author, text="{" + " " * 2000 + "}")


def test_zip_bomb_is_refused_before_it_is_unpacked(project, author, settings):
    # 20 MiB of zeros compress to ~20 KiB; the member's declared size gives it away.
    content = make_zip({"bomb.json": b"0" * (2 * settings.DATA_UPLOAD_MAX_MEMORY_SIZE)})
    assert len(content) < 100_000
    with pytest.raises(ApplicationError, match=r"bomb\.zip/bomb\.json unpacks to 20\.0 MiB"):
        environment_import_upload(
            project=project, user=author, filename="bomb.zip", content=content
        )
    assert nothing_saved()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=50_000)
def test_zip_whose_members_add_up_to_too_much(project, author):
    members = {f"s{i}.json": b" " * 40_000 for i in range(7)}  # 280 kB > 5 x 50 kB
    with pytest.raises(ApplicationError, match=r"many\.zip unpacks to more than"):
        environment_import_upload(
            project=project, user=author, filename="many.zip", content=make_zip(members)
        )


def test_zip_member_whose_header_understates_its_size_is_refused(project, author):
    content = bytearray(make_zip({"liar.json": b" " * 5000}))
    small = (100).to_bytes(4, "little")
    content[22:26] = small  # local file header: uncompressed size
    central = bytes(content).rindex(b"PK\x01\x02")
    content[central + 24 : central + 28] = small  # central directory: uncompressed size
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(
            project=project, user=author, filename="liar.zip", content=bytes(content)
        )
    [problem] = caught.value.extra["problems"]
    assert problem["file"] == "liar.zip/liar.json"
    assert problem["code"] == "bad_zip"
    assert "Bad CRC-32" in problem["message"]
    assert nothing_saved()


def test_a_member_is_never_read_past_the_limit():
    from apps.environments.services.imports import _read_member

    archive = zipfile.ZipFile(io.BytesIO(make_zip({"big.json": b" " * 5000})))
    with pytest.raises(ApplicationError) as caught:
        _read_member(archive, archive.infolist()[0], limit=1000, name="x.zip/big.json")
    assert caught.value.message == "x.zip/big.json unpacks to more than 1000 bytes."
    assert caught.value.extra["problems"][0]["code"] == "too_large"


# --- zip contents --------------------------------------------------------------------------


def test_zip_with_one_bad_member_saves_nothing_and_names_it(project, author, example_spec):
    broken = {**example_spec, "tools": "not a list"}
    content = make_zip(
        {
            "good.json": dumps(example_spec),
            "nested/bad.json": dumps(broken),
            "syntax.json": b'{"name": }',
        }
    )
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(project=project, user=author, filename="set.zip", content=content)
    assert caught.value.message == (
        "Nothing was imported: 2 of 3 files in set.zip have problems "
        "(set.zip/nested/bad.json, set.zip/syntax.json)."
    )
    problems = caught.value.extra["problems"]
    assert {p["file"] for p in problems} == {"set.zip/nested/bad.json", "set.zip/syntax.json"}
    assert any(p["pointer"] == "/tools" for p in problems if p["file"].endswith("bad.json"))
    [syntax] = [p for p in problems if p["file"] == "set.zip/syntax.json"]
    assert (syntax["line"], syntax["column"]) == (1, 10)
    assert nothing_saved()
    assert not Capability.objects.exists()


def test_zip_fails_atomically_even_when_saving_fails_late(
    project, author, example_spec, monkeypatch
):
    from apps.environments.services import imports

    calls = []
    real = imports.environment_import

    def flaky(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ApplicationError("database said no")
        return real(**kwargs)

    monkeypatch.setattr(imports, "environment_import", flaky)
    content = make_zip({"a.json": dumps(example_spec), "b.json": dumps(example_spec)})
    with pytest.raises(ApplicationError, match="database said no"):
        environment_import_upload(project=project, user=author, filename="x.zip", content=content)
    assert nothing_saved()


def test_zip_with_a_non_json_member_is_refused(project, author, example_spec):
    content = make_zip({"a.json": dumps(example_spec), "notes/readme.txt": b"hello"})
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(project=project, user=author, filename="x.zip", content=content)
    assert caught.value.message == (
        "x.zip contains files that are not .json specs: notes/readme.txt."
    )
    assert caught.value.extra["problems"][0]["code"] == "not_json_file"
    assert nothing_saved()


def test_zip_with_too_many_members_is_refused(project, author):
    content = make_zip({f"s{i}.json": b"{}" for i in range(MAX_ZIP_MEMBERS + 1)})
    with pytest.raises(ApplicationError) as caught:
        environment_import_upload(project=project, user=author, filename="x.zip", content=content)
    assert caught.value.message == (
        f"x.zip has {MAX_ZIP_MEMBERS + 1} files; import at most {MAX_ZIP_MEMBERS} at once."
    )
    assert nothing_saved()


def test_empty_zip_and_a_zip_that_is_not_one(project, author):
    with pytest.raises(ApplicationError, match=r"empty\.zip contains no \.json files"):
        environment_import_upload(
            project=project, user=author, filename="empty.zip", content=make_zip({"d/": b""})
        )
    with pytest.raises(ApplicationError, match=r"fake\.zip is not a readable zip archive"):
        environment_import_upload(
            project=project, user=author, filename="fake.zip", content=b"PK\x03\x04 nope"
        )


# --- export --------------------------------------------------------------------------------


def test_export_round_trip_gives_the_same_hash(project, author, example_spec):
    [original] = environment_import_upload(
        project=project, user=author, filename="a.json", content=dumps(example_spec)
    )
    exported = environment_spec_json(original)
    assert exported.startswith('{\n  "schema": "coworkenv.environment/v1",\n')
    [again] = environment_import_upload(
        project=project, user=author, filename="a.json", content=exported.encode()
    )
    assert again.pk != original.pk
    assert again.spec_hash == original.spec_hash
    assert environment_spec(again) == environment_spec(original)


def test_export_zip_round_trip(project, author, example_spec):
    first = environment_import_text(project=project, user=author, text=json.dumps(example_spec))
    second = environment_import_text(
        project=project, user=author, text=json.dumps({**example_spec, "name": "Ünïcode & co"})
    )
    content = environments_export_zip(environments=[first, second])
    names = zipfile.ZipFile(io.BytesIO(content)).namelist()
    assert names == [environment_spec_filename(first), f"unicode-co-{second.pk}.json"]
    imported = environment_import_upload(
        project=project, user=author, filename="back.zip", content=content
    )
    assert [e.spec_hash for e in imported] == [first.spec_hash, second.spec_hash]


def test_export_filename_without_a_sluggable_name(project, author, example_spec):
    environment = environment_import_text(
        project=project, user=author, text=json.dumps({**example_spec, "name": "!!!"})
    )
    assert environment_spec_filename(environment) == f"environment-{environment.pk}.json"
