"""AWS preflight checks: credentials resolve (STS), the S3 bucket exists and is writable, and the
AgentCore Runtime named by the spec exists and is READY.

Each check is a plain function that returns a one-line detail or raises CheckFailed / CheckSkipped
(see _outcome). boto3 is imported inside the checks, so importing this module stays cheap and the
compiler never pulls boto3 in. Messages never carry credentials: whatever botocore reports is
scrubbed of the resolved access key, secret key and session token before it is shown.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from acrl.compiler import RUNTIME_ARN

from .outcome import CheckFailed, CheckSkipped

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

# arn:PARTITION:bedrock-agentcore:REGION:ACCOUNT:runtime/RUNTIME_ID
PREFLIGHT_PREFIX = ".acrl-preflight/"
_CREDENTIALS_HINT = ("set AWS_PROFILE to a configured profile (after `aws sso login` for SSO profiles), or export "
                     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an instance or task role applies")


def _parse_runtime_arn(arn: str) -> re.Match[str]:
    match = RUNTIME_ARN.fullmatch(arn)  # the pattern ACRL-T003 checked at compile time
    if match is None:
        raise ValueError(f"not an AgentCore Runtime ARN: {arn!r} "
                         "(expected arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/RUNTIME_ID)")
    return match


def region_from_arn(arn: str) -> str:
    """The region of an AgentCore Runtime ARN; ValueError when ``arn`` is not one."""
    return _parse_runtime_arn(arn)["region"]


def runtime_id_from_arn(arn: str) -> str:
    """The runtime id (the part after ``runtime/``) of an AgentCore Runtime ARN; ValueError when not one."""
    return _parse_runtime_arn(arn)["runtime_id"]


def bundle_runtime_arn(info: BundleInfo) -> tuple[str, str]:
    """The AgentCore runtime ARN of the bundle and the region it names; the AWS checks are skipped for a bundle
    without [agentcore] (integration "slime" or "custom": no AgentCore runtime, no rollout bucket)."""
    if info.get("agentcore") is None:
        integration = info.get("experiment.integration", "agentcore")
        raise CheckSkipped(f'integration = "{integration}": the bundle uses no AgentCore runtime and no S3 bucket')
    arn = str(info.get("agentcore.runtime_arn", ""))
    try:
        return arn, region_from_arn(arn)
    except ValueError:
        raise CheckFailed(f"[agentcore] runtime_arn {arn!r} is not an AgentCore runtime ARN",
                          "compile the spec again: acrl-compile checks the ARN's format") from None


class _Aws:
    """A boto3 session and the secrets it resolved, so that messages can be scrubbed of them."""

    def __init__(self) -> None:
        try:
            # lazy: boto3 is optional (acrl[aws]) and heavy (~200 ms); only the AWS checks need it
            import boto3  # type: ignore[import-untyped]
            import botocore.exceptions  # type: ignore[import-untyped]
        except ImportError as exc:
            raise CheckFailed("boto3 is not installed in this Python",
                              "pip install 'acrl[aws]' (or boto3) where `acrl run` runs") from exc
        self.exceptions = botocore.exceptions
        try:
            self.session = boto3.session.Session()
        except botocore.exceptions.ProfileNotFound as exc:
            raise CheckFailed(f"AWS profile not found: {exc}", _CREDENTIALS_HINT) from exc
        self._secrets: list[str] = []
        try:
            credentials = self.session.get_credentials()
            frozen = credentials.get_frozen_credentials() if credentials is not None else None
        except botocore.exceptions.BotoCoreError:
            frozen = None  # the client call reports the problem; nothing to scrub
        if frozen is not None:
            self._secrets = [s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s]

    def client(self, service: str, region: str, endpoint_url: str | None) -> Any:
        from botocore.config import Config  # type: ignore[import-untyped]  # lazy: botocore, as boto3 above

        config = Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 2, "mode": "standard"})
        return self.session.client(service, region_name=region, endpoint_url=endpoint_url, config=config)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def describe(self, exc: Exception) -> str:
        """``Code: message`` for a ClientError, the text otherwise; scrubbed of secrets."""
        if isinstance(exc, self.exceptions.ClientError):
            error = exc.response.get("Error", {})
            code = error.get("Code") or str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?"))
            message = error.get("Message") or ""
            return self.scrub(f"{code}: {message}" if message else code)
        return self.scrub(str(exc))

    def transport_failure(self, exc: Exception, what: str) -> CheckFailed | None:
        """CheckFailed for failures before any answer arrived (no credentials, no connection), else None."""
        ex = self.exceptions
        if isinstance(exc, ex.NoCredentialsError | ex.PartialCredentialsError):
            return CheckFailed(f"no AWS credentials found while {what}", _CREDENTIALS_HINT)
        if isinstance(exc, ex.EndpointConnectionError | ex.ConnectTimeoutError | ex.ReadTimeoutError):
            return CheckFailed(f"could not reach AWS while {what}: {self.describe(exc)}",
                               "check the network, proxy settings and the region")
        if isinstance(exc, ex.BotoCoreError):
            return CheckFailed(f"AWS error while {what}: {self.describe(exc)}", _CREDENTIALS_HINT)
        return None


    def call(self, what: str, operation: Callable[..., Any], **kwargs: Any) -> Any:
        """``operation(**kwargs)``; a failure before any answer arrived becomes CheckFailed (see
        :meth:`transport_failure`), the service's own answer (ClientError) is left to the caller."""
        try:
            return operation(**kwargs)
        except Exception as exc:
            failure = self.transport_failure(exc, what)
            if failure is not None:
                raise failure from None
            raise


