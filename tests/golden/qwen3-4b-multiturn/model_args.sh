# MODEL_ARGS of qwen3-4B, frozen at compile time by acrl 0.1.0.
# Source: args (the spec's [model.args] table)
# sha256 of the source: 2d6ba0cd116a2ae4c586455a23eeb0a3e1532f81d8943829d7dab06f31884aa4
# shellcheck shell=bash disable=SC2034
MODEL_ARGS=(
  --swiglu
  --num-layers 36
  --hidden-size 2560
  --ffn-hidden-size 9728
  --num-attention-heads 32
  --group-query-attention
  --num-query-groups 8
  --use-rotary-position-embeddings
  --disable-bias-linear
  --normalization RMSNorm
  --norm-epsilon 1e-6
  --rotary-base 1000000
  --vocab-size 151936
  --kv-channels 128
  --qk-layernorm
)
