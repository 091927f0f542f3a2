"""Cosign's keyed signature verification, written independently of agentfile.

Checks a signature that `agentfile sign` pushed with something we did not
write: Python's standard library (urllib against the registry's HTTP API, the
OCI distribution spec's `GET /v2/<name>/manifests/<ref>` and
`GET /v2/<name>/blobs/<digest>`) and the `cryptography` package.

    python verify_cosign.py --registry 127.0.0.1:PORT --repo NAME \
        --digest sha256:HEX --key cosign.pub [--plain-http] [--all]

Prints `verified` and exits 0, or prints why not and exits 1 (2 for bad
arguments). Where the manifest has several signature layers, each one that
fails is also reported on stderr.

What it checks, as `cosign verify --key cosign.pub REGISTRY/NAME@DIGEST`
does for a keyed signature without a transparency log (`--insecure-ignore-tlog`):

1. Discovery by tag: the signature manifest is at tag `sha256-<HEX>.sig` of the
   same repository (digest's `:` replaced by `-`, `.sig` appended), fetched
   with `Accept: application/vnd.oci.image.manifest.v1+json` (cosign pushes an
   OCI image manifest; Docker's schema 2 type is accepted as well, as cosign's
   `COSIGN_DOCKER_MEDIA_TYPES=1` writes).
2. Each layer whose mediaType is `application/vnd.dev.cosign.simplesigning.v1+json`
   is one signature: its blob (the payload) is fetched and must hash (SHA-256)
   to the layer's digest; the layer's annotation
   `dev.cosignproject.cosign/signature` is the standard base64 of an ASN.1 DER
   ECDSA signature, checked with the PEM (PKIX) public key, which must be
   ECDSA P-256, over the exact payload bytes with SHA-256.
3. The payload is a simple-signing JSON document:
   `critical.type == "cosign container image signature"`,
   `critical.image["docker-manifest-digest"] == DIGEST`, and
   `critical.identity["docker-reference"]` names the repository (equal to NAME
   or ending in `/NAME`; cosign writes the full repository name, e.g.
   `127.0.0.1:5000/NAME`). Keys are matched exactly as cosign writes them
   (Go's json would also accept other letter cases; we do not).
4. Like cosign, verification passes when at least one simple-signing layer
   passes; with `--all`, every one of them must.

References followed (read at sigstore/cosign d6d86c22, July 2026, and
sigstore/sigstore bd0ad712, August 2026):
- cosign `specs/SIGNATURE_SPEC.md`: tag-based discovery, the OCI image manifest
  layout, the layer media type, the `dev.cosignproject.cosign/signature`
  annotation, the simple-signing payload and ECDSA-P256/SHA-256.
- cosign `pkg/types/media.go` (`SimpleSigningMediaType`),
  `pkg/oci/static/signature.go` (`SignatureAnnotationKey`),
  `pkg/oci/remote/remote.go` (`SignatureTag`, `normalize`),
  `pkg/oci/empty/empty.go` (OCI manifest and config media types).
- cosign `pkg/cosign/verify.go` (`verifyOCISignature`: base64-decode the
  annotation, verify over the payload; `verifySignatures`: any one valid
  signature suffices) and `pkg/cosign/verifiers.go` (`SimpleClaimVerifier`:
  `critical.image.docker-manifest-digest` must equal the image digest).
- sigstore `pkg/signature/payload/payload.go` (`SimpleContainerImage`, the JSON
  keys, `CosignSignatureType`, docker-reference = the repository's name) and
  `pkg/signature/ecdsa.go` (`ecdsa.VerifyASN1` over the SHA-256 digest).
- containers/image `docs/containers-signature.5.md` (the simple-signing format).
"""

import argparse
import base64
import hashlib
import json
import sys
import urllib.error
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
COSIGN_TYPE = "cosign container image signature"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


class Refused(Exception):
    """Verification failed; the message says why."""


def get(url, accept=None):
    req = urllib.request.Request(url)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        body = e.read()[:500].decode("utf-8", "replace")
        raise Refused(f"GET {url}: HTTP {e.code}: {body}") from None
    except urllib.error.URLError as e:
        raise Refused(f"GET {url}: {e.reason}") from None


