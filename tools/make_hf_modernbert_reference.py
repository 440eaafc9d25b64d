r"""Writes the ModernBERT fixtures of tests/interop: small random ModernBERTs and their outputs.

Runs with PyTorch and transformers, which bert_tf and its CI do not install; use a separate
venv, whose python BERT_TF_PEERS_PYTHON names (as for the tests, docs/design.md):

    "$BERT_TF_PEERS_PYTHON" tools/make_hf_modernbert_reference.py \
        --output_dir=tests/interop/fixtures

Two models, both 6 layers (global attention at layers 0 and 3, a 16-token sliding window
elsewhere, so local layers differ from global ones from 17 tokens on):

  hf_modernbert_mlm/  ModernBertForMaskedLM as published (no biases, [CLS] pooling, rotary
                      bases 160,000 / 10,000), exact GELU.
  hf_modernbert_cls/  ModernBertForSequenceClassification with every bias on (attention, MLP,
                      norms, heads), mean pooling, the tanh GELU and other rotary bases.

Each directory holds config.json, model.safetensors (save_pretrained) and reference.npz: for
each case (`<case>_input_word_ids`, `<case>_input_mask`: two rows, the second padded) the
outputs of transformers' eager attention. Cases: len16, len40, len100 and len2048 (the last
row padded after 1,500 tokens; its sequence output kept at every 8th position and its logits
at 64 positions per row, to keep the fixture small). The generator also checks SDPA against
eager.

Weights are drawn wider than ModernBERT's initializer (norm gains around 1, biases non-zero)
so that a mis-mapped tensor or a wrong rotary base moves the outputs far beyond 1e-5.
"""

import argparse
import os

import numpy as np
import torch
import transformers

_VOCAB_SIZE = 128
_CLS, _SEP, _PAD = 1, 2, 0
_LONG = 2048
_LONG_POSITIONS = np.arange(0, _LONG, 8)


def randomize(model, seed):
    """Redraws every parameter: kernels N(0, 0.15), norm gains 1 + N(0, 0.1), biases
    N(0, 0.1)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm.weight" in name:
                param.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.15 * noise)


def make_inputs(length, seed):
    """[CLS] ... [SEP] rows; the second row padded after 3/4 of the length (1,500 at 2,048)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, _VOCAB_SIZE, size=(2, length)).astype("int64")
    mask = np.ones((2, length), "int64")
    real = 1500 if length == _LONG else max(3 * length // 4, 2)
    mask[1, real:] = 0
    ids[:, 0] = _CLS
    ids[0, -1] = _SEP
    ids[1, real - 1] = _SEP
    ids[mask == 0] = _PAD
    return ids, mask


def make_config(with_biases):
    common = dict(vocab_size=_VOCAB_SIZE, hidden_size=32, intermediate_size=48,
                  num_hidden_layers=6, num_attention_heads=2, max_position_embeddings=_LONG,
                  local_attention=16, global_attn_every_n_layers=3, pad_token_id=_PAD,
                  bos_token_id=_CLS, cls_token_id=_CLS, eos_token_id=_SEP, sep_token_id=_SEP)
    if not with_biases:
        return transformers.ModernBertConfig(**common)
    return transformers.ModernBertConfig(
        **common, attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True,
        hidden_activation="gelu_pytorch_tanh", classifier_activation="gelu_pytorch_tanh",
        classifier_pooling="mean", num_labels=3, norm_eps=1e-6,
        global_rope_theta=50000.0, local_rope_theta=5000.0)


def run(model, ids, mask):
    """(sequence output after the final norm, the head's logits), as numpy."""
    inputs = dict(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    with torch.no_grad():
        sequence = model.model(**inputs).last_hidden_state.numpy()
        return sequence, model(**inputs).logits.numpy()


def write_model(output_dir, with_biases, seed):
    config = make_config(with_biases)
    cls = (transformers.ModernBertForSequenceClassification if with_biases
           else transformers.ModernBertForMaskedLM)
    torch.manual_seed(seed)
    model = cls._from_config(config, attn_implementation="eager").eval()
    randomize(model, seed)
    model.save_pretrained(output_dir, safe_serialization=True)
    sdpa = cls.from_pretrained(output_dir, attn_implementation="sdpa").eval()

    arrays = {"versions": np.array(f"transformers {transformers.__version__}, "
                                   f"torch {torch.__version__}")}
    for length in (16, 40, 100, _LONG):
        case = f"len{length}"
        ids, mask = make_inputs(length, seed + length)
        sequence, logits = run(model, ids, mask)
        real = mask.astype(bool)
        assert np.abs(run(sdpa, ids, mask)[0] - sequence)[real].max() < 1e-4
        if length == _LONG:
            sequence = sequence[:, _LONG_POSITIONS]
            if not with_biases:
                rng = np.random.default_rng(seed)
                positions = np.sort(rng.choice(1500, size=(2, 64), replace=False), axis=1)
                arrays[f"{case}_logit_positions"] = positions.astype("int32")
                logits = np.take_along_axis(logits, positions[:, :, None], axis=1)
        arrays[f"{case}_input_word_ids"] = ids.astype("int32")
        arrays[f"{case}_input_mask"] = mask.astype("int32")
        arrays[f"{case}_sequence_output"] = sequence.astype("float32")
        arrays[f"{case}_logits"] = logits.astype("float32")
    arrays["long_positions"] = _LONG_POSITIONS.astype("int32")
    np.savez_compressed(os.path.join(output_dir, "reference.npz"), **arrays)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="tests/interop/fixtures")
    args = parser.parse_args()
    for name, with_biases, seed in (("mlm", False, 11), ("cls", True, 12)):
        directory = os.path.join(args.output_dir, f"hf_modernbert_{name}")
        os.makedirs(directory, exist_ok=True)
        write_model(directory, with_biases, seed)
        print(f"wrote {directory}")


if __name__ == "__main__":
    main()
