#!/usr/bin/env bash
# Offline checks of the deployment files (DESIGN §7): renders the Kustomize base and every overlay
# and validates each object against the Kubernetes OpenAPI schemas (strict: unknown fields fail),
# cross-checks names the schemas cannot see, and checks deploy/compose.yaml against the Compose
# specification plus a few structural rules. Needs no cluster and no Docker.
#
# On a fresh Debian 12 machine (as root) it installs kubectl and python3-venv from Debian and the
# Python tools into a cached venv; later runs reuse both and need no network.
set -euo pipefail
cd "$(dirname "$0")/.."

# Kubernetes versions the manifests must be valid for: the oldest we support (native gRPC probes
# need 1.27+) and the newest the pinned kubernetes-validate bundles.
k8s_versions=(1.30.0 1.37.0)
requirements="kubernetes-validate==1.37.0 PyYAML==6.0.3 check-jsonschema==0.39.0"
venv=${XDG_CACHE_HOME:-$HOME/.cache}/latchkey-ci-venv

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Debian's kubectl (1.20) embeds kustomize v2.0.3; the manifests stay within what it reads.
command -v kubectl >/dev/null || apt_install kubernetes-client

# Debian's python3 has no venv/ensurepip until python3-venv is installed.
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || { rm -rf "$venv"; apt_install python3-venv; python3 -m venv "$venv"; }
fi
# Reinstall only when the pinned set changes, so later runs work offline.
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$requirements" ]; then
  # shellcheck disable=SC2086 # the list is meant to split into arguments
  "$venv/bin/pip" install -q --disable-pip-version-check $requirements
  echo "$requirements" >"$venv/.requirements"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== kustomize build + kubernetes-validate --strict (Kubernetes ${k8s_versions[*]})"
rendered=()
for dir in k8s/base k8s/overlays/*/; do
  dir=${dir%/}
  out="$tmp/$(basename "$dir").yaml"
  # Current kustomize warns about the overlays' `bases:` (kept for old kubectl); show stderr only
  # on failure.
  kubectl kustomize "$dir" >"$out" 2>"$tmp/stderr" || { cat "$tmp/stderr" >&2; exit 1; }
  for version in "${k8s_versions[@]}"; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$out"
  done
  rendered+=("$out")
  echo "$dir: $(grep -c '^kind:' "$out") objects valid"
done

echo "== cross-references"
# Selectors, secret keys and config names are plain strings to the schemas.
"$venv/bin/python" - k8s/secrets.example.env "${rendered[@]}" <<'PY'
import re, sys, yaml

secret_keys = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", open(sys.argv[1]).read(), re.M))
errors = []
for path in sys.argv[2:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    named = {(d["kind"], d["metadata"]["name"]) for d in docs}
    pods = [d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "Job")]
    def matches(selector):
        return any(selector.items() <= p["metadata"]["labels"].items() for p in pods)
    for d in docs:
        where = f"{path.rsplit('/', 1)[-1]}: {d['kind']}/{d['metadata']['name']}"
        spec = d.get("spec", {})
        if d["kind"] == "Secret":
            errors.append(f"{where}: Secrets are created by the operator, not shipped")
        if d["kind"] == "Service" and not matches(spec["selector"]):
            errors.append(f"{where}: selector matches no pod template")
        if d["kind"] in ("Deployment", "PodDisruptionBudget") and not matches(spec["selector"]["matchLabels"]):
            errors.append(f"{where}: selector matches no pod template")
        if d["kind"] == "HorizontalPodAutoscaler" and ("Deployment", spec["scaleTargetRef"]["name"]) not in named:
            errors.append(f"{where}: scale target missing")
        for c in spec.get("template", {}).get("spec", {}).get("containers", []):
            for ref in c.get("envFrom", []):
                if ("ConfigMap", ref["configMapRef"]["name"]) not in named:
                    errors.append(f"{where}: ConfigMap {ref['configMapRef']['name']} missing")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and (ref["name"] != "latchkey-secrets" or ref["key"] not in secret_keys):
                    errors.append(f"{where}: secret {ref['name']}/{ref['key']} not in k8s/secrets.example.env")
if errors:
    sys.exit("\n".join(errors))
PY

echo "== deploy/compose.yaml"
# The Compose specification's JSON schema, vendored in check-jsonschema (no download).
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose.yaml
"$venv/bin/python" - deploy/compose.yaml <<'PY'
import os, sys, yaml

path = sys.argv[1]
services = yaml.safe_load(open(path)).get("services") or sys.exit(f"{path}: no services")
errors = []
for name, svc in services.items():
    if "image" not in svc and "build" not in svc:
        errors.append(f"{name}: neither image nor build")
    if "build" in svc:
        build = svc["build"] if isinstance(svc["build"], dict) else {"context": svc["build"]}
        context = os.path.join(os.path.dirname(path), build.get("context", "."))
        if not os.path.isfile(os.path.join(context, build.get("dockerfile", "Dockerfile"))):
            errors.append(f"{name}: Dockerfile not found under {context}")
    for dep in svc.get("depends_on") or []:
        if dep not in services:
            errors.append(f"{name}: depends on unknown service {dep}")
components = ["gateway", "auth", "teams", "contacts", "webhooks", "migrate"]
missing = [c for c in components if c not in services]
if missing:
    errors.append(f"missing services: {missing}")
elif len({repr((services[c].get("image"), services[c].get("build"))) for c in components}) != 1:
    errors.append(f"{components} must share one image and build")
if errors:
    sys.exit("\n".join(f"{path}: {e}" for e in errors))
PY

echo "== manifests valid"
