"""The AWS preflight checks against real servers: moto's server for STS and S3 (with its IAM
enforcement switched on for the denied cases), and a local HTTP stand-in answering
bedrock-agentcore-control's GetAgentRuntime REST call, reached through boto3 with endpoint_url."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3", reason="the AWS checks need boto3: pip install -e '.[test]'")
moto_server = pytest.importorskip("moto.server", reason="the AWS checks need moto[server]: pip install -e '.[test]'")

from acrl.runtime._preflight.aws import (  # noqa: E402
    check_agent_runtime,
    check_bucket,
    check_credentials,
    region_from_arn,
    runtime_id_from_arn,
)
from acrl.runtime._preflight.outcome import CheckFailed  # noqa: E402

REGION = "us-west-2"
ACCOUNT = "123456789012"
SECRET = "fake-secret-key-Zq7w"  # must never show in a message
SESSION_TOKEN = "fake-session-token-Xy9"


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Credentials from the environment only: no profile, config file or instance metadata of this machine."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEACCESSKEY123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)


def assert_no_secret(text: str, *extra: str) -> None:
    for secret in (SECRET, SESSION_TOKEN, "AKIAFAKEACCESSKEY123", *extra):
        assert secret not in text


def failure_text(failure: CheckFailed) -> str:
    return f"{failure.message}\n{failure.hint}"


# --- moto's server -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _moto_auth(url: str, initial_no_auth_actions: str) -> None:
    """moto's server enforces IAM policies after this many more unauthenticated actions ('inf': never)."""
    request = urllib.request.Request(f"{url}/moto-api/reset-auth", data=initial_no_auth_actions.encode(),
                                     headers={"Content-Type": "text/plain"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def moto_enforcing_iam(moto_url: str) -> Iterator[str]:
    _moto_auth(moto_url, "0")
    try:
        yield moto_url
    finally:
        _moto_auth(moto_url, "inf")


def _client(service: str, url: str) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=url)


def test_credentials_resolve_to_the_callers_arn(moto_url: str) -> None:
    detail = check_credentials(REGION, endpoint_url=moto_url)
    assert re.fullmatch(r"arn:aws:(sts|iam)::\d{12}:\S+ \(account \d{12}\)", detail), detail
    assert_no_secret(detail)


def test_no_credentials_names_the_ways_to_provide_them(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(CheckFailed) as failed:
        check_credentials(REGION, endpoint_url=moto_url)
    assert "no AWS credentials" in failed.value.message
    assert "AWS_PROFILE" in failed.value.hint


def test_missing_profile_is_named(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(CheckFailed) as failed:
        check_credentials(REGION, endpoint_url=moto_url)
    assert "no-such-profile" in failed.value.message
    assert "AWS_PROFILE" in failed.value.hint


def test_rejected_credentials_fail_without_showing_them(moto_enforcing_iam: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_credentials(REGION, endpoint_url=moto_enforcing_iam)
    text = failure_text(failed.value)
    assert "STS rejected the AWS credentials" in failed.value.message
    assert "InvalidClientTokenId" in failed.value.message
    assert_no_secret(text)


def test_bucket_that_exists_is_writable_and_left_clean(moto_url: str) -> None:
    s3 = _client("s3", moto_url)
    s3.create_bucket(Bucket="acrl-present", CreateBucketConfiguration={"LocationConstraint": REGION})
    detail = check_bucket("acrl-present", REGION, endpoint_url=moto_url)
    assert detail == f"s3://acrl-present exists ({REGION}) and is writable"
    assert s3.list_objects_v2(Bucket="acrl-present").get("KeyCount") == 0  # the test object is gone


def test_absent_bucket_is_a_404(moto_url: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_bucket("acrl-absent", REGION, endpoint_url=moto_url)
    assert failed.value.message == "S3 bucket 'acrl-absent' does not exist (404)"
    assert "s3_bucket" in failed.value.hint
    assert_no_secret(failure_text(failed.value))


def test_bucket_that_denies_putobject_is_not_writable(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    iam, s3 = _client("iam", moto_url), _client("s3", moto_url)
    s3.create_bucket(Bucket="acrl-read-only", CreateBucketConfiguration={"LocationConstraint": REGION})
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="read-only", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        # AWS authorizes HeadBucket as s3:ListBucket; moto names the action s3:HeadBucket
        "Statement": [{"Effect": "Allow", "Action": ["s3:ListBucket", "s3:HeadBucket", "s3:GetObject"],
                       "Resource": "*"}],
    }))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    _moto_auth(moto_url, "0")
    try:
        with pytest.raises(CheckFailed) as failed:
            check_bucket("acrl-read-only", REGION, endpoint_url=moto_url)
    finally:
        _moto_auth(moto_url, "inf")
    assert failed.value.message.startswith(
        "S3 bucket 'acrl-read-only' exists but is not writable: PutObject denied (403, AccessDenied")
    assert "s3:PutObject on arn:aws:s3:::acrl-read-only/*" in failed.value.hint
    assert_no_secret(failure_text(failed.value), key["AccessKeyId"], key["SecretAccessKey"])
    assert s3.list_objects_v2(Bucket="acrl-read-only").get("KeyCount") == 0


def test_bucket_of_another_identity_is_a_403(moto_url: str) -> None:
    s3 = _client("s3", moto_url)
    s3.create_bucket(Bucket="acrl-theirs", CreateBucketConfiguration={"LocationConstraint": REGION})
    _moto_auth(moto_url, "0")  # the fake environment keys belong to no IAM user
    try:
        with pytest.raises(CheckFailed) as failed:
            check_bucket("acrl-theirs", REGION, endpoint_url=moto_url)
    finally:
        _moto_auth(moto_url, "inf")
    assert failed.value.message.startswith("S3 bucket 'acrl-theirs': access denied (403)")
    assert_no_secret(failure_text(failed.value))


def test_unreachable_endpoint_is_a_clear_failure() -> None:
    with pytest.raises(CheckFailed) as failed:
        check_bucket("acrl-any", REGION, endpoint_url="http://127.0.0.1:9")
    assert failed.value.message.startswith("could not reach AWS while looking up S3 bucket 'acrl-any'")


# --- bedrock-agentcore-control: a local stand-in for GetAgentRuntime -----------------------------

RUNTIMES: dict[str, dict[str, Any]] = {
    "agent_ready-Ab12Cd34Ef": {"status": "READY", "agentRuntimeVersion": "3"},
    "agent_new-Gh56Ij78Kl": {"status": "CREATING", "agentRuntimeVersion": "1"},
    "agent_broken-Mn90Op12Qr": {"status": "CREATE_FAILED", "failureReason": "image pull failed"},
}


class _AgentCoreControl(BaseHTTPRequestHandler):
    """Answers GET /runtimes/{agentRuntimeId}/ the way the service does (rest-json)."""

    requests: list[dict[str, str]] = []  # noqa: RUF012 (shared by the server's handler instances)
    account = ACCOUNT

    def do_GET(self) -> None:
        type(self).requests.append({"path": self.path, "authorization": self.headers.get("Authorization", "")})
        match = re.fullmatch(r"/runtimes/([^/]+)/", self.path)
        runtime_id = match[1] if match else ""
        if runtime_id not in RUNTIMES:
            self._send(404, {"message": f"Runtime {runtime_id} not found"},
                       {"x-amzn-ErrorType": "ResourceNotFoundException"})
            return
        name = runtime_id.rsplit("-", 1)[0]
        self._send(200, {
            "agentRuntimeArn": f"arn:aws:bedrock-agentcore:{REGION}:{self.account}:runtime/{runtime_id}",
            "agentRuntimeName": name, "agentRuntimeId": runtime_id, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "roleArn": f"arn:aws:iam::{self.account}:role/agent",
            **RUNTIMES[runtime_id],
        }, {})

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def acr_url() -> Iterator[str]:
    _AgentCoreControl.requests = []
    _AgentCoreControl.account = ACCOUNT
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AgentCoreControl)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def arn(runtime_id: str, region: str = REGION, account: str = ACCOUNT) -> str:
    return f"arn:aws:bedrock-agentcore:{region}:{account}:runtime/{runtime_id}"


def test_region_and_runtime_id_come_from_the_arn() -> None:
    assert region_from_arn(arn("agent-x", "eu-central-1")) == "eu-central-1"
    assert runtime_id_from_arn(arn("agent_ready-Ab12Cd34Ef")) == "agent_ready-Ab12Cd34Ef"
    with pytest.raises(ValueError, match="not an AgentCore Runtime ARN"):
        region_from_arn("arn:aws:s3:::bucket")
    with pytest.raises(ValueError, match="not an AgentCore Runtime ARN"):  # `$` matched before a final newline
        runtime_id_from_arn(arn("agent-x") + "\n")


def test_ready_runtime_passes_and_is_asked_for_in_the_arns_region(acr_url: str) -> None:
    detail = check_agent_runtime(arn("agent_ready-Ab12Cd34Ef"), endpoint_url=acr_url)
    assert detail == f"agent_ready (agent_ready-Ab12Cd34Ef) is READY in {REGION}, version 3"
    [request] = _AgentCoreControl.requests
    assert request["path"] == "/runtimes/agent_ready-Ab12Cd34Ef/"
    # SigV4-signed for the service's signing name, in the ARN's region
    assert f"/{REGION}/bedrock-agentcore/aws4_request" in request["authorization"]


def test_creating_runtime_fails_with_its_status(acr_url: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_agent_runtime(arn("agent_new-Gh56Ij78Kl"), endpoint_url=acr_url)
    assert failed.value.message == "AgentCore runtime 'agent_new' (agent_new-Gh56Ij78Kl) is CREATING, not READY"
    assert "wait" in failed.value.hint


def test_failed_runtime_reports_the_failure_reason(acr_url: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_agent_runtime(arn("agent_broken-Mn90Op12Qr"), endpoint_url=acr_url)
    assert failed.value.message.endswith("is CREATE_FAILED, not READY: image pull failed")


def test_absent_runtime_is_not_found(acr_url: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_agent_runtime(arn("agent_gone-Zz99Yy88Xx"), endpoint_url=acr_url)
    assert failed.value.message.startswith(f"AgentCore runtime 'agent_gone-Zz99Yy88Xx' not found in {REGION} "
                                           "(ResourceNotFoundException: Runtime agent_gone-Zz99Yy88Xx not found")
    assert "list-agent-runtimes --region us-west-2" in failed.value.hint
    assert_no_secret(failure_text(failed.value))


def test_runtime_of_another_account_is_refused(acr_url: str) -> None:
    _AgentCoreControl.account = "999999999999"  # the credentials' account holds a runtime with the same id
    with pytest.raises(CheckFailed) as failed:
        check_agent_runtime(arn("agent_ready-Ab12Cd34Ef"), endpoint_url=acr_url)
    assert "999999999999" in failed.value.message
    assert "another account" in failed.value.hint


def test_malformed_arn_fails_before_any_request(acr_url: str) -> None:
    with pytest.raises(CheckFailed) as failed:
        check_agent_runtime("arn:aws:bedrock-agentcore:us-west-2:123:runtime/x", endpoint_url=acr_url)
    assert "runtime_arn" in failed.value.hint
    assert _AgentCoreControl.requests == []


def test_importing_the_module_does_not_import_boto3() -> None:
    import subprocess
    import sys

    code = "import sys, acrl.runtime._preflight.aws; print('boto3' in sys.modules, 'botocore' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --- the same checks as `acrl run` runs them -------------------------------------------------------------


def test_acrl_run_checks_aws_before_anything_runs(moto_url: str, acr_url: str, tmp_path: Any) -> None:
    """`acrl run --dry-run` on a compiled bundle: the three AWS checks run in its preflight, in the ARN's region,
    reaching moto and the stand-in through boto3's own AWS_ENDPOINT_URL_<SERVICE> settings; an absent bucket fails
    the preflight (exit 1) and still shows no credential."""
    import os
    import subprocess
    import sys

    import tomli_w

    from acrl.compiler import compile_spec, write
    from conftest import MINIMAL, merge

    _client("s3", moto_url).create_bucket(Bucket="acrl-rollouts", CreateBucketConfiguration={
        "LocationConstraint": REGION})
    local = ("bash", "ray-cli", "slime", "megatron", "model", "datasets", "gpus", "cuda-home")
    env = {**os.environ, "AWS_ENDPOINT_URL_STS": moto_url, "AWS_ENDPOINT_URL_S3": moto_url,
           "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL": acr_url}
    results = {}
    for bucket in ("acrl-rollouts", "no-such-bucket"):
        spec = tmp_path / f"{bucket}.toml"
        spec.write_text(tomli_w.dumps(merge(MINIMAL, {"agentcore": {
            "runtime_arn": arn("agent_ready-Ab12Cd34Ef"), "s3_bucket": bucket}})))
        write(compile_spec(spec), tmp_path / bucket)
        argv = [sys.executable, "-m", "acrl.runtime._cli", "run", str(tmp_path / bucket), "--dry-run"]
        argv += [a for name in local for a in ("--skip", name)]
        results[bucket] = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    ok, absent = results["acrl-rollouts"], results["no-such-bucket"]
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"aws-identity\s+passed.*arn:aws:(iam|sts)::123456789012", ok.stdout)
    assert re.search(r"s3-bucket\s+passed", ok.stdout) and re.search(r"agent-runtime\s+passed.*READY", ok.stdout)
    assert absent.returncode == 1 and re.search(r"s3-bucket\s+failed", absent.stdout + absent.stderr)
    assert all(r["path"] == "/runtimes/agent_ready-Ab12Cd34Ef/" for r in _AgentCoreControl.requests)
    for proc in results.values():
        assert_no_secret(proc.stdout + proc.stderr)
