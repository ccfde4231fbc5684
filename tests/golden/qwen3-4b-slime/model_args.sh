# MODEL_ARGS of qwen3-4B, frozen at compile time by acrl 0.1.0.
# Source: catalog (acrl catalog: qwen3-4B (Qwen/Qwen3-4B))
# sha256 of the source: a1b29ddc1ba1aa96728e53a5d6242c290d262c63dce898c8957221f5d30c5cc7
# shellcheck shell=bash disable=SC2034
MODEL_ARGS=(
  --swiglu
  --num-layers 36
  --hidden-size 2560
  --ffn-hidden-size 9728
  --num-attention-heads 32
  --group-query-attention
  --num-query-groups 8
  --kv-channels 128
  --use-rotary-position-embeddings
  --disable-bias-linear
  --normalization RMSNorm
  --norm-epsilon 1e-06
  --rotary-base 1000000
  --vocab-size 151936
  --qk-layernorm
)
