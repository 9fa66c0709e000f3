#!/usr/bin/env bash
# The fused decode gives the unfused graph's bits (Note [fusion]: every fused
# launch computes exactly what its nodes compute one by one, the products'
# rope and GLU epilogues included): `standin logits` token by token on DEVICE
# with GGML_STANDIN_FUSION=0, then fused, compared at NMSE 0.
# Usage: fused_bits.sh STANDIN PLUGIN MODEL DEVICE OUT_PREFIX
set -euo pipefail
standin=$1 plugin=$2 model=$3 device=$4 out=$5
run() { "$standin" logits --plugin "$plugin" --model "$model" --device "$device" --n-tokens 64 --ubatch 1 --flash-attn on "$@"; }
GGML_STANDIN_FUSION=0 run --out "$out.unfused.logits"
run --out "$out.fused.logits" --compare "$out.unfused.logits" --max-nmse 0
cmp "$out.unfused.logits" "$out.fused.logits"
echo "fused and unfused logits are the same bytes"
