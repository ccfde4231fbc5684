# MODEL_ARGS of qwen3-8B, frozen at compile time by acrl 0.1.0.
# Source: args (the spec's [model.args] table)
# sha256 of the source: df7019b3caf5880b3b746373d5d80af95f8252f205ec95c5eae10fed31fe3a6d
# shellcheck shell=bash disable=SC2034
MODEL_ARGS=(
  --swiglu
  --num-layers 36
  --hidden-size 4096
  --ffn-hidden-size 12288
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
  --untie-embeddings-and-output-weights
)
