"""The attachments storage setting: local files by default, an S3-compatible bucket through
django-storages with ATTACHMENTS_STORAGE=s3, a clear start-up error otherwise. Each case
imports the real settings in a fresh process with its own environment."""

import json

import pytest

from tests.fresh_settings import assert_refuses_to_start, settings_in_fresh_process

PRINT = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps(settings.STORAGES['attachments']))"
)


def _settings(tmp_path, **variables):
    return settings_in_fresh_process(tmp_path, "ATTACHMENTS_", PRINT, **variables)


def test_local_files_under_the_var_folder_by_default(tmp_path):
    result = _settings(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / "attachments")},
    }


def test_s3_uses_django_storages_with_the_bucket_and_endpoint(tmp_path):
    result = _settings(
        tmp_path,
        ATTACHMENTS_STORAGE="s3",
        ATTACHMENTS_S3_BUCKET="cowork-media",
        ATTACHMENTS_S3_ENDPOINT_URL="http://minio.lan:9000",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": "cowork-media",
            "endpoint_url": "http://minio.lan:9000",
            "region_name": None,
            "location": "attachments",
            "default_acl": None,
            "file_overwrite": False,
            "querystring_auth": True,
        },
    }


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"ATTACHMENTS_STORAGE": "s3"}, "ATTACHMENTS_STORAGE=s3 needs ATTACHMENTS_S3_BUCKET."),
        (
            {"ATTACHMENTS_STORAGE": "ftp"},
            "ATTACHMENTS_STORAGE must be 'filesystem' or 's3', not 'ftp'.",
        ),
    ],
)
def test_a_bad_setting_stops_start_up_with_its_name(tmp_path, variables, message):
    result = _settings(tmp_path, **variables)
    assert_refuses_to_start(result, message)
