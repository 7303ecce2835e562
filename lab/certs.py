"""The lab's PKI, made with openssl: a CA, the API server's serving cert, an admin client cert,
and the service-account signing key."""
import subprocess
from pathlib import Path


def _openssl(*args, cwd: Path) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {res.stderr.strip()}")


def make_pki(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    if (pki / "ca.crt").exists():
        return
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
             "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=tfops-lab-ca", cwd=pki)
    (pki / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1\n"
        "extendedKeyUsage=serverAuth\n")
    _signed(pki, "server", "/CN=kube-apiserver", "server.ext")
    (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _signed(pki, "admin", "/O=system:masters/CN=tfops-lab-admin", "client.ext")
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for f in pki.iterdir():
        f.chmod(0o600)


def _signed(pki: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3650", "-out", f"{name}.crt", "-extfile", ext, cwd=pki)
