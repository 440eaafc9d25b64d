r"""Writes the Hugging Face fixtures of tests/interop: small random BERTs and their outputs.

Runs with PyTorch and transformers, which bert_tf and its CI do not install; use a separate
venv (`pip install torch==2.13.0 transformers safetensors numpy`), whose python
BERT_TF_PEERS_PYTHON names (as for the tests, docs/design.md):

    "$BERT_TF_PEERS_PYTHON" tools/make_hf_reference.py --output_dir=tests/interop/fixtures

For each of two models (hidden_act "gelu" = exact erf, and "gelu_new" = tanh approximation
with layer_norm_eps 1e-3, so both the activation and the epsilon mapping are exercised), writes
`<output_dir>/hf_bert_<act>/` with config.json, model.safetensors (save_pretrained), vocab.txt,
tokenizer_config.json and reference.npz: fixed inputs and transformers' outputs for them
(sequence_output, pooled_output, MLM log-probabilities at masked positions, NSP logits).
`<output_dir>/hf_electra/` holds an ElectraForPreTraining (embedding_size 16 projected to
hidden_size 32) with the same files and its outputs (sequence_output, discriminator_logits).
`--models=electra` writes that one only.

Weights are drawn wider than BERT's initializer (LayerNorm gains around 1, biases non-zero) so
that a mis-mapped tensor or the wrong GELU changes the outputs by far more than the tests'
1e-5 tolerance.
"""

import argparse
import json
import os

import numpy as np
import torch
import transformers

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_VOCAB_SIZE = 100
_BATCH, _SEQ_LENGTH, _NUM_PREDICTIONS = 2, 12, 3


def make_vocab():
    """100 WordPiece entries: the special tokens, letters, '##' letters and a few words."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    words = ["the", "from", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on",
             "are", "with", "as", "he", "be", "at", "by", "this", "had", "not", "but", "what",
             "all", "were", "when", "we", "there", "can", "an", "your", "which", "their",
             "said", "if", "do", "will", "each", ".", ",", "!", "?"]
    vocab = _SPECIAL + letters + ["##" + c for c in letters] + words
    assert len(vocab) == len(set(vocab)) == _VOCAB_SIZE, len(vocab)
    return vocab


def randomize(model, seed):
    """Redraws every parameter: kernels N(0, 0.3), LayerNorm gains 1 + N(0, 0.1), biases
    N(0, 0.1)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "LayerNorm.weight" in name:
                param.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.3 * noise)


def make_inputs(seed):
    """Fixed inputs: [CLS] first, the second row padded after 8 tokens, two segments."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, _VOCAB_SIZE, size=(_BATCH, _SEQ_LENGTH)).astype("int64")
    ids[:, 0] = _SPECIAL.index("[CLS]")
    mask = np.ones((_BATCH, _SEQ_LENGTH), "int64")
    mask[1, 8:] = 0
    ids *= mask
    types = np.zeros((_BATCH, _SEQ_LENGTH), "int64")
    types[0, 6:] = 1
    types[1, 5:8] = 1
    positions = np.array([[1, 4, 9], [2, 3, 7]], "int64")
    return ids, mask, types, positions


def write_model(output_dir, hidden_act, layer_norm_eps, seed):
    config = transformers.BertConfig(
        vocab_size=_VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
        hidden_act=hidden_act, layer_norm_eps=layer_norm_eps)
    torch.manual_seed(seed)
    model = transformers.BertForPreTraining(config).eval()
    randomize(model, seed)
    model.save_pretrained(output_dir, safe_serialization=True)
    vocab_file = os.path.join(output_dir, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(make_vocab()) + "\n")
    with open(os.path.join(output_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f, indent=2)
        f.write("\n")

    ids, mask, types, positions = make_inputs(seed)
    with torch.no_grad():
        outputs = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                        token_type_ids=torch.from_numpy(types), output_hidden_states=True)
        encoder = model.bert(input_ids=torch.from_numpy(ids),
                             attention_mask=torch.from_numpy(mask),
                             token_type_ids=torch.from_numpy(types))
    masked_bpv = torch.from_numpy(np.take_along_axis(
        outputs.prediction_logits.numpy(), positions[:, :, None], axis=1))
    log_probs = torch.log_softmax(masked_bpv, dim=-1).numpy()
    np.savez(
        os.path.join(output_dir, "reference.npz"),
        input_word_ids=ids.astype("int32"), input_mask=mask.astype("int32"),
        input_type_ids=types.astype("int32"), masked_lm_positions=positions.astype("int32"),
        sequence_output=encoder.last_hidden_state.numpy(),
        pooled_output=encoder.pooler_output.numpy(),
        mlm_log_probs=log_probs,
        nsp_logits=outputs.seq_relationship_logits.numpy(),
        versions=np.array(f"transformers {transformers.__version__}, torch {torch.__version__}"))


def write_electra(output_dir, seed):
    """An ElectraForPreTraining (the discriminator) with factorized embeddings, and its
    outputs for the fixed inputs."""
    config = transformers.ElectraConfig(
        vocab_size=_VOCAB_SIZE, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
        type_vocab_size=2, hidden_act="gelu")
    torch.manual_seed(seed)
    model = transformers.ElectraForPreTraining(config).eval()
    randomize(model, seed)
    model.save_pretrained(output_dir, safe_serialization=True)
    ids, mask, types, _ = make_inputs(seed)
    with torch.no_grad():
        outputs = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                        token_type_ids=torch.from_numpy(types), output_hidden_states=True)
    np.savez(
        os.path.join(output_dir, "reference.npz"),
        input_word_ids=ids.astype("int32"), input_mask=mask.astype("int32"),
        input_type_ids=types.astype("int32"),
        sequence_output=outputs.hidden_states[-1].numpy(),
        discriminator_logits=outputs.logits.numpy(),
        versions=np.array(f"transformers {transformers.__version__}, torch {torch.__version__}"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="tests/interop/fixtures")
    parser.add_argument("--models", choices=("all", "electra"), default="all")
    args = parser.parse_args()
    if args.models == "all":
        for hidden_act, layer_norm_eps, seed in (("gelu", 1e-12, 1), ("gelu_new", 1e-3, 2)):
            directory = os.path.join(args.output_dir, f"hf_bert_{hidden_act}")
            os.makedirs(directory, exist_ok=True)
            write_model(directory, hidden_act, layer_norm_eps, seed)
            print(f"wrote {directory}")
    directory = os.path.join(args.output_dir, "hf_electra")
    os.makedirs(directory, exist_ok=True)
    write_electra(directory, seed=3)
    print(f"wrote {directory}")


if __name__ == "__main__":
    main()