def _status(exc: Any) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def check_credentials(region: str, *, endpoint_url: str | None = None) -> str:
    """AWS credentials resolve and STS accepts them; the detail is the caller's ARN."""
    aws = _Aws()
    sts = aws.client("sts", region, endpoint_url)
    try:
        identity = aws.call("asking STS who the caller is", sts.get_caller_identity)
    except aws.exceptions.ClientError as exc:
        raise CheckFailed(f"STS rejected the AWS credentials ({aws.describe(exc)})",
                          "the credentials are invalid or expired: " + _CREDENTIALS_HINT) from None
    return f"{identity['Arn']} (account {identity['Account']})"


def check_bucket(bucket: str, region: str, *, endpoint_url: str | None = None) -> str:
    """The S3 bucket exists and is writable: head it, then put and delete a small object under
    ``.acrl-preflight/``."""
    aws = _Aws()
    s3 = aws.client("s3", region, endpoint_url)
    ex = aws.exceptions
    try:
        head = aws.call(f"looking up S3 bucket {bucket!r}", s3.head_bucket, Bucket=bucket)
    except ex.ClientError as exc:
        status = _status(exc)
        if status == 404:
            raise CheckFailed(f"S3 bucket {bucket!r} does not exist (404)",
                              "create it (`aws s3 mb s3://BUCKET`) or fix [agentcore] s3_bucket in the spec") from None
        if status == 403:
            raise CheckFailed(f"S3 bucket {bucket!r}: access denied (403): it belongs to another account, or this "
                              "identity may not s3:ListBucket it",
                              "check [agentcore] s3_bucket, the identity's S3 permissions, and that the credentials "
                              "check passes (S3 answers 403 to invalid credentials too)") from None
        raise CheckFailed(f"S3 bucket {bucket!r}: HeadBucket failed ({aws.describe(exc)})",
                          "check [agentcore] s3_bucket and the region") from None
    bucket_region = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region") or region
    key = f"{PREFLIGHT_PREFIX}{uuid.uuid4().hex}"
    try:
        aws.call(f"writing to S3 bucket {bucket!r}", s3.put_object, Bucket=bucket, Key=key,
                 Body=b"acrl preflight write test; safe to delete\n")
    except ex.ClientError as exc:
        outcome = "denied (403, " if _status(exc) == 403 else "failed ("
        raise CheckFailed(
            f"S3 bucket {bucket!r} exists but is not writable: PutObject {outcome}{aws.describe(exc)})",
            f"grant s3:PutObject on arn:aws:s3:::{bucket}/* to this identity (the agent writes its results "
            "there)") from None
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if isinstance(exc, ex.ClientError | ex.BotoCoreError):
            return (f"s3://{bucket} exists ({bucket_region}) and is writable; could not delete the test object "
                    f"s3://{bucket}/{key} ({aws.describe(exc)})")
        raise
    return f"s3://{bucket} exists ({bucket_region}) and is writable"


_STATUS_HINTS = {
    "CREATING": "wait until the runtime is READY, then run again",
    "UPDATING": "wait until the update finishes and the runtime is READY, then run again",
    "DELETING": "the runtime is being deleted: deploy the agent again and put the new ARN in [agentcore] runtime_arn",
}


def check_agent_runtime(runtime_arn: str, *, endpoint_url: str | None = None) -> str:
    """The AgentCore Runtime exists and is READY (bedrock-agentcore-control GetAgentRuntime, in the
    ARN's region)."""
    try:
        match = _parse_runtime_arn(runtime_arn)
    except ValueError as exc:
        raise CheckFailed(str(exc), "fix [agentcore] runtime_arn in the spec") from None
    region, runtime_id = match["region"], match["runtime_id"]
    aws = _Aws()
    control = aws.client("bedrock-agentcore-control", region, endpoint_url)
    try:
        runtime = aws.call(f"looking up AgentCore runtime {runtime_id!r} in {region}", control.get_agent_runtime,
                           agentRuntimeId=runtime_id)
    except aws.exceptions.ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException" or _status(exc) == 404:
            raise CheckFailed(
                f"AgentCore runtime {runtime_id!r} not found in {region} ({aws.describe(exc)})",
                "check [agentcore] runtime_arn (region, account, id) against "
                f"`aws bedrock-agentcore-control list-agent-runtimes --region {region}`") from None
        if code == "AccessDeniedException" or _status(exc) == 403:
            raise CheckFailed(f"not allowed to read AgentCore runtime {runtime_id!r} ({aws.describe(exc)})",
                              "grant bedrock-agentcore:GetAgentRuntime on the runtime to this identity") from None
        raise CheckFailed(f"GetAgentRuntime {runtime_id!r} in {region} failed ({aws.describe(exc)})",
                          "retry; if it persists, check the runtime in the AgentCore console") from None
    found_arn = runtime.get("agentRuntimeArn")
    if found_arn and found_arn != runtime_arn:
        raise CheckFailed(f"runtime id {runtime_id!r} resolved to {found_arn}, not the spec's {runtime_arn}",
                          "the AWS credentials are for another account than the runtime's: use that account's "
                          "credentials, or fix [agentcore] runtime_arn")
    status = runtime.get("status", "?")
    name = runtime.get("agentRuntimeName", runtime_id)
    if status != "READY":
        reason = runtime.get("failureReason")
        hint = _STATUS_HINTS.get(status, "see the failure reason in the AgentCore console, fix the agent and "
                                         "deploy it again")
        raise CheckFailed(f"AgentCore runtime {name!r} ({runtime_id}) is {status}, not READY"
                          + (f": {aws.scrub(reason)}" if reason else ""), hint)
    version = runtime.get("agentRuntimeVersion")
    return f"{name} ({runtime_id}) is READY in {region}" + (f", version {version}" if version else "")
