"""core/kube.py without a cluster: which failures were refused (never sent) and which never heal."""
import ssl

from urllib3.exceptions import MaxRetryError, NewConnectionError, SSLError

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import kube


def test_refused_follows_urllib3_causes_and_stops_at_strings():
    message = "Failed to establish a new connection: [Errno 111] Connection refused"
    refused = MaxRetryError(None, "/", NewConnectionError(None, message))
    assert kube.refused(refused)
    cause = ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED]")
    cause.reason = "CERTIFICATE_VERIFY_FAILED"  # a string, as the ssl module sets it
    tls = SSLError(cause)
    tls.__cause__ = cause
    assert not kube.refused(MaxRetryError(None, "/", tls))
    assert not kube.refused(OSError("reset by peer"))


def test_a_broken_tls_handshake_was_never_sent_but_a_rejected_certificate_never_heals():
    handshake = ssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    broken = MaxRetryError(None, "/", SSLError(handshake))
    broken.reason.__cause__ = handshake
    assert kube.refused(broken) and not kube.certificate_rejected(broken)
    cause = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] unable to get local issuer")
    rejected = MaxRetryError(None, "/", SSLError(cause))
    rejected.reason.__cause__ = cause
    assert kube.certificate_rejected(rejected) and not kube.refused(rejected)
