"""``sky.storage``: the S3-compatible object-storage client inside tasks, as ``@skyward/storage`` is
in TypeScript, with the Python project's names: ``Storage`` and the presets ``S3``, ``R2``,
``GCS``, ``Wasabi``, ``Backblaze`` and ``Hyperstack``, each with ``upload``, ``download``, ``ls``,
``exists`` and ``rm``.

It runs on boto3, which the runtime does not install (the runtime uses the standard library only):
add ``boto3`` to the image's ``pip``. Without it, the first call raises an ``ImportError`` that says
so. Credentials are strings or functions returning one (or an awaitable of one); they are resolved
when the client is made and never appear in ``repr``.

```python
with sky.storage.S3(region="us-east-1") as s3:
    s3.upload("my-bucket", "model.pt", key="checkpoints/model.pt")
    keys = s3.ls("my-bucket", prefix="checkpoints/")
    s3.download("my-bucket", "checkpoints/model.pt", "local/model.pt")
```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import re
from typing import Any, Awaitable, Callable, List, Optional, Union

Credential = Union[str, Callable[[], Union[str, Awaitable[str]]]]

__all__ = ["Backblaze", "Credential", "GCS", "Hyperstack", "R2", "S3", "Storage", "Wasabi"]


def _resolve(credential: Optional[Credential]) -> Optional[str]:
    if credential is None or isinstance(credential, str):
        return credential
    value = credential()
    if inspect.isawaitable(value):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            value = asyncio.run(_await(value))
        else:
            # Called from an async task: its loop is busy running the task (which waits here), so
            # the credential is awaited on a loop of its own in another thread.
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                value = pool.submit(asyncio.run, _await(value)).result()
    if not isinstance(value, str):
        raise TypeError(f"a credential function returned {type(value).__name__}, expected str")
    return value


async def _await(value: Awaitable[str]) -> str:
    return await value


def _status(error: Exception) -> Optional[int]:
    """The HTTP status of a botocore ``ClientError``, or None for any other error."""
    return getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")


def _name(field: str, value: object, pattern: str, expected: str) -> str:
    """``value`` when it is a name that fits an endpoint's host (as ``@skyward/storage`` checks it)."""
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise ValueError(f"{field}: expected {expected}, got {value!r}")
    return value


def _region(value: object) -> str:
    return _name("region", value, r"[A-Za-z0-9][A-Za-z0-9-]*", "a region name (letters, digits, '-')")


def _boto3() -> Any:
    try:
        import boto3  # type: ignore[import-not-found]
    except ImportError as error:
        raise ImportError(
            "sky.storage needs boto3 on the worker: add it to the image (image: { pip: ['boto3'] })"
        ) from error
    return boto3


