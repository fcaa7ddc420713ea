#!/usr/bin/env bash
# Sets up, builds and runs the main job. Until the Bahdanau translator lands, that is the small
# training example examples/train_mlp.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/bin/train_mlp "$@"
