"""Graph-table store settings: a local directory or an S3-compatible bucket."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator


class TablesSettings(BaseModel):
    """Where the graph tables live: a local directory (the default) or an S3-compatible bucket
    that query services on other machines read (``core.object_store``)."""

    uri: str = Field(
        "",
        description="Empty: <data_dir>/<namespace>/tables on the local disk. Or a bucket URI "
        "s3://bucket/prefix (the namespace is appended), or a local directory",
    )
    endpoint_url: str = Field(
        "",
        description="S3-compatible endpoint, e.g. http://127.0.0.1:19000 (versitygw, MinIO); "
        "empty: AWS S3 (or AWS_ENDPOINT_URL)",
    )
    region: str = Field("", description="Empty: AWS_REGION, else us-east-1")
    access_key_id: str = Field("", description="Empty: the standard AWS environment variables")
    secret_access_key: SecretStr | None = Field(None, description="With access_key_id")
    timeout_s: float = Field(10.0, gt=0, description="One request to the object store")
    max_retries: int = Field(2, ge=0, description="Retries of a failed request")
    retry_timeout_s: float = Field(20.0, gt=0, description="Give up retrying after this")

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, v: str) -> str:
        v = v.strip()
        if "://" in v and not v.startswith(("s3://", "file://")):
            raise ValueError(
                "use s3://bucket/prefix for an S3-compatible object store, or a local directory"
            )
        if v.startswith("s3://") and not v[5:].split("/", 1)[0]:
            raise ValueError("the URI names no bucket (s3://bucket/prefix)")
        return v.rstrip("/")

    @field_validator("endpoint_url")
    @classmethod
    def _check_endpoint(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("the endpoint is an http:// or https:// URL")
        return v

    @property
    def remote(self) -> bool:
        return self.uri.startswith("s3://")