class Storage:
    """An S3-compatible object store; use it as a context manager (or call ``close()``)."""

    def __init__(
        self,
        endpoint: str,
        access_key: Optional[Credential] = None,
        secret_key: Optional[Credential] = None,
        path_style: bool = False,
        region: str = "us-east-1",
    ) -> None:
        if not isinstance(endpoint, str) or not re.match(r"^https?://[^\s/]+", endpoint):
            raise ValueError(f"endpoint: expected an http(s) URL, got {endpoint!r}")
        if (access_key is None) != (secret_key is None):
            raise ValueError("access_key and secret_key go together (or neither, for boto3's own chain)")
        self.endpoint = endpoint.rstrip("/")
        self.path_style = path_style
        self.region = region
        self._access_key = access_key
        self._secret_key = secret_key
        self._client: Any = None

    def __repr__(self) -> str:
        return f"Storage(endpoint={self.endpoint!r}, region={self.region!r}, path_style={self.path_style!r})"

    def _s3(self) -> Any:
        if self._client is None:
            boto3 = _boto3()
            from botocore.config import Config  # type: ignore[import-not-found]

            keys = {}
            if self._access_key is not None:
                keys = {
                    "aws_access_key_id": _resolve(self._access_key),
                    "aws_secret_access_key": _resolve(self._secret_key),
                }
            addressing = {"addressing_style": "path" if self.path_style else "auto"}
            try:
                # Stores other than AWS (R2, Backblaze B2, …) reject the checksum headers and
                # aws-chunked trailers boto3 >= 1.36 sends by default: only when an operation needs them.
                config = Config(
                    s3=addressing,
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                )
            except TypeError:  # botocore < 1.36 knows neither setting, and sends no such headers
                config = Config(s3=addressing)
            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint,
                region_name=self.region,
                config=config,
                **keys,
            )
        return self._client

    def __enter__(self) -> "Storage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Frees the client's connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def upload(self, bucket: str, local_path: str, *, key: Optional[str] = None) -> str:
        """Uploads a local file (in parts when large) as ``key`` (default: its base name); returns the key."""
        key = key or os.path.basename(local_path)
        self._s3().upload_file(local_path, bucket, key)
        return key

    def download(self, bucket: str, key: str, local_path: str) -> None:
        """Downloads ``key`` to ``local_path``, creating its directory."""
        directory = os.path.dirname(local_path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._s3().download_file(bucket, key, local_path)

    def ls(self, bucket: str, prefix: str = "") -> List[str]:
        """Every key under ``prefix``."""
        keys: List[str] = []
        for page in self._s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def exists(self, bucket: str, key: str) -> bool:
        """Whether ``key`` exists. A bucket that does not exist raises ``NoSuchBucket`` naming it:
        a misspelt bucket must not read as "no checkpoint yet"."""
        s3 = self._s3()
        try:
            s3.head_object(Bucket=bucket, Key=key)
            return True
        except Exception as error:  # botocore's ClientError, without importing it at module level
            if _status(error) != 404:
                raise
        # A HEAD's 404 has no body to say whether the key or the bucket is missing: the bucket is asked.
        try:
            s3.head_bucket(Bucket=bucket)
        except Exception as error:
            # Another answer (a key allowed to HEAD objects only): the object's 404 stands.
            if _status(error) == 404:
                message = f"The bucket {bucket!r} does not exist at {self.endpoint}"
                answer = {"Error": {"Code": "NoSuchBucket", "Message": message, "BucketName": bucket},
                          "ResponseMetadata": {"HTTPStatusCode": 404}}
                raise s3.exceptions.NoSuchBucket(answer, "HeadObject") from None
        return False

    def rm(self, bucket: str, key: str) -> None:
        """Removes ``key`` (no error when it is not there)."""
        self._s3().delete_object(Bucket=bucket, Key=key)


def S3(  # noqa: N802
    *,
    region: Optional[str] = None,
    access_key: Optional[Credential] = None,
    secret_key: Optional[Credential] = None,
    endpoint: Optional[str] = None,
) -> Storage:
    """Amazon S3 (boto3's credential chain unless keys are given)."""
    region = _region(region or os.environ.get("AWS_REGION") or "us-east-1")
    return Storage(
        endpoint or f"https://s3.{region}.amazonaws.com",
        access_key,
        secret_key,
        path_style=endpoint is not None,
        region=region,
    )


def R2(*, account_id: str, access_key: Credential, secret_key: Credential) -> Storage:  # noqa: N802
    """Cloudflare R2."""
    account_id = _name("account_id", account_id, r"[A-Za-z0-9]+", "the Cloudflare account id (letters and digits)")
    return Storage(f"https://{account_id}.r2.cloudflarestorage.com", access_key, secret_key, region="auto")


def GCS(*, access_key: Credential, secret_key: Credential) -> Storage:  # noqa: N802
    """Google Cloud Storage's S3-compatible API, with HMAC keys."""
    return Storage("https://storage.googleapis.com", access_key, secret_key, region="auto")


def Wasabi(*, region: str, access_key: Credential, secret_key: Credential) -> Storage:  # noqa: N802
    """Wasabi."""
    region = _region(region)
    return Storage(f"https://s3.{region}.wasabisys.com", access_key, secret_key, region=region)


def Backblaze(*, region: str, key_id: Credential, app_key: Credential) -> Storage:  # noqa: N802
    """Backblaze B2's S3-compatible API."""
    region = _region(region)
    return Storage(f"https://s3.{region}.backblazeb2.com", key_id, app_key, region=region)


def Hyperstack(  # noqa: N802
    *, endpoint: str, region: str, access_key: Credential, secret_key: Credential
) -> Storage:
    """Hyperstack's object storage: its region's endpoint and an access key pair."""
    return Storage(endpoint, access_key, secret_key, path_style=True, region=_region(region))
