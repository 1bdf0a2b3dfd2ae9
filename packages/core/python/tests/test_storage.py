"""``sky.storage`` in tasks: a clear error without boto3, and the client against moto's S3 (in a
Python that has boto3 and moto: ``SKYWARD_MOTO_PYTHON`` or ``packages/provider-aws/.venv``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prerequisites import missing  # noqa: E402

PYTHON_ROOT = Path(__file__).resolve().parents[1]
PROVIDER_AWS_VENV = PYTHON_ROOT.parents[1] / "provider-aws" / ".venv" / "bin" / "python"


def moto_python() -> str | None:
    for candidate in (os.environ.get("SKYWARD_MOTO_PYTHON"), str(PROVIDER_AWS_VENV)):
        if not candidate or not Path(candidate).exists():
            continue
        probe = subprocess.run([candidate, "-c", "import boto3, moto.server"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


def test_without_boto3_the_first_call_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import skyward as sky

    monkeypatch.setitem(sys.modules, "boto3", None)
    store = sky.storage.S3(region="eu-west-1", access_key="a", secret_key="hidden-secret")
    assert "hidden-secret" not in repr(store)
    assert store.endpoint == "https://s3.eu-west-1.amazonaws.com"
    with pytest.raises(ImportError, match=r"sky.storage needs boto3 on the worker"):
        store.ls("bucket")


def test_presets_and_refusals() -> None:
    import skyward as sky

    assert sky.storage.R2(account_id="abc", access_key="a", secret_key="b").endpoint == "https://abc.r2.cloudflarestorage.com"
    assert sky.storage.GCS(access_key="a", secret_key="b").endpoint == "https://storage.googleapis.com"
    assert sky.storage.Wasabi(region="eu-central-1", access_key="a", secret_key="b").endpoint == "https://s3.eu-central-1.wasabisys.com"
    assert sky.storage.Backblaze(region="us-west-004", key_id="a", app_key="b").endpoint == "https://s3.us-west-004.backblazeb2.com"
    assert sky.storage.Hyperstack(endpoint="https://no1.example/", region="CANADA-1", access_key="a",
                                  secret_key="b").region == "CANADA-1"
    with pytest.raises(ValueError, match="endpoint"):
        sky.storage.Storage("ftp://nowhere")
    with pytest.raises(ValueError, match="together"):
        sky.storage.Storage("https://x", access_key="a")
    # Accepted before (as @skyward/storage refuses them): an account id or region that is empty (an
    # unset variable) or not a name made an endpoint such as https://.r2.cloudflarestorage.com,
    # failing only at the first call, with a connection error naming no field.
    for make, field in [
        (lambda: sky.storage.R2(account_id="", access_key="a", secret_key="b"), "account_id"),
        (lambda: sky.storage.R2(account_id="abc.evil.example/x", access_key="a", secret_key="b"), "account_id"),
        (lambda: sky.storage.Wasabi(region="", access_key="a", secret_key="b"), "region"),
        (lambda: sky.storage.Backblaze(region="us west", key_id="a", app_key="b"), "region"),
        (lambda: sky.storage.S3(region="eu-west-1.evil.example/"), "region"),
        # Hyperstack's region signs the requests (its host is the endpoint's): an empty one (an unset
        # variable) failed only at the first call, as a signature the service refused.
        (lambda: sky.storage.Hyperstack(endpoint="https://x.example", region="", access_key="a", secret_key="b"),
         "region"),
        (lambda: sky.storage.Hyperstack(endpoint="ftp://x.example", region="CANADA-1", access_key="a",
                                        secret_key="b"), "endpoint"),
    ]:
        with pytest.raises(ValueError, match=f"^{field}: "):
            make()


SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    from moto.server import ThreadedMotoServer
    import boto3
    import skyward as sky

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket="data")

    async def secret():
        return "testing"

    # Stores other than AWS (R2, Backblaze B2, older GCS/MinIO) reject boto3's default checksum
    # headers and aws-chunked trailers (since boto3 1.36): none is sent unless an operation needs it.
    checksum_headers = []

    def note_checksums(request, **_):
        for name, value in request.headers.items():
            name = name.lower() if isinstance(name, str) else name.decode().lower()
            value = value if isinstance(value, str) else value.decode()
            if "checksum" in name or (name == "content-encoding" and "aws-chunked" in value):
                checksum_headers.append(f"{name}: {value}")

    with sky.storage.Storage(endpoint, access_key=lambda: "testing", secret_key=secret, path_style=True) as store:
        store._s3().meta.events.register("before-send.s3", note_checksums)
        work = tempfile.mkdtemp()
        source = os.path.join(work, "model.bin")
        with open(source, "wb") as handle:
            handle.write(os.urandom(9 * 1024 * 1024))
        assert store.upload("data", source, key="ckpt/model.bin") == "ckpt/model.bin"
        assert store.upload("data", source) == "model.bin"
        assert store.ls("data", prefix="ckpt/") == ["ckpt/model.bin"]
        assert sorted(store.ls("data")) == ["ckpt/model.bin", "model.bin"]
        assert store.exists("data", "ckpt/model.bin") and not store.exists("data", "nope")
        # A missing bucket is an error naming it: S3's HEAD 404 has no body, so it read as "no such
        # key" (a misspelt bucket as "no checkpoint yet", a job starting over).
        try:
            store.exists("dta", "ckpt/model.bin")
        except store._s3().exceptions.NoSuchBucket as error:
            assert "'dta'" in str(error), str(error)
        else:
            raise AssertionError("exists() on a missing bucket did not raise")
        target = os.path.join(work, "out", "model.bin")
        store.download("data", "ckpt/model.bin", target)
        assert open(target, "rb").read() == open(source, "rb").read()
        store.rm("data", "ckpt/model.bin")
        assert not store.exists("data", "ckpt/model.bin")
    assert checksum_headers == [], checksum_headers

    # An async task runs in an event loop: an async credential is awaited all the same (it raised
    # "asyncio.run() cannot be called from a running event loop").
    async def async_task():
        with sky.storage.Storage(endpoint, access_key=secret, secret_key=secret, path_style=True) as store:
            return store.ls("data")

    assert asyncio.run(async_task()) == ["model.bin"]
    server.stop()
    print("storage ok")
    """
)


def test_against_moto() -> None:
    python = moto_python()
    ensure = PYTHON_ROOT.parents[1] / "provider-aws" / "scripts" / "ensure-moto.sh"
    if python is None and ensure.exists():
        # The provider-aws package's environment with moto and boto3 (made once; locked against races).
        subprocess.run(["bash", str(ensure)], check=False, timeout=600)
        python = moto_python()
    if python is None:
        missing(
            "no Python with boto3 and moto (SKYWARD_MOTO_PYTHON or packages/provider-aws/.venv; "
            "`pnpm --filter @skyward/provider-aws setup:moto` makes it)",
            "moto for sky.storage's test",
        )
    result = subprocess.run([python, "-c", SCRIPT, str(PYTHON_ROOT)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "storage ok" in result.stdout