def load_key(path):
    with open(path, "rb") as f:
        pem = f.read()
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as e:
        raise Refused(f"{path}: not a PEM public key: {e}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise Refused(f"{path}: not an ECDSA public key")
    if not isinstance(key.curve, ec.SECP256R1):
        raise Refused(f"{path}: curve {key.curve.name}, not P-256")
    return key


def check_layer(base, repo, digest, key, layer):
    """One simple-signing layer: None when it verifies, else the reason."""
    blob_digest = layer.get("digest", "")
    if not blob_digest.startswith("sha256:"):
        return f"layer digest {blob_digest!r} is not sha256"
    payload, _ = get(f"{base}/v2/{repo}/blobs/{blob_digest}")
    actual = "sha256:" + hashlib.sha256(payload).hexdigest()
    if actual != blob_digest:
        return f"blob {blob_digest} hashes to {actual}"
    if "size" in layer and layer["size"] != len(payload):
        return f"blob {blob_digest} is {len(payload)} bytes, layer says {layer['size']}"

    b64 = (layer.get("annotations") or {}).get(SIGNATURE_ANNOTATION)
    if not b64:
        return f"layer {blob_digest} has no {SIGNATURE_ANNOTATION} annotation"
    try:
        sig = base64.b64decode(b64, validate=True)
    except ValueError as e:
        return f"layer {blob_digest}: signature is not base64: {e}"
    try:
        key.verify(sig, payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return f"layer {blob_digest}: signature does not verify with the key"

    try:
        doc = json.loads(payload)
    except ValueError as e:
        return f"layer {blob_digest}: payload is not JSON: {e}"
    critical = doc.get("critical") if isinstance(doc, dict) else None
    if not isinstance(critical, dict):
        return f"layer {blob_digest}: payload has no `critical` object"
    if critical.get("type") != COSIGN_TYPE:
        return f"layer {blob_digest}: critical.type is {critical.get('type')!r}"
    image = critical.get("image") or {}
    claimed = image.get("docker-manifest-digest") if isinstance(image, dict) else None
    if claimed != digest:
        return f"layer {blob_digest}: critical.image.docker-manifest-digest is {claimed!r}, not {digest}"
    identity = critical.get("identity") or {}
    ref = identity.get("docker-reference") if isinstance(identity, dict) else None
    if not isinstance(ref, str) or not (ref == repo or ref.endswith("/" + repo)):
        return f"layer {blob_digest}: critical.identity.docker-reference {ref!r} does not name {repo}"
    return None


def verify(registry, repo, digest, key_path, plain_http, require_all):
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise Refused(f"digest {digest!r} is not sha256:<64 hex>")
    key = load_key(key_path)
    base = ("http://" if plain_http else "https://") + registry
    tag = digest.replace(":", "-", 1) + ".sig"
    body, headers = get(
        f"{base}/v2/{repo}/manifests/{tag}",
        accept=f"{OCI_MANIFEST}, {DOCKER_MANIFEST}",
    )
    try:
        manifest = json.loads(body)
    except ValueError as e:
        raise Refused(f"manifest at {repo}:{tag} is not JSON: {e}") from None
    media_type = manifest.get("mediaType") or headers.get("Content-Type", "")
    if media_type not in (OCI_MANIFEST, DOCKER_MANIFEST):
        raise Refused(f"manifest at {repo}:{tag} has media type {media_type!r}")
    layers = [
        layer
        for layer in manifest.get("layers") or []
        if layer.get("mediaType") == SIMPLE_SIGNING
    ]
    if not layers:
        raise Refused(f"manifest at {repo}:{tag} has no {SIMPLE_SIGNING} layer")
    failures = []
    for layer in layers:
        why = check_layer(base, repo, digest, key, layer)
        if why:
            failures.append(why)
            if len(layers) > 1:
                print(why, file=sys.stderr)
    if require_all and failures:
        raise Refused(f"{len(failures)} of {len(layers)} signatures refused: {failures[0]}")
    if len(failures) == len(layers):
        raise Refused(f"no signature verifies: {failures[0]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--registry", required=True, help="HOST:PORT")
    p.add_argument("--repo", required=True, help="repository name, e.g. team/agent")
    p.add_argument("--digest", required=True, help="the signed manifest's digest, sha256:HEX")
    p.add_argument("--key", required=True, help="cosign.pub: PEM ECDSA P-256 public key")
    p.add_argument("--plain-http", action="store_true", help="http:// instead of https://")
    p.add_argument("--all", action="store_true", help="every simple-signing layer must verify")
    a = p.parse_args()
    try:
        verify(a.registry, a.repo, a.digest, a.key, a.plain_http, a.all)
    except (Refused, OSError) as e:
        print(e)
        return 1
    print("verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
